"""Nodes and the immutable cluster snapshot a policy decides on."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from slurm_advisor.domain.job import Job
from slurm_advisor.domain.placement import Placement
from slurm_advisor.domain.resources import Resources


@dataclass(frozen=True, slots=True)
class Node:
    name: str
    cpus: int
    gpus: int
    mem_mb: int
    switch: str | None = None
    features: frozenset[str] = frozenset()

    @property
    def capacity(self) -> Resources:
        return Resources(self.cpus, self.gpus, self.mem_mb)


@dataclass(frozen=True, slots=True)
class RunningJob:
    job: Job
    placement: Placement
    start_time: float = 0.0


@dataclass(frozen=True)
class ClusterSnapshot:
    """The cluster at one instant: nodes in Slurm's order, free capacity, running placements.

    ``free`` is kept explicitly (not derived from ``running``) because on a real cluster
    other allocations that the advisor did not place also consume capacity.
    """

    nodes: tuple[Node, ...]
    free: Mapping[str, Resources]
    running: tuple[RunningJob, ...] = ()
    time: float = 0.0
    _by_name: Mapping[str, Node] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "free", MappingProxyType(dict(self.free)))
        object.__setattr__(self, "_by_name", MappingProxyType({n.name: n for n in self.nodes}))

    @classmethod
    def empty(cls, nodes: tuple[Node, ...] | list[Node], time: float = 0.0) -> ClusterSnapshot:
        return cls(tuple(nodes), {n.name: n.capacity for n in nodes}, (), time)

    def node(self, name: str) -> Node:
        return self._by_name[name]

    def fits(self, job: Job, placement: Placement) -> bool:
        return all(d.fits_in(self.free.get(n, Resources(-1, -1, -1)))
                   for n, d in placement.demand_per_node(job).items())

    def with_job(self, job: Job, placement: Placement, time: float | None = None) -> ClusterSnapshot:
        """The snapshot after ``job`` starts on ``placement``; refuses an over-commit."""
        if not self.fits(job, placement):
            raise ValueError(f"job {job.id} does not fit on {placement.node_list()}")
        free = dict(self.free)
        for name, demand in placement.demand_per_node(job).items():
            free[name] = free[name] - demand
        started = time if time is not None else self.time
        running = self.running + (RunningJob(job, placement, started),)
        return ClusterSnapshot(self.nodes, free, running, self.time if time is None else time)

    def without_job(self, job_id: str, time: float | None = None) -> ClusterSnapshot:
        gone = next((r for r in self.running if r.job.id == job_id), None)
        if gone is None:
            raise KeyError(f"job {job_id} is not running")
        free = dict(self.free)
        for name, demand in gone.placement.demand_per_node(gone.job).items():
            free[name] = free[name] + demand
        running = tuple(r for r in self.running if r.job.id != job_id)
        return ClusterSnapshot(self.nodes, free, running, self.time if time is None else time)

    def at(self, time: float) -> ClusterSnapshot:
        return ClusterSnapshot(self.nodes, self.free, self.running, time)

    def total_capacity(self) -> Resources:
        total = Resources()
        for n in self.nodes:
            total = total + n.capacity
        return total
