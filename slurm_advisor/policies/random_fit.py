"""`random`: each task on a node drawn uniformly from those that fit. The floor to beat."""
from __future__ import annotations

import numpy as np

from slurm_advisor.domain import ClusterSnapshot, Job, Placement
from slurm_advisor.policies.base import fitting, place_task_by_task


class RandomPolicy:
    name = "random"

    def place(self, snapshot: ClusterSnapshot, job: Job, rng: np.random.Generator) -> Placement | None:
        def choose(free, snap, j, role, _):
            options = fitting(free, snap, j.demand(role))
            return options[int(rng.integers(len(options)))] if options else None
        return place_task_by_task(snapshot, job, choose)

    def score_nodes(self, snapshot: ClusterSnapshot, job: Job) -> dict[str, float]:
        return {n.name: 1.0 for n in snapshot.nodes}
