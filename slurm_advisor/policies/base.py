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


# node_score(free, capacity, demand) -> one score per row: free and capacity are [nodes, 3] int
# arrays (cpus, gpus, mem_mb), demand a [3] int array (one task)
NodeScore = Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]


def place_by_node_score(snapshot: ClusterSnapshot, job: Job, node_score: NodeScore,
                        highest: bool = True) -> Placement | None:
    """Place tasks in order (PS first), each on the node with room whose ``node_score`` is
    highest (or lowest); ties go to the earlier node in Slurm's order. None if one doesn't fit.

    One numpy pass over the nodes per task, not a Python loop over them: the search asks
    the baselines for their placements in every decision, on clusters of thousands of nodes.
    A role's scores are computed once and then only on the node a task took."""
    free = snapshot.free_array().copy()
    cap = snapshot.layout.capacity
    demands = {role: vector(job.demand(role)) for role in set(job.roles())}
    scores: dict[Role, np.ndarray] = {}
    placed: list[TaskAssignment] = []
    for role in job.roles():
        demand = demands[role]
        fits = np.flatnonzero((free >= demand).all(axis=1))
        if not fits.size:
            return None
        if role not in scores:
            scores[role] = node_score(free, cap, demand)
        candidates = scores[role][fits]
        i = int(fits[np.argmax(candidates) if highest else np.argmin(candidates)])  # first of the ties
        free[i] -= demand
        for r, s in scores.items():  # only node i changed
            s[i] = node_score(free[i:i + 1], cap[i:i + 1], demands[r])[0]
        placed.append(TaskAssignment(role, snapshot.nodes[i].name))
    return Placement(job.id, tuple(placed))


def fitting(free: Mapping[str, Resources], snapshot: ClusterSnapshot, demand: Resources) -> list[str]:
    """Nodes (in Slurm order) with room for one task of ``demand``."""
    return [n.name for n in snapshot.nodes if demand.fits_in(free[n.name])]


def free_share(free: Resources, capacity: Resources) -> float:
    """How empty a node is, weighting GPUs most: they are what ML jobs queue for."""
    c, g, m = free.fraction_of(capacity)
    return 0.6 * g + 0.25 * c + 0.15 * m if capacity.gpus else 0.6 * c + 0.4 * m


def fractions(amounts: np.ndarray, cap: np.ndarray) -> np.ndarray:
    """Resources.fraction_of for many nodes at once: each resource's share of the node's
    capacity, 0 where the capacity is 0 (the same float division, so the same bits)."""
    return np.divide(amounts, cap, out=np.zeros(cap.shape), where=cap > 0)


def free_shares(free: np.ndarray, cap: np.ndarray) -> np.ndarray:
    """``free_share`` for many nodes at once (the same float operations, so the same ties)."""
    f = fractions(free, cap)
    return np.where(cap[:, 1] > 0, 0.6 * f[:, 1] + 0.25 * f[:, 0] + 0.15 * f[:, 2], 0.6 * f[:, 0] + 0.4 * f[:, 2])


def vector(r: Resources) -> np.ndarray:
    """A task's demand as the [3] int array the snapshot's free array is compared with."""
    return np.array((r.cpus, r.gpus, r.mem_mb), dtype=np.int64)
