"""A model directory's meta.json, read and validated in one place (no torch here: the daemon reads it).

Every flaw a user can cause (a missing or unreadable file, a malformed field) is one
:class:`InputError` naming the file and the field. The metadata carries the feature schema
version and job-type vocabulary; a model made for another schema is refused with a message that
says which versions differ. The speed model is the site's structured ensemble (``speed_kind:
"site"``, its own vocabulary under ``speed_vocab``, ``speed_members``, ``speed_resid``); a model
of the legacy MLP kind (no ``speed_kind``) is refused with the command that replaces it.
"""
from __future__ import annotations

import json
import os
from collections.abc import Collection
from dataclasses import dataclass, fields
from pathlib import Path

from slurm_advisor.errors import InputError
from slurm_advisor.learned.hyper import Hyper
from slurm_advisor.learned.policy.features import SCHEMA_VERSION, FeatureSchema
from slurm_advisor.learned.speed import features as site_features
from slurm_advisor.learned.speed.vocab import TypeVocab

DEFAULT_MODEL_DIR = Path(__file__).resolve().parent.parent / "data" / "model"


@dataclass(frozen=True)
class Deployment:
    """What a model serves as: its network, the search or a baseline heuristic, holding jobs
    whose predicted speed falls below ``patience`` of alone (0: never)."""

    deploy: str = "network"
    patience: float = 0.0


@dataclass(frozen=True)
class ModelMeta:
    """meta.json, validated: the typed fields every reader uses, and ``meta``, the whole record
    as read (the training report beside them: curves, validation scores, what made it)."""

    meta: dict
    schema: FeatureSchema
    hyper: Hyper
    speed_vocab: TypeVocab          # the site model's own vocabulary
    speed_resid: int                # the site model's residual inputs
    speed_members: int


def write(directory: Path, schema: FeatureSchema, hyper: Hyper, speed: dict, report: dict) -> Path:
    """meta.json of a model: its schema, hyperparameters and speed model's architecture
    (``speed``: speed_kind, speed_vocab, speed_members, speed_resid) beside the training
    ``report`` (deploy, patience, fast_deploy and what training measured). Read back and
    validated before it is left in place, so no writer can leave a record ``read`` refuses."""
    path = Path(directory) / "meta.json"
    record = {"schema_version": schema.version, "types": list(schema.types), "hyper": hyper.to_dict(),
              **report, **speed}
    tmp = path.with_name(".meta.json.tmp")
    tmp.write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, path)
    read(Path(directory))
    return path


def annotate(directory: Path, **fields: object) -> Path:
    """Add report fields (``made_by``, ...) to a model's meta.json, the architecture untouched."""
    current = read(Path(directory))
    clash = {"schema_version", "types", "hyper", "speed_kind", "speed_vocab", "speed_members", "speed_resid"} & set(fields)
    if clash:
        raise ValueError(f"annotate cannot change {sorted(clash)}")
    speed = {k: current.meta[k] for k in ("speed_kind", "speed_vocab", "speed_members", "speed_resid")
             if k in current.meta}
    report = {k: v for k, v in current.meta.items()
              if k not in {"schema_version", "types", "hyper", *speed}}
    return write(directory, current.schema, current.hyper, speed, {**report, **fields})


def read(directory: Path, baselines: Collection[str] | None = None) -> ModelMeta:
    """The validated meta.json of the model in ``directory``. ``baselines``: the heuristics a model
    may deploy (the policies registry's ``BASELINES``, given by whoever turns the model into a
    policy); None: only the form of 'deploy' is checked (reading a model for what it says)."""
    meta_path = directory / "meta.json"
    meta = _read_meta(directory, meta_path)
    schema = FeatureSchema(_types(meta_path, meta))
    hyper = _hyper(meta_path, meta.get("hyper", {}))
    _deployment(meta_path, meta, baselines)
    vocab = _speed_vocab(meta_path, meta)
    resid = _speed_resid(meta_path, meta)
    return ModelMeta(meta, schema, hyper, vocab, resid, meta["speed_members"])


def deployments(meta: dict) -> tuple[Deployment, Deployment]:
    """(deployment, fast deployment) of a validated record (``ModelMeta.meta``): what the model
    serves as, and what `learned-fast` serves where that is the search (the gate's pick without
    it; a model trained before that was recorded: its plain teacher)."""
    deployed = Deployment(meta.get("deploy", "network"), float(meta.get("patience", 0.0)))
    if deployed.deploy != "search":
        return deployed, deployed
    fast = meta.get("fast_deploy") or {"deploy": meta.get("teacher", "slurm-default")}
    return deployed, Deployment(fast["deploy"], float(fast.get("patience", 0.0)))


def _speed_resid(meta_path: Path, meta: dict) -> int:
    """How many residual inputs the site speed model reads (absent: fitted before the rack inputs)."""
    n = meta.get("speed_resid", site_features.N_RESID_WITHOUT_RACKS)
    if type(n) is not int or n not in (site_features.N_RESID_WITHOUT_RACKS, site_features.N_RESID):
        raise InputError(f"{meta_path}: field 'speed_resid' must be {site_features.N_RESID_WITHOUT_RACKS} or "
                         f"{site_features.N_RESID}, got {n!r}")
    return n


def _speed_vocab(meta_path: Path, meta: dict) -> TypeVocab:
    """The site speed model's vocabulary."""
    kind = meta.get("speed_kind")
    if kind is None:  # saved before the site ensemble replaced the MLP speed model
        raise InputError(f"{meta_path}: field 'speed_kind' is missing: the model has the legacy MLP speed model, "
                         "which this slurm-advisor no longer reads; train a new one with `slurm-advisor train` "
                         "(or `slurm-advisor retrain` on a site's store)")
    if kind != "site":
        raise InputError(f"{meta_path}: field 'speed_kind' must be \"site\", got {kind!r}")
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


def _deployment(meta_path: Path, meta: dict, baselines: Collection[str] | None) -> None:
    """'deploy' (the network, the search or a baseline heuristic) and 'patience' (a share in [0, 1])."""
    deploy = meta.get("deploy", "network")
    if not _deployable(deploy, ("network", "search"), baselines):
        raise InputError(f"{meta_path}: field 'deploy' must be one of network, search, {_names(baselines)}; "
                         f"got {deploy!r}")
    _patience(meta_path, "patience", meta.get("patience", 0.0))
    fast = meta.get("fast_deploy")  # optional: models trained before it have none (learned-fast: the teacher)
    if fast is not None:
        if not isinstance(fast, dict) or not _deployable(fast.get("deploy"), ("network",), baselines):
            raise InputError(f"{meta_path}: field 'fast_deploy' must be an object whose 'deploy' is one of "
                             f"network, {_names(baselines)} (not the search); got {fast!r}")
        _patience(meta_path, "fast_deploy.patience", fast.get("patience", 0.0))


def _deployable(name: object, ours: tuple[str, ...], baselines: Collection[str] | None) -> bool:
    if baselines is None:  # any heuristic's name: a non-empty string other than the search
        return name in ours or (isinstance(name, str) and bool(name) and name not in ("network", "search"))
    return name in ours or name in baselines


def _names(baselines: Collection[str] | None) -> str:
    return ", ".join(baselines) if baselines is not None else "a baseline heuristic's name"


def _patience(meta_path: Path, field: str, patience: object) -> None:
    if isinstance(patience, bool) or not isinstance(patience, int | float) or not 0 <= patience <= 1:
        raise InputError(f"{meta_path}: field '{field}' must be a number from 0 to 1, got {patience!r}")
