"""A job's speed when it runs alone, consolidated as Slurm would place it on an empty cluster.

The reference for slowdown metrics, the oracle's normalisation and the RL reward.
"""
from __future__ import annotations

from collections.abc import Sequence

from slurm_advisor.domain import ClusterSnapshot, Job, Node, RunningJob
from slurm_advisor.policies.slurm_default import SlurmDefaultPolicy
from slurm_advisor.speedmodels.base import SpeedModel


def speed_signature(job: Job) -> tuple:
    """What a job's speed alone depends on (type, sizes, demands, model facts): jobs of one
    signature run alike, so caches of solo speeds key by it."""
    return (job.type, job.num_ps, job.num_workers, job.ps_demand, job.worker_demand,
            job.model_size_mb, job.batch_size)


class IsolatedSpeeds:
    """Caches isolated speeds by job signature (type, sizes, demands): traces repeat them."""

    def __init__(self, model: SpeedModel, nodes: Sequence[Node]):
        self.model = model
        self.empty = ClusterSnapshot.empty(tuple(nodes))
        self._cache: dict[tuple, float] = {}

    def __call__(self, job: Job) -> float:
        key = speed_signature(job)
        if key not in self._cache:
            placement = SlurmDefaultPolicy().place(self.empty, job)
            if placement is None:
                raise ValueError(f"job {job.id} does not fit on the empty cluster")
            rj = RunningJob(job, placement)
            self._cache[key] = self.model.speeds(self.empty.nodes, [rj])[job.id]
        return self._cache[key]
