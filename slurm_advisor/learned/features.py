"""Feature vectors for the speed model and the policy (numpy; no torch here).

Everything comes from what a live cluster knows: the job's request (counts, demands, declared
model and batch size), published facts about its type (``jobtypes``), node capacities, and
which tasks share each node. Nothing comes from a ground-truth speed model. Unknown job types
get the "unknown" type slot and are judged by their other features.
"""
from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from slurm_advisor.domain import Job, Node, Resources, Role, RunningJob
from slurm_advisor.domain.jobtypes import KNOWN_TYPES, profile_for, reference_speed

SCHEMA_VERSION = 3
CPU, GPU, MEM = 64.0, 8.0, 512_000.0  # fixed scales: features stay comparable across clusters


@dataclass(frozen=True)
class FeatureSchema:
    """The job-type vocabulary a model was trained with; part of every checkpoint."""

    types: tuple[str, ...] = tuple(sorted(KNOWN_TYPES))
    version: int = SCHEMA_VERSION

    def type_slot(self, job_type: str) -> int:
        t = job_type.lower()
        return self.types.index(t) if t in self.types else len(self.types)

    @property
    def n_types(self) -> int:
        return len(self.types) + 1  # + the unknown slot

    @property
    def job_dim(self) -> int:
        return 16 + self.n_types

    @property
    def sample_dim(self) -> int:
        return self.job_dim + 6 + 2 * _OTHERS_DIM + self.n_types

    @property
    def node_dim(self) -> int:
        return 19 + _OTHERS_DIM

    @property
    def global_dim(self) -> int:
        return self.job_dim + 4


_job_cache: dict[tuple, np.ndarray] = {}


def job_vector(job: Job, schema: FeatureSchema) -> np.ndarray:
    key = (schema.types, job.type, job.num_ps, job.num_workers, job.ps_demand, job.worker_demand,
           job.model_size_mb, job.batch_size)
    cached = _job_cache.get(key)
    if cached is not None:
        return cached
    p = profile_for(job.type, job.model_size_mb, job.batch_size)
    ps, w = job.ps_demand, job.worker_demand
    v = np.zeros(schema.job_dim, dtype=np.float32)
    v[:16] = [math.log1p(job.num_ps), math.log1p(job.num_workers), float(job.is_allreduce),
              ps.cpus / CPU, ps.gpus / GPU, ps.mem_mb / MEM, w.cpus / CPU, w.gpus / GPU, w.mem_mb / MEM,
              math.log1p(p.model_size_mb) / 8.0, math.log(p.batch_size) / 10.0,
              math.log1p(p.gflops_per_sample * p.batch_size) / 10.0, p.cpu, p.membw, p.pcie,
              math.log(reference_speed(p)) / 5.0]
    v[16 + schema.type_slot(job.type)] = 1.0
    if len(_job_cache) > 50_000:
        _job_cache.clear()
    _job_cache[key] = v
    return v


# -- what other jobs put on a node ---------------------------------------------------------
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


# -- speed-model features ------------------------------------------------------------------
def sample_vector(subject: RunningJob, load: NodeLoad, switch_of: Mapping[str, str | None],
                  schema: FeatureSchema, neighbour_types: Sequence[str]) -> np.ndarray:
    """Job + how it is spread + what shares its nodes: the input of the speed model."""
    per_node = subject.placement.role_counts()
    others = np.stack([load.others(n, subject) for n in per_node])
    hist = np.zeros(schema.n_types, dtype=np.float32)
    for t in neighbour_types:
        hist[schema.type_slot(t)] += 0.25
    return placement_vector(subject.job, per_node, len({switch_of.get(n) for n in per_node}), others,
                            hist, schema)


def placement_vector(job: Job, per_node, switches: int, others: np.ndarray, hist: np.ndarray,
                     schema: FeatureSchema) -> np.ndarray:
    """``sample_vector`` from its parts: ``per_node`` (``Placement.role_counts``), the number of
    switches spanned, the other jobs' load on each node [k, 8] and the histogram of their types."""
    return np.concatenate([job_vector(job, schema), _spread_features(job, per_node, switches),
                           others.max(axis=0), others.mean(axis=0), hist])


def _spread_features(job: Job, per_node, switches: int) -> np.ndarray:
    g = len(per_node)
    most_workers = max(c[Role.WORKER] for c in per_node.values())
    if job.num_ps:
        local = sum(c[Role.PS] * c[Role.WORKER] for c in per_node.values())
        crossing = 1.0 - local / (job.num_ps * job.num_workers)
    else:
        crossing = 1.0 - most_workers / job.num_workers
    return np.array([math.log(g), float(g > 1), crossing, float(switches - 1),
                     most_workers / job.num_workers, max(c[Role.PS] for c in per_node.values()) / max(1, job.num_ps)],
                    dtype=np.float32)
