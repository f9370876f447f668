"""`pack`: best fit. The whole job on the fullest node that holds it, else each task on the
fullest node that still has room. Keeps big holes free for big jobs; ignores interference."""
from __future__ import annotations

import numpy as np

from slurm_advisor.domain import ClusterSnapshot, Job, Placement
from slurm_advisor.policies.base import free_share, free_shares, place_by_node_score, vector


class PackPolicy:
    name = "pack"

    def place(self, snapshot: ClusterSnapshot, job: Job, rng: np.random.Generator | None = None
              ) -> Placement | None:
        return _whole_job_on_fullest_node(snapshot, job) or place_by_node_score(snapshot, job, _room_left,
                                                                               highest=False)

    def score_nodes(self, snapshot: ClusterSnapshot, job: Job) -> dict[str, float]:
        return {n.name: 1.0 - free_share(snapshot.free[n.name], n.capacity) for n in snapshot.nodes}


def _room_left(free: np.ndarray, cap: np.ndarray, demand: np.ndarray) -> np.ndarray:
    """How empty each node would be with one more task of ``demand`` on it."""
    return free_shares(free - demand, cap)


def _whole_job_on_fullest_node(snapshot: ClusterSnapshot, job: Job) -> Placement | None:
    """The job on the fullest node (by ``score_nodes``) that holds all its tasks, the earlier
    in Slurm's order on a tie: Slurm prefers one node."""
    total = job.total_demand()
    free, cap = snapshot.free_array(), snapshot.layout.capacity
    fits = np.flatnonzero((free >= vector(total)).all(axis=1))
    if not fits.size:
        return None
    fullness = 1.0 - free_shares(free[fits], cap[fits])
    return Placement.of(job, [snapshot.nodes[int(fits[np.argmax(fullness)])].name] * job.num_tasks)
