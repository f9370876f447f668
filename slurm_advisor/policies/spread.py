"""`spread`: load balancing, as Kubernetes and Mesos place by default: each task on the
least-loaded node that fits. Least interference, most network traffic."""
from __future__ import annotations

import numpy as np

from slurm_advisor.domain import ClusterSnapshot, Job, Placement
from slurm_advisor.policies.base import free_share, free_shares, place_by_node_score


class SpreadPolicy:
    name = "spread"

    def place(self, snapshot: ClusterSnapshot, job: Job, rng: np.random.Generator | None = None
              ) -> Placement | None:
        return place_by_node_score(snapshot, job, lambda free, cap, demand: free_shares(free, cap))

    def score_nodes(self, snapshot: ClusterSnapshot, job: Job) -> dict[str, float]:
        return {n.name: free_share(snapshot.free[n.name], n.capacity) for n in snapshot.nodes}
