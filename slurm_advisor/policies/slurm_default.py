"""`slurm-default`: what select/cons_tres does today.

The job on as few nodes as possible: one node if any holds it all (the lowest-named first),
otherwise tasks fill the lowest-named nodes in block order. It knows nothing of contention.
"""
from __future__ import annotations

import numpy as np

from slurm_advisor.domain import ClusterSnapshot, Job, Placement
from slurm_advisor.policies.base import fitting, place_task_by_task, whole_job_on_one_node


class SlurmDefaultPolicy:
    name = "slurm-default"

    def place(self, snapshot: ClusterSnapshot, job: Job, rng: np.random.Generator | None = None
              ) -> Placement | None:
        order = [n.name for n in snapshot.nodes]
        return whole_job_on_one_node(snapshot, job, order) or place_task_by_task(
            snapshot, job, lambda free, snap, j, role, _: next(iter(fitting(free, snap, j.demand(role))), None))

    def score_nodes(self, snapshot: ClusterSnapshot, job: Job) -> dict[str, float]:
        # Slurm's preference is its node order: earlier nodes score higher.
        n = len(snapshot.nodes)
        return {node.name: float(n - i) for i, node in enumerate(snapshot.nodes)}
