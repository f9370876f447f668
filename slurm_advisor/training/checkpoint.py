"""Checkpoints for training: state_dicts (loaded with weights_only=True, never pickle) + JSON metadata.

A directory holds ``policy.pt``, ``speed.pt``, ``meta.json`` (validated by ``models.meta``),
``weights.npz`` (the same weights as numpy arrays: what serving reads without torch,
``models.weights``) and, when training fitted one, ``lif_profile.json``: the `lif` baseline's
interference profile from the same samples.

The speed model is the site's structured ensemble (``learned.speed.fit``; meta.json: ``speed_kind:
"site"``), saved in float32; the policy network in float16.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

import torch

from slurm_advisor.learned.hyper import Hyper
from slurm_advisor.learned.policy.features import FeatureSchema
from slurm_advisor.learned.policy.net import PolicyNet
from slurm_advisor.learned.speed.fit import SiteSpeedModel
from slurm_advisor.learned.speed.net import SiteSpeedNet
from slurm_advisor.learned.speed.vocab import TypeVocab
from slurm_advisor.models import meta as model_meta
from slurm_advisor.models import torch_files, weights
from slurm_advisor.models.meta import DEFAULT_MODEL_DIR
from slurm_advisor.policies import BASELINES
from slurm_advisor.policies.lif import PROFILE_FILE, InterferenceProfile

__all__ = ["Checkpoint", "export", "load", "save"]


@dataclass
class Checkpoint:
    policy: PolicyNet
    speed: SiteSpeedNet
    schema: FeatureSchema
    hyper: Hyper
    meta: dict
    speed_vocab: TypeVocab  # the site model's own vocabulary

    @functools.cached_property
    def speed_model(self) -> SiteSpeedModel:
        """The fitted speed model behind the SpeedModel and SpeedPredictor interfaces."""
        return SiteSpeedModel(self.speed, self.speed_vocab)


def save(directory: Path, policy: PolicyNet, speed: SiteSpeedModel, schema: FeatureSchema,
         hyper: Hyper, meta: dict, lif_profile: InterferenceProfile | None = None) -> Path:
    """``speed``: the fitted site speed model."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    if lif_profile is not None:
        lif_profile.save(directory / PROFILE_FILE)
    else:  # no stale profile from an earlier model in the same directory
        (directory / PROFILE_FILE).unlink(missing_ok=True)
    architecture = {"speed_kind": "site", "speed_vocab": speed.vocab.to_dict(), "speed_members": speed.net.members,
                    "speed_resid": speed.net.n_resid}
    policy_state, speed_state = _as_saved(policy, speed.net)
    torch.save(policy_state, directory / "policy.pt")
    torch.save(speed_state, directory / "speed.pt")
    weights.write(directory, _numpy(policy_state), _numpy(speed_state))
    model_meta.write(directory, schema, hyper, architecture, meta)
    return directory


def export(directory: Path) -> Path:
    """Write ``weights.npz`` for a model saved before it existed (or check one again): the .pt
    files' weights, in their precision. meta.json is left as it is (it names the version)."""
    ckpt = load(directory)
    policy_state, speed_state = _as_saved(ckpt.policy, ckpt.speed)
    return weights.write(Path(directory), _numpy(policy_state), _numpy(speed_state))


def _as_saved(policy: PolicyNet, speed: SiteSpeedNet) -> tuple[dict, dict]:
    """The state_dicts as saved: float16 keeps the policy small (weights are upcast on load); the
    site ensemble stays float32 (its exponentials amplify rounding)."""
    return _half(policy.state_dict()), speed.state_dict()


def _numpy(state: dict) -> dict:
    """The arrays as saved in the .pt files, float16 ones too."""
    return {k: v.detach().cpu().numpy() for k, v in state.items()}


def _half(state: dict) -> dict:
    return {k: v.to(torch.float16) if v.is_floating_point() else v for k, v in state.items()}


def load(directory: Path | None = None) -> Checkpoint:
    """The checkpoint in ``directory`` (default: the shipped model) with its torch networks, for
    training and evaluation (serving: ``models.served``). Every flaw a user can cause (missing
    or unreadable files, a malformed field of meta.json, weights that are no state_dict of this
    network) is one :class:`InputError` naming the file and, for meta.json, the field."""
    directory = Path(directory) if directory else DEFAULT_MODEL_DIR
    m = model_meta.read(directory, BASELINES)
    policy, speed = torch_files.networks(directory, m)
    return Checkpoint(policy, speed, m.schema, m.hyper, m.meta, m.speed_vocab)
