"""The model as the daemon serves it: its networks in numpy (``learned.numpy_nets``), no torch.

Decisions made with it equal those of the torch checkpoint (``training.checkpoint.load``) of the
same directory: the policy's forward pass is numpy in both, on the same float32 weights, and the
site ensemble's numpy pass is checked against torch's (``tests/models``). It is also the faster
(``benchmarks/decision_time.py --backends``), so serving uses it whether torch is installed or not.
"""
from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from slurm_advisor.learned.hyper import Hyper
from slurm_advisor.learned.numpy_nets import NumpySiteNet
from slurm_advisor.learned.policy.features import FeatureSchema
from slurm_advisor.learned.speed.ensemble import SiteEnsemble
from slurm_advisor.learned.speed.vocab import TypeVocab
from slurm_advisor.models import meta as model_meta
from slurm_advisor.models import weights


@dataclass(frozen=True)
class ServedModel:
    policy: dict[str, np.ndarray]   # the policy network's state_dict arrays (``LearnedPolicy`` takes them)
    speed_model: SiteEnsemble
    schema: FeatureSchema
    hyper: Hyper
    meta: dict
    speed_vocab: TypeVocab


def load(directory: Path | None = None, baselines: Collection[str] | None = None) -> ServedModel:
    """The model in ``directory`` (default: the packaged one); InputError for any flaw.
    ``baselines``: as ``models.meta.read``'s."""
    directory = Path(directory) if directory else model_meta.DEFAULT_MODEL_DIR
    meta = model_meta.read(directory, baselines)
    policy, speed = weights.read(directory, meta)
    speed_model = SiteEnsemble(NumpySiteNet(speed, meta.speed_resid), meta.speed_vocab)
    return ServedModel(policy, speed_model, meta.schema, meta.hyper, meta.meta, meta.speed_vocab)
