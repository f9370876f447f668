"""What other jobs put on a node, computed the plain way: every running job's task footprints
summed per node. The specification ``load_index.LoadIndex`` (integer sums, kept in sync as jobs
start and end) must equal; tests compare the two.
"""
from __future__ import annotations

import functools
from collections.abc import Sequence

import numpy as np

from slurm_advisor.domain import Node, Resources, Role, RunningJob
from slurm_advisor.domain.jobtypes import profile_for

_OTHERS_DIM = 8


def task_usage(rj: RunningJob, role: Role, capacity: Resources) -> np.ndarray:
    """One task's footprint on a node: its demand share and its type's published usage."""
    job = rj.job
    return _usage(job.type, job.model_size_mb, job.batch_size, job.demand(role), role, capacity)


@functools.lru_cache(maxsize=65536)
def _usage(job_type: str, model_size_mb, batch_size, demand: Resources, role: Role,
           capacity: Resources) -> np.ndarray:
    p = profile_for(job_type, model_size_mb, batch_size)
    c, g, m = demand.fraction_of(capacity)
    light = 0.5 if role is Role.PS else 1.0  # a PS does no GPU work and feeds no input pipeline
    out = np.array([c, g, m, p.cpu * light, p.membw, p.pcie * (role is Role.WORKER)], dtype=np.float32)
    out.flags.writeable = False  # shared by the cache
    return out


class NodeLoad:
    """Per node: the summed footprint of its tasks, its job count and NIC sharers."""

    def __init__(self, nodes: Sequence[Node], running: Sequence[RunningJob]):
        self.capacity = {n.name: n.capacity for n in nodes}
        self.usage: dict[str, np.ndarray] = {}
        self.jobs: dict[str, set[str]] = {}
        self.spanning: dict[str, int] = {}
        self.types: dict[str, list[str]] = {}
        for rj in running:
            self.add(rj)

    def add(self, rj: RunningJob) -> None:
        per_node = rj.placement.per_node()
        for node, n_ps, n_w in per_node:
            if node not in self.capacity:
                continue
            self.usage[node] = self.usage.get(node, 0.0) + self.job_usage(rj, node, n_ps, n_w)
            self.jobs.setdefault(node, set()).add(rj.job.id)
            self.types.setdefault(node, []).extend([rj.job.type] * (n_ps + n_w))
        if len(per_node) > 1:
            for node, _, _ in per_node:
                self.spanning[node] = self.spanning.get(node, 0) + 1

    def job_usage(self, rj: RunningJob, node: str, n_ps: int, n_w: int) -> np.ndarray:
        cap = self.capacity[node]
        usage = n_w * task_usage(rj, Role.WORKER, cap)
        return usage + n_ps * task_usage(rj, Role.PS, cap) if n_ps else usage

    def others(self, node: str, exclude: RunningJob | None = None) -> np.ndarray:
        """[usage(6), jobs/4, NIC sharers/4] on ``node`` of every job but ``exclude``."""
        usage = self.usage.get(node, np.zeros(6, dtype=np.float32))
        jobs = len(self.jobs.get(node, ()))
        spanning = self.spanning.get(node, 0)
        if exclude is not None:
            for n, n_ps, n_w in exclude.placement.per_node():
                if n == node:
                    usage = usage - self.job_usage(exclude, node, n_ps, n_w)
                    jobs -= 1
            spanning -= 1 if len(exclude.placement.per_node()) > 1 else 0
        out = np.empty(_OTHERS_DIM, dtype=np.float32)
        out[:6] = usage
        out[6], out[7] = jobs / 4.0, max(0, spanning) / 4.0
        return out
