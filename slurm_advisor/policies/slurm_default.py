"""`slurm-default`: what select/cons_tres does today.

The job on as few nodes as possible: one node if any holds it all (the lowest-named first);
otherwise the smallest set of nodes that holds it (nodes that take the most of the job's
tasks first, ties to the lowest name), its tasks in block order over those nodes in Slurm's
node order. It knows nothing of contention or traffic.
"""
from __future__ import annotations

import functools

import numpy as np

from slurm_advisor.domain import ClusterSnapshot, Job, Placement, Resources
from slurm_advisor.policies.base import place_task_by_task, whole_job_on_one_node


class SlurmDefaultPolicy:
    name = "slurm-default"

    def place(self, snapshot: ClusterSnapshot, job: Job, rng: np.random.Generator | None = None
              ) -> Placement | None:
        order = [n.name for n in snapshot.nodes]
        single = whole_job_on_one_node(snapshot, job, order)
        if single is not None:
            return single
        if not _room_for_each_role(snapshot, job):
            return None  # no placement exists: spare the two placement attempts below
        chosen = set(fewest_nodes(snapshot, job, order))
        return (place_task_by_task(snapshot, job, _first_fit([n for n in order if n in chosen]))
                or place_task_by_task(snapshot, job, _first_fit(order)))

    def score_nodes(self, snapshot: ClusterSnapshot, job: Job) -> dict[str, float]:
        # Slurm's preference is its node order: earlier nodes score higher.
        n = len(snapshot.nodes)
        return {node.name: float(n - i) for i, node in enumerate(snapshot.nodes)}


def fewest_nodes(snapshot: ClusterSnapshot, job: Job, order: list[str]) -> list[str]:
    """The nodes that take the most of the job's tasks, until they hold all of them."""
    slots = {name: task_slots(snapshot.free[name], job) for name in order}
    chosen, total = [], 0
    for name in sorted(order, key=lambda n: -slots[n]):  # stable: ties keep Slurm's order
        if slots[name] == 0 or total >= job.num_tasks:
            break
        chosen.append(name)
        total += slots[name]
    return chosen


def task_slots(free: Resources, job: Job) -> int:
    """How many of the job's tasks (in task order: PS, then workers) one node could take."""
    return _task_slots(free, job.ps_demand, job.num_ps, job.worker_demand, job.num_workers)


@functools.lru_cache(maxsize=1 << 16)
def _task_slots(free: Resources, ps_demand: Resources, num_ps: int, worker_demand: Resources,
                num_workers: int) -> int:
    # Cached: the scheduler asks this per node on every attempt, and free capacities repeat.
    ps = _how_many(free, ps_demand, num_ps)
    return ps + _how_many(free - ps_demand.times(ps), worker_demand, num_workers)


def _room_for_each_role(snapshot: ClusterSnapshot, job: Job) -> bool:
    """A necessary condition for any placement: the PS tasks fit the cluster's nodes on their
    own, and so do the workers. (Plain integer loop: it runs on every scheduling attempt.)"""
    for demand, count in ((job.ps_demand, job.num_ps), (job.worker_demand, job.num_workers)):
        room = 0
        for free in snapshot.free.values():
            if room >= count:
                break
            room += _how_many(free, demand, count)
        if room < count:
            return False
    return True


def _how_many(free: Resources, demand: Resources, limit: int) -> int:
    """Identical tasks that fit in ``free``, at most ``limit`` (closed form: this runs per node
    and per scheduling attempt)."""
    n = limit
    for have, need in ((free.cpus, demand.cpus), (free.gpus, demand.gpus), (free.mem_mb, demand.mem_mb)):
        if need > 0:
            n = min(n, have // need)
    return max(0, n)


def _first_fit(order: list[str]):
    def choose(free, snap, job, role, _placed):
        demand = job.demand(role)
        return next((n for n in order if demand.fits_in(free[n])), None)
    return choose
