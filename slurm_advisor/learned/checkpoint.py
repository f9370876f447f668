"""Checkpoints: state_dicts (loaded with weights_only=True, never pickle) + JSON metadata.

A directory holds ``policy.pt``, ``speed.pt`` and ``meta.json``. The metadata carries the
feature schema version and job-type vocabulary; a checkpoint made for another schema is
refused with a message that says which versions differ.
"""
from __future__ import annotations

import json
import pickle
from dataclasses import dataclass
from pathlib import Path

import torch

from slurm_advisor.errors import InputError
from slurm_advisor.learned.features import SCHEMA_VERSION, FeatureSchema
from slurm_advisor.learned.hyper import Hyper
from slurm_advisor.learned.policy_net import PolicyNet
from slurm_advisor.learned.speed_model import SpeedNet

DEFAULT_MODEL_DIR = Path(__file__).resolve().parent.parent / "data" / "model"


@dataclass
class Checkpoint:
    policy: PolicyNet
    speed: SpeedNet
    schema: FeatureSchema
    hyper: Hyper
    meta: dict


def save(directory: Path, policy: PolicyNet, speed: SpeedNet, schema: FeatureSchema, hyper: Hyper,
         meta: dict) -> Path:
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    torch.save(_half(policy.state_dict()), directory / "policy.pt")
    torch.save(_half(speed.state_dict()), directory / "speed.pt")
    full = {"schema_version": schema.version, "types": list(schema.types), "hyper": hyper.to_dict(),
            **meta}
    (directory / "meta.json").write_text(json.dumps(full, indent=2, sort_keys=True) + "\n")
    return directory


def _half(state: dict) -> dict:
    """float16 on disk keeps the shipped model tiny; weights are upcast on load."""
    return {k: v.to(torch.float16) if v.is_floating_point() else v for k, v in state.items()}


def load(directory: Path | None = None) -> Checkpoint:
    directory = Path(directory) if directory else DEFAULT_MODEL_DIR
    meta_path = directory / "meta.json"
    try:
        meta = json.loads(meta_path.read_text())
    except FileNotFoundError:
        raise InputError(f"{directory}: not a model directory (no meta.json); "
                         "train one with `slurm-advisor train`") from None
    except json.JSONDecodeError as e:
        raise InputError(f"{meta_path}: not valid JSON: {e}") from None
    if meta.get("schema_version") != SCHEMA_VERSION:
        raise InputError(f"{directory}: model has feature schema version {meta.get('schema_version')}, "
                         f"this slurm-advisor uses version {SCHEMA_VERSION}; retrain the model")
    schema = FeatureSchema(tuple(meta["types"]))
    hyper = Hyper.from_dict(meta.get("hyper", {}))
    policy = PolicyNet(schema.node_dim, schema.global_dim, hyper.hidden)
    speed = SpeedNet(schema.sample_dim, hyper.speed_hidden)
    for net, name in ((policy, "policy.pt"), (speed, "speed.pt")):
        try:
            state = torch.load(directory / name, weights_only=True)
            net.load_state_dict({k: v.float() if v.is_floating_point() else v for k, v in state.items()})
        except (OSError, RuntimeError, pickle.UnpicklingError, EOFError) as e:
            raise InputError(f"{directory / name}: cannot load weights: {str(e).splitlines()[0]}") from None
    return Checkpoint(policy.eval(), speed.eval(), schema, hyper, meta)
