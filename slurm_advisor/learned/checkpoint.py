"""Checkpoints: state_dicts (loaded with weights_only=True, never pickle) + JSON metadata.

A directory holds ``policy.pt``, ``speed.pt``, ``meta.json`` and, when training fitted one,
``lif_profile.json``: the `lif` baseline's interference profile from the same samples. The
metadata carries the feature schema version and job-type vocabulary; a checkpoint made for
another schema is refused with a message that says which versions differ.

The speed model is of one of two kinds. A model trained now is the site's structured ensemble
(``site_speed``; meta.json: ``speed_kind: "site"``, its own job-type vocabulary learned from
the samples under ``speed_vocab`` and ``speed_members``), saved in float32. A checkpoint
without ``speed_kind`` (the shipped default model, any model trained before) holds the MLP of
``speed_model`` on the policy's feature schema, and loads as it always did.
"""
from __future__ import annotations

import functools
import json
import pickle
from dataclasses import dataclass, fields
from pathlib import Path

import torch

from slurm_advisor.errors import InputError
from slurm_advisor.learned import site_features
from slurm_advisor.learned.features import SCHEMA_VERSION, FeatureSchema
from slurm_advisor.learned.hyper import Hyper
from slurm_advisor.learned.policy_net import PolicyNet
from slurm_advisor.learned.site_net import SiteSpeedNet
from slurm_advisor.learned.site_speed import SiteSpeedModel
from slurm_advisor.learned.speed_model import LearnedSpeedModel, SpeedNet
from slurm_advisor.learned.vocab import TypeVocab
from slurm_advisor.policies.lif import PROFILE_FILE, InterferenceProfile

DEFAULT_MODEL_DIR = Path(__file__).resolve().parent.parent / "data" / "model"


@dataclass
class Checkpoint:
    policy: PolicyNet
    speed: SpeedNet | SiteSpeedNet
    schema: FeatureSchema
    hyper: Hyper
    meta: dict
    speed_vocab: TypeVocab | None = None  # the site model's own vocabulary (None: an MLP speed model)

    @functools.cached_property
    def speed_model(self) -> LearnedSpeedModel | SiteSpeedModel:
        """The fitted speed model behind the SpeedModel and SpeedPredictor interfaces."""
        if self.speed_vocab is None:
            return LearnedSpeedModel(self.speed, self.schema)
        return SiteSpeedModel(self.speed, self.speed_vocab)


def save(directory: Path, policy: PolicyNet, speed: SpeedNet | SiteSpeedModel, schema: FeatureSchema,
         hyper: Hyper, meta: dict, lif_profile: InterferenceProfile | None = None) -> Path:
    """``speed``: a fitted :class:`SiteSpeedModel` or (older models, tests) a bare SpeedNet."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    if lif_profile is not None:
        lif_profile.save(directory / PROFILE_FILE)
    else:  # no stale profile from an earlier model in the same directory
        (directory / PROFILE_FILE).unlink(missing_ok=True)
    torch.save(_half(policy.state_dict()), directory / "policy.pt")
    kind = {}
    if isinstance(speed, SiteSpeedModel):
        torch.save(speed.net.state_dict(), directory / "speed.pt")
        kind = {"speed_kind": "site", "speed_vocab": speed.vocab.to_dict(), "speed_members": speed.net.members,
                "speed_resid": speed.net.n_resid}
    else:
        torch.save(_half(speed.state_dict()), directory / "speed.pt")
    full = {"schema_version": schema.version, "types": list(schema.types), "hyper": hyper.to_dict(),
            **meta, **kind}
    (directory / "meta.json").write_text(json.dumps(full, indent=2, sort_keys=True) + "\n")
    return directory


def _half(state: dict) -> dict:
    """float16 on disk keeps the shipped model tiny; weights are upcast on load."""
    return {k: v.to(torch.float16) if v.is_floating_point() else v for k, v in state.items()}


def load(directory: Path | None = None) -> Checkpoint:
    """The checkpoint in ``directory`` (default: the shipped model). Every flaw a user can cause
    (missing or unreadable files, a malformed field of meta.json, weights that are no state_dict of
    this network) is one :class:`InputError` naming the file and, for meta.json, the field."""
    directory = Path(directory) if directory else DEFAULT_MODEL_DIR
    meta_path = directory / "meta.json"
    meta = _read_meta(directory, meta_path)
    schema = FeatureSchema(_types(meta_path, meta))
    hyper = _hyper(meta_path, meta.get("hyper", {}))
    _deployment(meta_path, meta)
    policy = PolicyNet(schema.node_dim, schema.global_dim, hyper.hidden)
    vocab = _speed_vocab(meta_path, meta)
    if vocab is None:
        speed = SpeedNet(schema.sample_dim, hyper.speed_hidden)
    else:
        speed = SiteSpeedNet(vocab.n_slots, meta["speed_members"], hyper.speed_hidden, vocab.n_node_slots,
                             _speed_resid(meta_path, meta))
    for net, name in ((policy, "policy.pt"), (speed, "speed.pt")):
        _load_weights(net, directory / name)
    return Checkpoint(policy.eval(), speed.eval(), schema, hyper, meta, vocab)


def _speed_resid(meta_path: Path, meta: dict) -> int:
    """How many residual inputs the site speed model reads (absent: fitted before the rack inputs)."""
    n = meta.get("speed_resid", site_features.N_RESID_WITHOUT_RACKS)
    if type(n) is not int or n not in (site_features.N_RESID_WITHOUT_RACKS, site_features.N_RESID):
        raise InputError(f"{meta_path}: field 'speed_resid' must be {site_features.N_RESID_WITHOUT_RACKS} or "
                         f"{site_features.N_RESID}, got {n!r}")
    return n


def _speed_vocab(meta_path: Path, meta: dict) -> TypeVocab | None:
    """The site speed model's vocabulary, or None for a checkpoint of the older MLP kind."""
    kind = meta.get("speed_kind")
    if kind is None:
        return None
    if kind != "site":
        raise InputError(f"{meta_path}: field 'speed_kind' must be \"site\" or absent, got {kind!r}")
    members = meta.get("speed_members")
    if isinstance(members, bool) or not isinstance(members, int) or members < 1:
        raise InputError(f"{meta_path}: field 'speed_members' must be a positive integer, got {members!r}")
    raw = meta.get("speed_vocab")
    try:
        if not isinstance(raw, dict) or not all(isinstance(t, str) for t in raw["types"]):
            raise TypeError("not an object with a list of type names")
        return TypeVocab.from_dict(raw)
    except (KeyError, TypeError, ValueError) as e:
        raise InputError(f"{meta_path}: field 'speed_vocab' is malformed: {e}") from None


def _read_meta(directory: Path, meta_path: Path) -> dict:
    try:
        meta = json.loads(meta_path.read_bytes().decode("utf-8"))
    except FileNotFoundError:
        raise InputError(f"{directory}: not a model directory (no meta.json); "
                         "train one with `slurm-advisor train`") from None
    except OSError as e:
        raise InputError(f"{meta_path}: cannot read: {e.strerror}") from None
    except UnicodeDecodeError as e:
        raise InputError(f"{meta_path}: not UTF-8 text (byte {e.start})") from None
    except json.JSONDecodeError as e:
        raise InputError(f"{meta_path}: not valid JSON: {e}") from None
    if not isinstance(meta, dict):
        raise InputError(f"{meta_path}: must be a JSON object, got {type(meta).__name__}")
    version = meta.get("schema_version")
    if version != SCHEMA_VERSION:
        raise InputError(f"{meta_path}: field 'schema_version': model has feature schema version "
                         f"{version}, this slurm-advisor uses version {SCHEMA_VERSION}; retrain the model")
    return meta


def _types(meta_path: Path, meta: dict) -> tuple[str, ...]:
    types = meta.get("types")
    if not isinstance(types, list) or not all(isinstance(t, str) for t in types):
        raise InputError(f"{meta_path}: field 'types' must be a list of job-type names, got {types!r}")
    return tuple(types)


def _hyper(meta_path: Path, raw: object) -> Hyper:
    """Known hyperparameters must have their default's type (an int where a float is due is fine;
    a tuple is a list of numbers in JSON)."""
    if not isinstance(raw, dict):
        raise InputError(f"{meta_path}: field 'hyper' must be a JSON object, got {type(raw).__name__}")
    defaults = Hyper()
    for f in fields(Hyper):
        if f.name not in raw:
            continue
        value, want = raw[f.name], type(getattr(defaults, f.name))
        if want is tuple:
            ok = isinstance(value, list) and bool(value) and all(_number(x) and x > 0 for x in value)
        else:
            ok = (isinstance(value, want) or (want is float and isinstance(value, int))) and not isinstance(value, bool)
        if not ok or (f.name in ("hidden", "speed_hidden") and value < 1):
            raise InputError(f"{meta_path}: field 'hyper.{f.name}' must be a "
                             f"{_kind(f.name, want)}, got {value!r}")
    return Hyper.from_dict(raw)


def _kind(name: str, want: type) -> str:
    if want is tuple:
        return "non-empty list of positive numbers"
    return ("positive " if name.endswith("hidden") else "") + want.__name__


def _number(x: object) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _deployment(meta_path: Path, meta: dict) -> None:
    """'deploy' (the network, the search or a baseline heuristic) and 'patience' (a share in [0, 1])."""
    from slurm_advisor.policies import BASELINES

    deploy = meta.get("deploy", "network")
    if deploy not in ("network", "search", *BASELINES):
        raise InputError(f"{meta_path}: field 'deploy' must be one of network, search, {', '.join(BASELINES)}; "
                         f"got {deploy!r}")
    _patience(meta_path, "patience", meta.get("patience", 0.0))
    fast = meta.get("fast_deploy")  # optional: models trained before it have none (learned-fast: the teacher)
    if fast is not None:
        if not isinstance(fast, dict) or fast.get("deploy") not in ("network", *BASELINES):
            raise InputError(f"{meta_path}: field 'fast_deploy' must be an object whose 'deploy' is one of "
                             f"network, {', '.join(BASELINES)} (not the search); got {fast!r}")
        _patience(meta_path, "fast_deploy.patience", fast.get("patience", 0.0))


def _patience(meta_path: Path, field: str, patience: object) -> None:
    if isinstance(patience, bool) or not isinstance(patience, int | float) or not 0 <= patience <= 1:
        raise InputError(f"{meta_path}: field '{field}' must be a number from 0 to 1, got {patience!r}")


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
