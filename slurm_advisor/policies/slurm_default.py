"""`slurm-default`: what select/cons_tres does today, as Slurm 22.05 configures it by default.

The node choice is Slurm's own (``slurm/cons_tres.py``, transcribed from its source): the
best-fitting single node for a job that fits on one (fewest usable slots that still hold it,
lowest index on ties), else the tightest run of consecutive usable nodes that holds the job,
taken in node order, each node giving all it can; tasks in block order over those nodes. It
knows nothing of contention or traffic. ``max_nodes`` is Slurm's ``--nodes=1-N`` cap.
"""
from __future__ import annotations

import numpy as np

from slurm_advisor.domain import ClusterSnapshot, Job, Placement
from slurm_advisor.slurm import cons_tres


class SlurmDefaultPolicy:
    name = "slurm-default"
    topology = False

    def place(self, snapshot: ClusterSnapshot, job: Job, rng: np.random.Generator | None = None, *,
              max_nodes: int | None = None) -> Placement | None:
        request = job.request
        if request is None:
            return cons_tres.select(snapshot, job, topology=self.topology, max_nodes=max_nodes)
        # the job's own -N range, and a cap within it (a hold's cap never widens what was asked)
        cap = request.max_nodes if max_nodes is None else min(max_nodes, request.max_nodes or max_nodes)
        return cons_tres.select(snapshot, job, topology=self.topology, min_nodes=request.min_nodes,
                                max_nodes=cap)

    def score_nodes(self, snapshot: ClusterSnapshot, job: Job) -> dict[str, float]:
        # Slurm's preference is its node order: earlier nodes score higher.
        n = len(snapshot.nodes)
        return {node.name: float(n - i) for i, node in enumerate(snapshot.nodes)}
