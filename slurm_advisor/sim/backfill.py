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
The overlap test is inclusive at the job's end, as Slurm's (``begin_time <= end_time``): a job
whose limit ends exactly when a reservation begins does not backfill on its nodes.
"""
from __future__ import annotations

import bisect
import math
from dataclasses import dataclass, field

import numpy as np

from slurm_advisor.domain import Job, Resources
from slurm_advisor.domain.cluster import NodeLayout
from slurm_advisor.policies.cons_tres import choose_nodes, usable_slots


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


# Candidate-by-node cells tested at once (bounds memory at 10,000 nodes: 20 candidates a chunk).
_CELLS = 200_000


def _fits_each(stacked: np.ndarray, blocked: np.ndarray | None, job: Job) -> np.ndarray:
    """Per candidate: could each role's tasks fit the unreserved nodes at all (could_fit)?"""
    ok = np.ones(len(stacked), dtype=bool)
    for demand, count in ((job.ps_demand, job.num_ps), (job.worker_demand, job.num_workers)):
        if not count:
            continue
        slots = np.minimum(usable_slots(stacked.reshape(-1, 3), demand), count).reshape(stacked.shape[:2])
        if blocked is not None:
            slots[blocked] = 0
        ok &= slots.sum(axis=1) >= count
    return ok


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
        self._times: np.ndarray | None = None   # candidate starts (cached until they change)
        self._entries: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
        self._matrix: np.ndarray | None = None  # reservations x nodes, 1 where reserved
        self._spans: tuple[np.ndarray, np.ndarray] | None = None  # reservation starts, ends
        self._profile: _FreeProfile | None = None  # free at each planned end (small plans only)
        self._no_start: dict[object, float] = {}  # shape -> shortest limit its counts never fit

    def room_now(self, limit: float) -> tuple[np.ndarray, bool]:
        """Free capacity a job with ``limit`` may use now (reserved nodes zeroed), and whether
        any node was masked."""
        blocked = self._blocked(np.array([self.now]), np.array([self.now + limit]))
        if blocked is None or not blocked[0].any():
            return self.free, False
        return np.where(blocked[0][:, None], 0, self.free), True

    def started(self, end: float, nodes: np.ndarray, amounts: np.ndarray) -> None:
        np.subtract.at(self.free, nodes, amounts)
        c, g, m = amounts.sum(axis=0).tolist()
        self.total = self.total - Resources(c, g, m)
        if self._release_list is None:  # copy on first write: the engine's list stays as it is
            self._release_list = list(self.ends.entries)
        self._release_list.insert(bisect.bisect_right(self._release_list, end, key=_end), (end, nodes, amounts))
        self._times = self._profile = None

    def reserve(self, job: Job, limit: float, max_nodes: int | None, not_before: float,
                shape: object = None) -> float | None:
        """Plan ``job`` at its earliest start (not before ``not_before``, an earlier identical
        job's start: it can only be later); returns that start or None beyond the window.
        ``shape``: a key the same for every job of the same task counts and demands.

        The candidate starts are now and every planned end and reservation end; they are tested
        a chunk at a time as arrays (free capacity at each candidate, reserved nodes masked,
        each role's slots counted), and cons_tres is asked only where the counts say it fits.

        The counts are monotone: in a pass the room at any time only shrinks (jobs start,
        reservations are added), a longer limit overlaps more reservations, and between two
        candidates the room only shrinks. So once a shape's counts fail at every candidate
        within the window, they fail for every later job of that shape with a limit as long."""
        if shape is None:
            shape = (job.num_ps, job.num_workers, job.ps_demand, job.worker_demand)
        if limit >= self._no_start.get(shape, math.inf):
            return None
        profile = self._free_profile()
        if profile is not None:
            start, counted = self._reserve_small(profile, job, limit, max_nodes, not_before)
        else:
            start, counted = self._reserve_chunked(job, limit, max_nodes, not_before)
        if not counted:
            self._no_start[shape] = min(limit, self._no_start.get(shape, math.inf))
        return start

    def _reserve_chunked(self, job: Job, limit: float, max_nodes: int | None,
                         not_before: float) -> tuple[float | None, bool]:
        """The search a chunk of candidates at a time; also whether the counts passed at any
        candidate within the window (from now, whatever ``not_before``)."""
        times, rows, cols, vals = self._timeline()
        horizon = self.now + self.window_s
        chunk = max(1, _CELLS // max(1, len(self.free)))
        free = self.free
        counted = False
        for lo in range(0, len(times), chunk):
            t = times[lo:lo + chunk]
            deltas = np.zeros((len(t), len(free), 3), dtype=np.int64)
            a, b = np.searchsorted(rows, [lo, lo + len(t)])
            np.add.at(deltas, (rows[a:b] - lo, cols[a:b]), vals[a:b])
            stacked = free + np.cumsum(deltas, axis=0)  # free at each candidate
            blocked = self._blocked(t, t + limit)
            fits = (t <= horizon) & _fits_each(stacked, blocked, job)
            counted = counted or bool(fits.any())
            for c in np.flatnonzero(fits & (t >= not_before)):
                room = np.where(blocked[c][:, None], 0, stacked[c]) if blocked is not None else stacked[c]
                taken = choose_nodes(self.layout, room, job, max_nodes=max_nodes)
                if taken is not None:
                    self._add(float(t[c]), float(t[c]) + limit, np.array(sorted(i for i, _ in taken)))
                    return float(t[c]), True
            if t[-1] > horizon:
                return None, counted
            free = stacked[-1]
        return None, counted  # cannot happen for an admissible job: everything ends eventually

    def _reserve_small(self, profile: _FreeProfile, job: Job, limit: float, max_nodes: int | None,
                       not_before: float) -> tuple[float | None, bool]:
        """``reserve`` on a plan small enough to hold the free capacity at every planned end at
        once: the same candidates in the same order, each role's slots counted once per pass."""
        times, at = profile.candidates(self.reservations)
        keep = int(np.searchsorted(times, self.now + self.window_s, side="right"))
        t, at = times[:keep], at[:keep]
        blocked = self._blocked(t, t + limit)
        ok = np.ones(len(t), dtype=bool)
        for demand, count in ((job.ps_demand, job.num_ps), (job.worker_demand, job.num_workers)):
            if count:
                slots = np.minimum(profile.slots(demand)[at], count)
                if blocked is not None:
                    slots[blocked] = 0
                ok &= slots.sum(axis=1) >= count
        if not ok.any():
            return None, False
        for c in np.flatnonzero(ok & (t >= not_before)):
            room = profile.free[at[c]]
            if blocked is not None:
                room = np.where(blocked[c][:, None], 0, room)
            taken = choose_nodes(self.layout, room, job, max_nodes=max_nodes)
            if taken is not None:
                self._add(float(t[c]), float(t[c]) + limit, np.array(sorted(i for i, _ in taken)))
                return float(t[c]), True
        return None, True

    def _free_profile(self) -> _FreeProfile | None:
        if self._profile is None:
            if (len(self._releases()) + 1) * max(1, len(self.free)) > _CELLS:
                return None  # the chunked search below bounds the memory
            self._profile = _FreeProfile(self.now, self.free, self._releases())
        return self._profile

    def _timeline(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Candidate starts, and what running jobs release at each, as (candidate, node, amount)
        entries sorted by candidate."""
        if self._times is None:
            releases = self._releases()
            ends = np.array([e[0] for e in releases], dtype=float)
            res_ends = np.array([r.end for r in self.reservations], dtype=float)
            times = np.unique(np.concatenate(([self.now], ends[ends > self.now], res_ends)))
            if releases:
                at = np.searchsorted(times, np.maximum(ends, self.now))  # released by that candidate
                rows = np.repeat(at, [len(e[1]) for e in releases])
                cols = np.concatenate([e[1] for e in releases])
                vals = np.concatenate([e[2] for e in releases])
            else:
                rows, cols, vals = (np.zeros(0, dtype=np.int64),) * 2 + (np.zeros((0, 3), dtype=np.int64),)
            self._times, self._entries = times, (rows, cols, vals)
        return (self._times, *self._entries)

    def _blocked(self, t0: np.ndarray, t1: np.ndarray) -> np.ndarray | None:
        """Per candidate, the nodes reserved during [t0, t1) (None: nothing reserved)."""
        if not self.reservations:
            return None
        if self._spans is None or len(self._spans[0]) != len(self.reservations):
            self._spans = (np.array([r.start for r in self.reservations]),
                           np.array([r.end for r in self.reservations]))
        starts, ends = self._spans
        overlap = (starts[None, :] <= t1[:, None]) & (ends[None, :] > t0[:, None])
        return (overlap.astype(np.float32) @ self._reserved_matrix()) > 0

    def _reserved_matrix(self) -> np.ndarray:
        if self._matrix is None or len(self._matrix) != len(self.reservations):
            m = np.zeros((len(self.reservations), len(self.free)), dtype=np.float32)
            for i, r in enumerate(self.reservations):
                m[i, r.nodes] = 1
            self._matrix = m
        return self._matrix

    def _add(self, start: float, end: float, nodes: np.ndarray) -> None:
        self.reservations.append(Reservation(start, end, nodes))
        self._times = None  # its end is a new candidate start for the jobs behind it

    def _releases(self) -> list[tuple[float, np.ndarray, np.ndarray]]:
        """What running jobs (and those started in this pass) free, by planned end."""
        return self.ends.entries if self._release_list is None else self._release_list


class _FreeProfile:
    """Free capacity per node at now and at every planned end after it (what running jobs and
    those started in the pass release by then), and the task slots of each demand there."""

    def __init__(self, now: float, free: np.ndarray, releases: list[tuple[float, np.ndarray, np.ndarray]]):
        self.now = now
        ends = np.array([e[0] for e in releases], dtype=float)
        self.times = np.unique(np.concatenate(([now], ends[ends > now])))
        deltas = np.zeros((len(self.times), len(free), 3), dtype=np.int64)
        if releases:
            at = np.searchsorted(self.times, np.maximum(ends, now))
            rows = np.repeat(at, [len(e[1]) for e in releases])
            np.add.at(deltas, (rows, np.concatenate([e[1] for e in releases])),
                      np.concatenate([e[2] for e in releases]))
        self.free = free + np.cumsum(deltas, axis=0)
        self._slots: dict[Resources, np.ndarray] = {}
        self._candidates: tuple[int, np.ndarray, np.ndarray] | None = None

    def slots(self, demand: Resources) -> np.ndarray:
        """usable_slots of ``demand`` at each planned end, shape (ends, nodes)."""
        if demand not in self._slots:
            self._slots[demand] = usable_slots(self.free.reshape(-1, 3), demand).reshape(self.free.shape[:2])
        return self._slots[demand]

    def candidates(self, reservations: list[Reservation]) -> tuple[np.ndarray, np.ndarray]:
        """The candidate starts (now, the planned ends, the reservations' ends), and for each
        the index of the last planned end at or before it (what is free then)."""
        if self._candidates is None or self._candidates[0] != len(reservations):
            res_ends = np.array([r.end for r in reservations], dtype=float)
            times = np.unique(np.concatenate((self.times, res_ends)))
            at = np.searchsorted(self.times, times, side="right") - 1
            self._candidates = (len(reservations), times, at)
        return self._candidates[1], self._candidates[2]
