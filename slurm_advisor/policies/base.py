"""What every placement policy is, and the task-by-task placement loop the baselines share."""
from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from slurm_advisor.domain import ClusterSnapshot, Job, Placement, Resources, Role, TaskAssignment


@dataclass(frozen=True)
class Hold:
    """A deliberate "not now": the job could start, but the policy expects a better placement
    soon enough to be worth the wait. Unlike None (found nothing), no fallback overrules it.
    On Slurm this is a node-count cap: the job pends until it fits on that few nodes."""

    reason: str
    max_nodes: int | None = None  # the node-count cap the job waits for (Slurm's --nodes=1-N)


class Policy(Protocol):
    name: str

    def place(self, snapshot: ClusterSnapshot, job: Job, rng: np.random.Generator) -> Placement | Hold | None:
        """Every task of ``job`` on a node with room for it; None: cannot place now; or a
        Hold: could, but would rather wait (only policies that can judge speed hold)."""
        ...

    def score_nodes(self, snapshot: ClusterSnapshot, job: Job) -> dict[str, float]:
        """Explanation: how much the policy likes each node for the job's first task."""
        ...


def warm(policy: Policy, snapshot: ClusterSnapshot) -> None:
    """A policy's optional ``warm(snapshot)``: fill what its next decisions on this cluster state
    would compute first (the daemon calls it off the request path, after each refresh)."""
    method = getattr(policy, "warm", None)
    if method is not None:
        method(snapshot)


# chooser(free, snapshot, job, role, tasks placed so far) -> node name, or None if nothing fits
Chooser = Callable[[Mapping[str, Resources], ClusterSnapshot, Job, Role, list[TaskAssignment]], str | None]


def place_task_by_task(snapshot: ClusterSnapshot, job: Job, choose: Chooser) -> Placement | None:
    """Place tasks in order (PS first), updating free capacity as we go; None if one doesn't fit."""
    free = dict(snapshot.free)
    placed: list[TaskAssignment] = []
    for role in job.roles():
        node = choose(free, snapshot, job, role, placed)
        if node is None:
            return None
        free[node] = free[node] - job.demand(role)
        placed.append(TaskAssignment(role, node))
    return Placement(job.id, tuple(placed))


def whole_job_on_one_node(snapshot: ClusterSnapshot, job: Job, order: list[str]) -> Placement | None:
    """The job on the first node of ``order`` that holds all its tasks (Slurm prefers 1 node)."""
    total = job.total_demand()
    for name in order:
        if total.fits_in(snapshot.free[name]):
            return Placement.of(job, [name] * job.num_tasks)
    return None


def best_fitting(score: Callable[[Mapping[str, Resources], ClusterSnapshot, Resources, str], float],
                 highest: bool = True) -> Chooser:
    """A chooser: the node with room whose ``score(free, snapshot, demand, node)`` is highest
    (or lowest); ties go to the earlier node in Slurm's order."""
    def choose(free, snap, job, role, _placed):
        demand = job.demand(role)
        key = (lambda n: score(free, snap, demand, n)) if highest else (lambda n: -score(free, snap, demand, n))
        return max(fitting(free, snap, demand), key=key, default=None)
    return choose


def fitting(free: Mapping[str, Resources], snapshot: ClusterSnapshot, demand: Resources) -> list[str]:
    """Nodes (in Slurm order) with room for one task of ``demand``."""
    return [n.name for n in snapshot.nodes if demand.fits_in(free[n.name])]


def free_share(free: Resources, capacity: Resources) -> float:
    """How empty a node is, weighting GPUs most: they are what ML jobs queue for."""
    c, g, m = free.fraction_of(capacity)
    return 0.6 * g + 0.25 * c + 0.15 * m if capacity.gpus else 0.6 * c + 0.4 * m
