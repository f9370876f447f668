"""The oracle asks the ground truth only about the jobs a candidate touches, and decides as it
did when it passed every running job."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from slurm_advisor.domain import ClusterSnapshot, Node, RunningJob
from slurm_advisor.policies.oracle import OraclePolicy
from slurm_advisor.policies.slurm_default import SlurmDefaultPolicy
from slurm_advisor.speedmodels.base import ColocationIndex
from slurm_advisor.speedmodels.contention import ContentionSpeedModel
from slurm_advisor.traces.synthetic import synthetic_jobs

NODES = tuple(Node(f"g{i:02d}", 48, 8, 384_000, f"s{i // 8}") for i in range(16))


def loaded(seed: int) -> ClusterSnapshot:
    snap = ClusterSnapshot.empty(NODES)
    for job in synthetic_jobs(60, seed=seed, mix="large"):
        placement = SlurmDefaultPolicy().place(snap, job)
        if placement is not None and sum(rj.job.total_demand().gpus for rj in snap.running) < 0.7 * 128:
            snap = snap.with_job(job, placement)
    return snap


def reference_gain(oracle: OraclePolicy, snapshot, job, placement) -> float:
    """The gain computed over every running job (before the oracle looked only at neighbours)."""
    after = snapshot.running + (RunningJob(job, placement, snapshot.time),)
    touched = ColocationIndex(after).neighbours(after[-1])
    before = oracle.truth.speeds(snapshot.nodes, snapshot.running, touched) if touched else {}
    now = oracle.truth.speeds(snapshot.nodes, after, touched | {job.id})
    harm = sum(1.0 - now[j] / before[j] for j in sorted(touched))
    return now[job.id] / oracle._isolated(job) - harm


@pytest.mark.parametrize("seed", range(3))
def test_gains_and_choices_equal_asking_about_every_running_job(seed) -> None:
    oracle = OraclePolicy(ContentionSpeedModel())
    snap = loaded(seed)
    for job in synthetic_jobs(15, seed=50 + seed, mix="large"):
        job = replace(job, id=f"new-{job.id}")  # not one of the running jobs' ids
        rng = np.random.default_rng(seed)
        candidates = {p for p in oracle._candidates(snap, job, rng) if p is not None}
        for p in candidates:
            assert oracle.gain(snap, job, p) == pytest.approx(reference_gain(oracle, snap, job, p), rel=1e-9)
        if candidates:
            ranked = sorted(candidates, key=lambda p: [(t.role.value, t.node) for t in p.tasks])
            best = max(ranked, key=lambda p: reference_gain(oracle, snap, job, p))
            assert oracle.place(snap, job, np.random.default_rng(seed)) == best
