"""The large-cluster decision path decides as the implementation it replaced.

Recorded (data/fast_selective_golden.json, see data/README.md): the placements and holds of the
decision path before it was made fast (rows built column by column for each call, the order
rebuilt by ``numpy.delete``/``insert``, every node's "whole" recomputed per task), on loaded
clusters of 16 nodes (the selective path forced) and 1,000 nodes, with a trained network that
fills its nodes and a random one. The optimised path must give the same, task by task.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from learned_networks import filling_network, random_network

from slurm_advisor.domain import ClusterSnapshot, Job, Node, Placement, Role, TaskAssignment
from slurm_advisor.learned.policy.features import FeatureSchema
from slurm_advisor.policies.base import Hold
from slurm_advisor.policies.learned.agent import LearnedPolicy
from slurm_advisor.policies.patience import PatientPolicy
from slurm_advisor.policies.slurm_default import SlurmDefaultPolicy
from slurm_advisor.traces.synthetic import synthetic_jobs

SCHEMA = FeatureSchema()
GOLDEN = json.loads((Path(__file__).parent / "data" / "fast_selective_golden.json").read_text())


def cluster(n: int, per_switch: int) -> tuple[Node, ...]:
    return tuple(Node(f"g{i:04d}", 48, 8, 384_000, f"s{i // per_switch}") for i in range(n))


def jobs(n: int, seed: int) -> list[Job]:
    philly, large = synthetic_jobs(n, seed=seed, mix="philly"), synthetic_jobs(n, seed=seed + 1, mix="large")
    return [philly[i] if i % 2 else large[i] for i in range(n)]


def loaded(nodes, seed: int, load: float = 0.6) -> ClusterSnapshot:
    """~``load`` of the GPUs taken by slurm-default's placements, a quarter removed and refilled."""
    rng = np.random.default_rng(seed)
    snap, stream = ClusterSnapshot.empty(nodes, time=100.0), iter(jobs(40 * len(nodes), seed))
    gpus, target = 0, load * sum(n.gpus for n in nodes)
    for _ in range(2):
        while gpus < target:
            job = next(stream)
            placement = SlurmDefaultPolicy().place(snap, job)
            if placement is not None:
                snap, gpus = snap.with_job(job, placement, float(rng.uniform(0, 100))), gpus + job.total_demand().gpus
        for rj in [rj for rj in snap.running if rng.random() < 0.25]:
            snap, gpus = snap.without_job(rj.job.id), gpus - rj.job.total_demand().gpus
    return snap.at(100.0)


class SpreadCost:
    """A fixed speed predictor for the holds: spanning nodes and sharing them cost speed."""

    def predict(self, snapshot: ClusterSnapshot, job: Job, placement: Placement) -> float:
        nodes = placement.nodes()
        shared = sum(len(snapshot.jobs_on(n)) for n in nodes)
        return job.num_workers / (1 + 0.3 * (len(nodes) - 1) + 0.05 * shared)


def matches(got: Placement | Hold | None, recorded: dict | None, job: Job) -> bool:
    """Whether a decision is the recorded one: None, a hold with its node cap, or a placement."""
    if recorded is None or got is None:
        return got is recorded
    if "hold" in recorded:
        return isinstance(got, Hold) and got.max_nodes == recorded["hold"]
    return got == Placement(job.id, tuple(TaskAssignment(Role(role), node) for role, node in recorded["place"]))


@pytest.mark.parametrize("n, per_switch, seeds, count", [(16, 8, (0, 1), 100), (1000, 32, (0,), 150)])
@pytest.mark.parametrize("which", ["filling", "random"])
def test_fast_selective_path_decides_and_holds_as_recorded(n, per_switch, seeds, count, which) -> None:
    net = filling_network() if which == "filling" else random_network()
    fast = LearnedPolicy(net, SCHEMA, full_scoring_max_nodes=0)
    patient = PatientPolicy(fast, SpreadCost(), 0.85)
    recorded = iter(GOLDEN[f"{which}/{n}"])
    nodes = cluster(n, per_switch)
    for seed in seeds:
        snap, rng = loaded(nodes, seed), np.random.default_rng(seed)
        for i, job in enumerate(jobs(count, 500 + seed)):
            placement, decision = next(recorded)
            assert matches(fast.place(snap, job, np.random.default_rng(0)), placement, job), (n, seed, i, job)
            got = patient.place(snap, job, np.random.default_rng(0))
            assert matches(got, decision, job), (n, seed, i, job)
            if isinstance(got, Placement) and i % 3 == 0:  # the load moves: a job starts, one ends
                snap = snap.with_job(job, got, snap.time + 1.0)
                snap = snap.without_job(snap.running[int(rng.integers(len(snap.running) - 1))].job.id)
    assert next(recorded, None) is None
