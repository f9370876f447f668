"""Small clusters, traces and recorded speed samples shared by the learned-part tests."""
from __future__ import annotations

import pytest

from slurm_advisor.domain import ClusterSnapshot, Job, Node, Placement, Resources
from slurm_advisor.learned.experiment import record
from slurm_advisor.sim.converters.synthetic import synthetic_jobs
from slurm_advisor.speedmodels.contention import ContentionSpeedModel

PS = Resources(4, 0, 16_000)
WORKER = Resources(4, 1, 24_000)


def make_nodes(n: int, gpus: int = 8) -> tuple[Node, ...]:
    """``n`` identical nodes, the first half on switch s1, the rest on s2."""
    return tuple(Node(f"n{i:02d}", 32, gpus, 256_000, "s1" if i < n // 2 else "s2") for i in range(n))


def make_job(job_id: str, job_type: str = "resnet50", num_ps: int = 0, num_workers: int = 2,
             worker: Resources = WORKER) -> Job:
    return Job(job_id, job_type, num_ps, num_workers, PS, worker, 1000.0)


def snapshot_with(nodes, *placed: tuple[Job, list[str]], time: float = 50.0) -> ClusterSnapshot:
    snap = ClusterSnapshot.empty(nodes, time=time)
    for job, on in placed:
        snap = snap.with_job(job, Placement.of(job, on))
    return snap


@pytest.fixture(scope="session")
def small_nodes() -> tuple[Node, ...]:
    return make_nodes(4)


@pytest.fixture(scope="session")
def small_jobs() -> list[Job]:
    """Jobs of 1-16 workers on 32 GPUs: most span nodes, some queue."""
    return synthetic_jobs(40, seed=5, mix="large", arrival_rate_per_h=1.0)


@pytest.fixture(scope="session")
def truth() -> ContentionSpeedModel:
    return ContentionSpeedModel()


@pytest.fixture(scope="session")
def samples(small_nodes, small_jobs, truth):
    """What the store would hold: speeds logged while three heuristics ran the trace."""
    return record(small_nodes, small_jobs, truth, ("slurm-default", "random", "spread"), seed=0)
