"""A distributed training job as Slurm receives it: PS and worker tasks with their demands.

An all-reduce job is simply a job with ``num_ps == 0``: every code path handles both kinds.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from slurm_advisor.domain.request import JobRequest
from slurm_advisor.domain.resources import Resources


class Role(str, Enum):
    PS = "ps"
    WORKER = "worker"


@dataclass(frozen=True, slots=True)
class Job:
    id: str
    type: str
    num_ps: int
    num_workers: int
    ps_demand: Resources
    worker_demand: Resources
    iterations: float
    submit_time: float = 0.0
    user: str = ""
    model_size_mb: float | None = None
    batch_size: int | None = None
    #: Slurm's --time: the job is ended (state TIMEOUT) when it has run this long; the
    #: scheduler plans backfill with it. None: the simulator applies its default rule.
    time_limit_s: float | None = None
    #: where Slurm may run it, as its submitter asked (None: anywhere its tasks fit)
    request: JobRequest | None = None
    _total: Resources = field(init=False, repr=False, compare=False, default=Resources())

    def __post_init__(self) -> None:
        if self.num_workers < 1:
            raise ValueError(f"job {self.id}: num_workers must be at least 1")
        if self.num_ps < 0:
            raise ValueError(f"job {self.id}: num_ps must not be negative")
        if not self.iterations > 0:
            raise ValueError(f"job {self.id}: iterations must be positive")
        if self.time_limit_s is not None and not self.time_limit_s > 0:
            raise ValueError(f"job {self.id}: time_limit_s must be positive")
        # Cached: the scheduler asks for it on every pass over the queue.
        object.__setattr__(self, "_total", self.ps_demand.times(self.num_ps)
                           + self.worker_demand.times(self.num_workers))

    @property
    def is_allreduce(self) -> bool:
        return self.num_ps == 0

    @property
    def num_tasks(self) -> int:
        return self.num_ps + self.num_workers

    def roles(self) -> tuple[Role, ...]:
        """Task roles in placement order: parameter servers first, then workers."""
        return (Role.PS,) * self.num_ps + (Role.WORKER,) * self.num_workers

    def demand(self, role: Role) -> Resources:
        return self.ps_demand if role is Role.PS else self.worker_demand

    def total_demand(self) -> Resources:
        return self._total
