"""`spread`: load balancing, as Kubernetes and Mesos place by default: each task on the
least-loaded node that fits. Least interference, most network traffic."""
from __future__ import annotations

import numpy as np

from slurm_advisor.domain import ClusterSnapshot, Job, Placement
from slurm_advisor.policies.base import best_fitting, free_share, place_task_by_task


class SpreadPolicy:
    name = "spread"

    def place(self, snapshot: ClusterSnapshot, job: Job, rng: np.random.Generator | None = None
              ) -> Placement | None:
        return place_task_by_task(snapshot, job, best_fitting(
            lambda free, snap, demand, n: free_share(free[n], snap.node(n).capacity)))

    def score_nodes(self, snapshot: ClusterSnapshot, job: Job) -> dict[str, float]:
        return {n.name: free_share(snapshot.free[n.name], n.capacity) for n in snapshot.nodes}
