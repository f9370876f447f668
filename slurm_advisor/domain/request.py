"""Where a job may run, as its submitter asked Slurm: the constraints every placement must keep.

A ``JobRequest`` is what the advisor honours of a job's own options beyond its tasks' shape
(``Job.ps_demand``/``worker_demand``): the node count range, tasks per node, per-node memory and
GPUs, the nodes it must and must not use, features, partition, whole nodes, contiguity and the
switch count. ``slurm/request.py`` builds it from the hook's ``job_desc`` fields; jobs of the
simulator's traces carry none (every placement is theirs to take).

Two questions are asked of it, both pure and O(the nodes they touch) but for the masks, which a
``NodeLayout`` keeps per partition and feature set:

- :meth:`JobRequest.eligible`: the nodes a placement may use at all (a policy is shown only those);
- :meth:`JobRequest.violations`: what a given placement breaks (empty: it honours the request).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # placement.py imports job.py, which holds a JobRequest
    from slurm_advisor.domain.placement import Placement


@dataclass(frozen=True, slots=True)
class JobRequest:
    min_nodes: int = 1
    #: None: as many nodes as the job has tasks
    max_nodes: int | None = None
    #: --ntasks-per-node: at most this many tasks on any node (Slurm: a maximum when -n is given)
    max_tasks_per_node: int | None = None
    #: --mem: MB every node of the allocation must have free (0: none asked per node)
    mem_per_node_mb: int = 0
    #: --gpus-per-node / --gres=gpu:K: GPUs every node of the allocation must have free
    gpus_per_node: int = 0
    #: -w: every one of these nodes is in the allocation
    required: frozenset[str] = frozenset()
    #: -x: none of these is
    excluded: frozenset[str] = frozenset()
    #: -C a&b: every node has all of these features
    features: frozenset[str] = frozenset()
    #: -p: the one partition the job runs in (None: every node the advisor knows)
    partition: str | None = None
    #: --exclusive: whole nodes, so only nodes with nothing running
    exclusive: bool = False
    #: --contiguous: consecutive nodes in Slurm's node order
    contiguous: bool = False
    #: --switches=N: at most N leaf switches (where the cluster has switches)
    max_switches: int | None = None

    def __post_init__(self) -> None:
        if self.min_nodes < 1 or (self.max_nodes is not None and self.max_nodes < self.min_nodes):
            raise ValueError(f"node count range {self.min_nodes}-{self.max_nodes} is empty")
        if self.max_tasks_per_node is not None and self.max_tasks_per_node < 1:
            raise ValueError("max_tasks_per_node must be at least 1")
        if self.required & self.excluded:
            raise ValueError(f"nodes both required and excluded: {sorted(self.required & self.excluded)}")

    def eligible(self, snapshot) -> np.ndarray | None:
        """Per node of ``snapshot``: may a placement use it? None: every node may."""
        mask = None
        layout = snapshot.layout
        if self.partition is not None and layout.has_partitions:
            mask = _and(mask, layout.mask(("partition", self.partition),
                                          lambda: [self.partition in n.partitions for n in layout.nodes]))
        if self.features:
            mask = _and(mask, layout.mask(("features", self.features),
                                          lambda: [self.features <= n.features for n in layout.nodes]))
        if self.excluded:
            mask = np.ones(len(layout.nodes), dtype=bool) if mask is None else mask.copy()
            mask[[layout.index[n] for n in self.excluded if n in layout.index]] = False
        free = snapshot.free_array()
        if self.exclusive:
            mask = _and(mask, (free == layout.capacity).all(axis=1))
        if self.gpus_per_node:
            mask = _and(mask, free[:, 1] >= self.gpus_per_node)
        if self.mem_per_node_mb:
            mask = _and(mask, free[:, 2] >= self.mem_per_node_mb)
        return mask

    def violations(self, snapshot, placement: Placement) -> list[str]:
        """What ``placement`` breaks of this request on ``snapshot`` (empty: nothing), in words."""
        out: list[str] = []
        nodes = placement.nodes()
        count = len(nodes)
        if count < self.min_nodes or (self.max_nodes is not None and count > self.max_nodes):
            out.append(f"{count} nodes, outside the requested {self.min_nodes}-{self.max_nodes or ''}")
        missing = sorted(self.required - set(nodes))
        if missing:
            out.append(f"leaves out required nodes {','.join(missing)}")
        if self.max_tasks_per_node is not None:
            over = [n for n, ps, w in placement.per_node() if ps + w > self.max_tasks_per_node]
            if over:
                out.append(f"more than {self.max_tasks_per_node} tasks on {','.join(over)}")
        index = snapshot.layout.index
        unknown = [n for n in nodes if n not in index]
        if unknown:
            return [*out, f"nodes unknown to the cluster: {','.join(unknown)}"]
        rows = [index[n] for n in nodes]
        mask = self.eligible(snapshot)
        if mask is not None:
            bad = [n for n, r in zip(nodes, rows) if not mask[r]]
            if bad:
                out.append(f"nodes the request rules out now: {','.join(bad)}")
        if self.contiguous and count > 1 and max(rows) - min(rows) + 1 != count:
            out.append("nodes not contiguous")
        if self.max_switches is not None:
            switches = {snapshot.layout.switch_ids[r] for r in rows}
            if len(switches) > self.max_switches:
                out.append(f"spans {len(switches)} switches, more than {self.max_switches}")
        return out

    def narrows(self) -> bool:
        """Whether anything is asked beyond the node count (a request Slurm places otherwise)."""
        return bool(self.max_tasks_per_node or self.mem_per_node_mb or self.gpus_per_node or self.required
                    or self.exclusive or self.contiguous or self.max_switches is not None)


def _and(mask: np.ndarray | None, other) -> np.ndarray:
    other = np.asarray(other, dtype=bool)
    return other if mask is None else mask & other
