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
from slurm_advisor.slurm.expressible import express
from slurm_advisor.slurm.release import DEFAULT, Release


class SlurmDefaultPolicy:
    name = "slurm-default"
    topology = False

    def __init__(self, release: Release = DEFAULT):
        self.release = release  # whose node choice and pinned layouts (slurm/release.py)

    def place(self, snapshot: ClusterSnapshot, job: Job, rng: np.random.Generator | None = None, *,
              max_nodes: int | None = None) -> Placement | None:
        request = job.request
        if request is None:
            return cons_tres.select(snapshot, job, topology=self.topology, max_nodes=max_nodes,
                                    release=self.release)
        if request.required:
            return on_required_nodes(snapshot, job, self.release)
        # the job's own -N range, and a cap within it (a hold's cap never widens what was asked)
        cap = request.max_nodes if max_nodes is None else min(max_nodes, request.max_nodes or max_nodes)
        return cons_tres.select(snapshot, job, topology=self.topology, min_nodes=request.min_nodes,
                                max_nodes=cap, release=self.release)

    def score_nodes(self, snapshot: ClusterSnapshot, job: Job) -> dict[str, float]:
        # Slurm's preference is its node order: earlier nodes score higher.
        n = len(snapshot.nodes)
        return {node.name: float(n - i) for i, node in enumerate(snapshot.nodes)}


def on_required_nodes(snapshot: ClusterSnapshot, job: Job, release: Release = DEFAULT) -> Placement | None:
    """A ``-w`` job on exactly its required nodes, with the tasks per node Slurm gives it there
    (``_eval_nodes`` takes the required nodes first, each as ``_cpus_to_use`` allows: the pinned
    layout, ``slurm/expressible.py``), where they hold it and its ``-N`` range allows that many
    nodes; else None (Slurm would add nodes of its own choosing, which is not modelled)."""
    request = job.request
    required = sorted(request.required, key=lambda n: snapshot.layout.index.get(n, -1))
    count = len(required)
    if (any(n not in snapshot.layout.index for n in required) or count > job.num_tasks
            or count < request.min_nodes or (request.max_nodes is not None and count > request.max_nodes)
            or request.max_tasks_per_node is not None):
        return None
    spread = [required[i % count] for i in range(job.num_tasks)]  # the node set; Slurm decides the counts
    return express(snapshot, job, Placement.of(job, spread), release)

