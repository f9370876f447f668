"""`pack`: best fit. The whole job on the fullest node that holds it, else each task on the
fullest node that still has room. Keeps big holes free for big jobs; ignores interference."""
from __future__ import annotations

import numpy as np

from slurm_advisor.domain import ClusterSnapshot, Job, Placement
from slurm_advisor.policies.base import best_fitting, free_share, place_task_by_task, whole_job_on_one_node


class PackPolicy:
    name = "pack"

    def place(self, snapshot: ClusterSnapshot, job: Job, rng: np.random.Generator | None = None
              ) -> Placement | None:
        scores = self.score_nodes(snapshot, job)
        fullest_first = sorted(scores, key=lambda n: -scores[n])
        return whole_job_on_one_node(snapshot, job, fullest_first) or place_task_by_task(
            snapshot, job, best_fitting(_room_left, highest=False))

    def score_nodes(self, snapshot: ClusterSnapshot, job: Job) -> dict[str, float]:
        return {n.name: 1.0 - free_share(snapshot.free[n.name], n.capacity) for n in snapshot.nodes}


def _room_left(free, snap, demand, node) -> float:
    return free_share(free[node] - demand, snap.node(node).capacity)
