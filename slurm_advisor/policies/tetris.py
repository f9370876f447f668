"""`tetris` (Grandl et al., SIGCOMM'14): each task on the node whose free-resource vector is
best aligned with the task's demand (largest dot product of the normalised vectors)."""
from __future__ import annotations

import numpy as np

from slurm_advisor.domain import ClusterSnapshot, Job, Placement, Resources
from slurm_advisor.policies.base import best_fitting, place_task_by_task


def alignment(demand: Resources, free: Resources, capacity: Resources) -> float:
    d = demand.fraction_of(capacity)
    f = free.fraction_of(capacity)
    return d[0] * f[0] + d[1] * f[1] + d[2] * f[2]


class TetrisPolicy:
    name = "tetris"

    def place(self, snapshot: ClusterSnapshot, job: Job, rng: np.random.Generator | None = None
              ) -> Placement | None:
        return place_task_by_task(snapshot, job, best_fitting(
            lambda free, snap, demand, n: alignment(demand, free[n], snap.node(n).capacity)))

    def score_nodes(self, snapshot: ClusterSnapshot, job: Job) -> dict[str, float]:
        demand = job.demand(job.roles()[0])
        return {n.name: alignment(demand, snapshot.free[n.name], n.capacity) for n in snapshot.nodes}
