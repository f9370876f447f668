"""One pass of Slurm's backfill scheduler: a per-node plan built from time limits.

``src/plugins/sched/backfill/backfill.c``: every running job is planned to end at its start
plus its time limit (a hard limit: Slurm ends it there), so the free capacity of each node at
any later time is known for sure. Pending jobs are taken in priority order. A job starts now
if it fits on the nodes that no job ahead of it has reserved for a window overlapping its own
[now, now + limit); otherwise it gets a reservation: the earliest time at which cons_tres can
place it on the nodes free then and not reserved during its window, found by stepping through
the planned ends. A reservation blocks its nodes *whole* for lower-priority jobs during its
window (``_add_reservation`` clears them from the node-space bitmap), and no reservation is
made beyond ``bf_window``. So a started job never delays the planned start of a job ahead.
"""
from __future__ import annotations

import bisect
import math
from dataclasses import dataclass, field

import numpy as np

from slurm_advisor.domain import Job, Resources
from slurm_advisor.domain.cluster import NodeLayout
from slurm_advisor.policies.cons_tres import choose_nodes, could_fit


@dataclass
class RunningEnds:
    """Running jobs by planned end (start + time limit), with what each frees per node; kept
    sorted as jobs start and end, so a backfill pass reads it without rebuilding it."""

    entries: list[tuple[float, np.ndarray, np.ndarray]] = field(default_factory=list)
    ids: list[str] = field(default_factory=list)
    usage: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)

    def add(self, job_id: str, end: float, nodes: np.ndarray, amounts: np.ndarray) -> None:
        i = bisect.bisect_right(self.entries, end, key=_end)
        self.entries.insert(i, (end, nodes, amounts))
        self.ids.insert(i, job_id)
        self.usage[job_id] = (nodes, amounts)

    def remove(self, job_id: str, end: float) -> None:
        i = bisect.bisect_left(self.entries, end, key=_end)
        while self.ids[i] != job_id:
            i += 1
        del self.entries[i], self.ids[i]
        del self.usage[job_id]


def _end(entry: tuple[float, np.ndarray, np.ndarray]) -> float:
    return entry[0]


@dataclass
class Reservation:
    start: float
    end: float
    nodes: np.ndarray  # node indices blocked during [start, end)


class BackfillPass:
    def __init__(self, layout: NodeLayout, free: np.ndarray, ends: RunningEnds, now: float,
                 window_s: float):
        self.layout, self.now, self.window_s = layout, now, window_s
        self.free = free.copy()
        c, g, m = self.free.sum(axis=0).tolist() if len(free) else (0, 0, 0)
        self.total = Resources(c, g, m)  # free on all nodes now: no job needing more can start
        self.ends = ends
        self._release_list: list[tuple[float, np.ndarray, np.ndarray]] | None = None
        self.reservations: list[Reservation] = []

    def room_now(self, limit: float) -> tuple[np.ndarray, bool]:
        """Free capacity a job with ``limit`` may use now (reserved nodes zeroed), and whether
        any node was masked."""
        return self._masked(self.free, self.now, self.now + limit)

    def started(self, end: float, nodes: np.ndarray, amounts: np.ndarray) -> None:
        np.subtract.at(self.free, nodes, amounts)
        c, g, m = amounts.sum(axis=0).tolist()
        self.total = self.total - Resources(c, g, m)
        if self._release_list is None:  # copy on first write: the engine's list stays as it is
            self._release_list = list(self.ends.entries)
        self._release_list.insert(bisect.bisect_right(self._release_list, end, key=_end), (end, nodes, amounts))

    def reserve(self, job: Job, limit: float, max_nodes: int | None, not_before: float) -> float | None:
        """Plan ``job`` at its earliest start (not before ``not_before``, an earlier identical
        job's start: it can only be later); returns that start or None beyond the window."""
        d = job.total_demand()
        need = np.array([d.cpus, d.gpus, d.mem_mb])
        free = self.free.copy()
        total = free.sum(axis=0)
        releases = self._releases()
        res_ends = sorted(r.end for r in self.reservations if r.end > self.now)
        k, t = 0, self.now
        while True:
            while k < len(releases) and releases[k][0] <= t:
                np.add.at(free, releases[k][1], releases[k][2])
                total += releases[k][2].sum(axis=0)
                k += 1
            if t > self.now + self.window_s:
                return None
            if t >= not_before and not (total < need).any() and self._place(job, free, t, limit, max_nodes):
                return t
            t = min(releases[k][0] if k < len(releases) else math.inf,
                    next((e for e in res_ends if e > t), math.inf))
            if t == math.inf:
                return None  # cannot happen for an admissible job: everything ends eventually

    def _place(self, job: Job, free: np.ndarray, t: float, limit: float, max_nodes: int | None) -> bool:
        room, _ = self._masked(free, t, t + limit)
        if job.num_ps and not could_fit(room, job):  # choose_nodes checks a worker-only job itself
            return False
        taken = choose_nodes(self.layout, room, job, max_nodes=max_nodes)
        if taken is None:
            return False
        self.reservations.append(Reservation(t, t + limit, np.array(sorted(i for i, _ in taken))))
        return True

    def _releases(self) -> list[tuple[float, np.ndarray, np.ndarray]]:
        """What running jobs (and those started in this pass) free, by planned end."""
        return self.ends.entries if self._release_list is None else self._release_list

    def _masked(self, free: np.ndarray, t0: float, t1: float) -> tuple[np.ndarray, bool]:
        blocked = [r.nodes for r in self.reservations if r.start < t1 and r.end > t0]
        if not blocked:
            return free, False
        room = free.copy()
        room[np.concatenate(blocked)] = 0
        return room, True
