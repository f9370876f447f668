"""Load the learned policy for the registry, as it is deployed.

Training records whether the network beat its teacher heuristic (under the fitted speed model,
on the training trace). If it did not, the model directory deploys the teacher instead: the
advisor never ships a policy that its own evaluation found worse than the rule it learned from.
Either may hold jobs for a better placement (``patience``, see ``patience.py``) if training
found that it pays. Or training found the search (``search.py``) best: it weighs the network's
placement, the baselines' and "hold" with the model's speed ensemble.

The model is loaded for serving (``models.served``: numpy, no torch); ``policy_of`` takes a torch
checkpoint as well (``training.checkpoint``), for training and for comparing the two.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from slurm_advisor.domain import ClusterSnapshot, Job, Placement
from slurm_advisor.models import meta as model_meta
from slurm_advisor.models import served
from slurm_advisor.policies.base import Hold, Policy, warm
from slurm_advisor.policies.learned.agent import LearnedPolicy
from slurm_advisor.policies.learned.fast import runs
from slurm_advisor.policies.patience import PatientPolicy


class GatedPolicy:
    """`learned` when training kept the teacher: the teacher decides, under the learned name."""

    name = "learned"

    def __init__(self, teacher: Policy):
        self.teacher = teacher

    def place(self, snapshot: ClusterSnapshot, job: Job, rng: np.random.Generator) -> Placement | Hold | None:
        return self.teacher.place(snapshot, job, rng)

    def score_nodes(self, snapshot: ClusterSnapshot, job: Job) -> dict[str, float]:
        return self.teacher.score_nodes(snapshot, job)

    def warm(self, snapshot: ClusterSnapshot) -> None:
        warm(self.teacher, snapshot)


def load_learned_policy(model_dir: Path | None, fast: bool = False) -> Policy:
    """The model as its gate deployed it; ``fast`` (``learned-fast``): where that is the search,
    whose decisions do not fit the daemon's 2 ms budget, the gate's pick among the other
    candidates (meta.json ``fast_deploy``; the plain teacher for a model trained before it)."""
    return policy_of(served.load(model_dir, _baselines()), model_dir, fast)


def policy_of(ckpt, model_dir: Path | None, fast: bool = False) -> Policy:
    """``load_learned_policy`` of a loaded model: a ``served.ServedModel`` or a torch checkpoint."""
    from slurm_advisor.policies import make_policy

    deployed, cheaper = model_meta.deployments(ckpt.meta)
    deploy, patience = (cheaper if fast else deployed).deploy, (cheaper if fast else deployed).patience
    if deploy == "search":  # it holds by its own weighing: no patience on top
        return GatedPolicy(search_of(ckpt, model_dir))
    inner = _network(ckpt) if deploy == "network" else make_policy(deploy)
    if patience > 0:  # hold jobs by the fitted speed model's predictions, as training judged it
        inner = PatientPolicy(inner, ckpt.speed_model, patience)
    return inner if deploy == "network" else GatedPolicy(inner)


def _baselines() -> tuple[str, ...]:
    from slurm_advisor.policies import BASELINES  # the registry imports this module

    return BASELINES


def load_search_policy(model_dir: Path | None) -> Policy:
    """`search` over a trained model: Slurm's own choice as the base, the trained network and
    every placement baseline as proposers, scored by the model's fitted speed ensemble."""
    return search_of(served.load(model_dir, _baselines()), model_dir)


def search_of(ckpt, model_dir: Path | None) -> Policy:
    """``load_search_policy`` of a loaded model (served or a torch checkpoint)."""
    from slurm_advisor.policies.lif import profile_for_model
    from slurm_advisor.policies.search import search_over

    return search_over(_network(ckpt), ckpt.speed_model, profile_for_model(model_dir))


def _network(ckpt) -> LearnedPolicy:
    """The model's network, greedy, its run probe (``runs``) made now: a loading daemon pays
    it before it serves the model, not in its first request on a large cluster."""
    return LearnedPolicy(ckpt.policy, ckpt.schema, mode="greedy",
                         fill_runs=runs.fills_its_nodes(ckpt.policy, ckpt.schema))
