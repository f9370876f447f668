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
from dataclasses import dataclass, fields
from pathlib import Path

from slurm_advisor.errors import InputError
from slurm_advisor.learned import site_features
from slurm_advisor.learned.features import SCHEMA_VERSION, FeatureSchema
from slurm_advisor.learned.hyper import Hyper
from slurm_advisor.learned.vocab import TypeVocab

DEFAULT_MODEL_DIR = Path(__file__).resolve().parent.parent / "data" / "model"


@dataclass(frozen=True)
class ModelMeta:
    meta: dict                      # meta.json as read
    schema: FeatureSchema
    hyper: Hyper
    speed_vocab: TypeVocab          # the site model's own vocabulary
    speed_resid: int                # the site model's residual inputs

    @property
    def speed_members(self) -> int:
        return self.meta["speed_members"]


def read(directory: Path) -> ModelMeta:
    """The validated meta.json of the model in ``directory``."""
    meta_path = directory / "meta.json"
    meta = _read_meta(directory, meta_path)
    schema = FeatureSchema(_types(meta_path, meta))
    hyper = _hyper(meta_path, meta.get("hyper", {}))
    _deployment(meta_path, meta)
    vocab = _speed_vocab(meta_path, meta)
    resid = _speed_resid(meta_path, meta)
    return ModelMeta(meta, schema, hyper, vocab, resid)


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
