"""The model directory's torch files (``policy.pt``, ``speed.pt``) read into the networks they hold.

The only module of ``models`` that imports torch: training loads a checkpoint through it
(``training.checkpoint``), and serving only where a model has no ``weights.npz`` yet
(``models.weights``). State dicts are loaded with ``weights_only=True``: never a pickle.
"""
from __future__ import annotations

import pickle
from pathlib import Path

import torch

from slurm_advisor.errors import InputError
from slurm_advisor.learned.policy.net import PolicyNet
from slurm_advisor.learned.speed.net import SiteSpeedNet
from slurm_advisor.models.meta import ModelMeta


def networks(directory: Path, meta: ModelMeta) -> tuple[PolicyNet, SiteSpeedNet]:
    """The policy and speed networks of the model in ``directory``, in eval mode; every flaw
    (a missing, unreadable or foreign file, NaN weights) one InputError naming the file."""
    policy = PolicyNet(meta.schema.node_dim, meta.schema.global_dim, meta.hyper.hidden)
    speed = SiteSpeedNet(meta.speed_vocab.n_slots, meta.speed_members, meta.hyper.speed_hidden,
                         meta.speed_vocab.n_node_slots, meta.speed_resid)
    for net, name in ((policy, "policy.pt"), (speed, "speed.pt")):
        _load_weights(net, Path(directory) / name)
    return policy.eval(), speed.eval()


def _load_weights(net: torch.nn.Module, path: Path) -> None:
    try:
        state = torch.load(path, weights_only=True)
        if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
            raise InputError(f"{path}: cannot load weights: not a state_dict of tensors")
        net.load_state_dict({k: v.float() if v.is_floating_point() else v for k, v in state.items()})
        broken = next((k for k, v in state.items() if v.is_floating_point() and not torch.isfinite(v).all()), None)
        if broken is not None:  # it loads, and every decision it makes would be noise
            raise InputError(f"{path}: cannot load weights: {broken} holds NaN or infinite values")
    except (OSError, RuntimeError, pickle.UnpicklingError, EOFError) as e:
        said = str(e).splitlines() or [f"{type(e).__name__} (an empty or truncated file)"]
        raise InputError(f"{path}: cannot load weights: {said[0]}") from None
