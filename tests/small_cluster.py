"""Small clusters and jobs for the tests of the learned parts and the policies that use them."""
from __future__ import annotations

from slurm_advisor.domain import ClusterSnapshot, Job, Node, Placement, Resources

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


class Fixed:
    """A proposer that always proposes the same placement."""

    def __init__(self, name: str, placement: Placement | None):
        self.name, self.placement = name, placement

    def place(self, snapshot, job, rng):
        return self.placement

    def score_nodes(self, snapshot, job):
        return {}
