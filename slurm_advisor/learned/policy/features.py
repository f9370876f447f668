"""Feature vectors of the policy network (numpy; no torch here): the job's vector, and the schema (the
job-type vocabulary) a model was trained with.

Everything comes from what a live cluster knows: the job's request (counts, demands, declared
model and batch size), published facts about its type (``jobtypes``), node capacities, and
which tasks share each node. Nothing comes from a ground-truth speed model. Unknown job types
get the "unknown" type slot and are judged by their other features.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from slurm_advisor.domain import Job
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


# What other jobs put on a node, per row: usage(6), jobs/4, NIC sharers/4 (load_index.LoadIndex.others).
_OTHERS_DIM = 8
