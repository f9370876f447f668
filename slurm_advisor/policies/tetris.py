"""`tetris` (Grandl et al., SIGCOMM'14): each task on the node whose free-resource vector is
best aligned with the task's demand (largest dot product of the normalised vectors)."""
from __future__ import annotations

import numpy as np

from slurm_advisor.domain import ClusterSnapshot, Job, Placement, Resources
from slurm_advisor.policies.base import fractions, place_by_node_score


def alignment(demand: Resources, free: Resources, capacity: Resources) -> float:
    d = demand.fraction_of(capacity)
    f = free.fraction_of(capacity)
    return d[0] * f[0] + d[1] * f[1] + d[2] * f[2]


def alignments(free: np.ndarray, cap: np.ndarray, demand: np.ndarray) -> np.ndarray:
    """``alignment`` for many nodes at once (the same float operations, so the same ties)."""
    d = fractions(np.broadcast_to(demand, cap.shape), cap)
    f = fractions(free, cap)
    return d[:, 0] * f[:, 0] + d[:, 1] * f[:, 1] + d[:, 2] * f[:, 2]


class TetrisPolicy:
    name = "tetris"

    def place(self, snapshot: ClusterSnapshot, job: Job, rng: np.random.Generator | None = None
              ) -> Placement | None:
        return place_by_node_score(snapshot, job, alignments)

    def score_nodes(self, snapshot: ClusterSnapshot, job: Job) -> dict[str, float]:
        demand = job.demand(job.roles()[0])
        return {n.name: alignment(demand, snapshot.free[n.name], n.capacity) for n in snapshot.nodes}
