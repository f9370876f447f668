"""One pass of Slurm's backfill scheduler, as sched/backfill and select/cons_tres plan it.

Every running job is planned to end at its start plus its time limit (a hard limit: Slurm ends
it there). Pending jobs are taken in priority order; each starts now if it fits on the nodes
that no job ahead of it has reserved for a window overlapping [now, now + limit] (inclusive at
the end, as Slurm's ``begin_time <= end_time``), else it is planned (tag slurm-22-05-9-1):

- ``backfill.c`` ``_attempt_backfill`` keeps a node-space map: consecutive time records, each
  with the nodes no reservation holds then. A job's usable nodes are those free in every record
  overlapping [start_res, start_res + limit]; ``later_start`` is the end of the first record
  after which more nodes come free. A reservation blocks its nodes *whole* from its start to
  its end, both rounded down to ``bf_resolution`` on the wall clock (``_add_reservation``, which
  also merges the first two neighbouring records left identical).
- ``cons_common/job_test.c`` ``_will_run_test`` finds the start on those nodes: now if the job
  fits now, else running jobs on them are removed in end order, in batches: the first batch
  ends 30-60 s after the first job's end (aligned on a 30-s wall-clock barrier), each later
  window twice as long; the job is tested after each batch and starts at the end of the *last*
  job removed. So a plan is often later than the first moment the job would fit.
- ``_attempt_backfill`` retries from ``later_start`` (``TRY_LATER``) when the plan lies after
  it, or when the job does not fit at all; and from the planned start when the chosen nodes
  clash with a reservation during the job's window (``_test_resv_overlap``). No plan beyond
  ``bf_window``. So a started job never delays the planned start of a job ahead of it.
"""
from __future__ import annotations

import bisect
import math
from dataclasses import dataclass, field

import numpy as np

from slurm_advisor.domain import Job, Resources
from slurm_advisor.domain.cluster import NodeLayout
from slurm_advisor.slurm.cons_tres import choose_nodes, could_fit, usable_slots
from slurm_advisor.slurm.left_weights import LeftWeights
from slurm_advisor.slurm.release import DEFAULT, Release

#: ``_will_run_test``'s first window (``time_window = 30``), doubled after every batch.
WILL_RUN_WINDOW_S = 30.0


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


# Candidate-by-node cells counted at once (bounds memory at 10,000 nodes: 20 candidates a chunk).
_CELLS = 200_000


class ChoiceMemo:
    """cons_tres's node choice on a room, remembered across backfill passes of one cluster.

    will-run asks ``choose_nodes`` for the same room again and again: the same free capacity
    with the same planned ends removed, for each queued job of a shape, in every pass until
    the state changes (on a congested 16-node trace nine asks in ten had been asked before).
    The choice is a function of the room, the job's task counts and demands and the node cap
    alone (``slurm/cons_tres.py`` reads nothing else of the job), so the memo is exact.
    Keys hold the room's bytes: at most ``budget_bytes`` of them are kept (the memo starts
    afresh beyond), so at 10,000 nodes it holds a few hundred rooms, at 16 nodes tens of
    thousands."""

    def __init__(self, budget_bytes: int = 32 << 20, release: Release = DEFAULT):
        self.budget_bytes, self.release = budget_bytes, release
        self._choices: dict[tuple, np.ndarray | None] = {}
        self._bytes = 0

    def choose(self, layout, room: np.ndarray, job: Job, max_nodes: int | None,
               left: np.ndarray | None = None) -> np.ndarray | None:
        """``left``: the node weights a job without GPUs finds (``slurm/left_weights.py``)."""
        key = (room.tobytes(), job.num_ps, job.num_workers, job.ps_demand, job.worker_demand, max_nodes,
               None if left is None else left.tobytes())
        try:
            return self._choices[key]
        except KeyError:
            pass
        found = _choose(layout, room, job, max_nodes, self.release, left)
        if self._bytes + len(key[0]) > self.budget_bytes:
            self._choices.clear()
            self._bytes = 0
        self._choices[key] = found
        self._bytes += len(key[0])
        return found


def _choose(layout, room: np.ndarray, job: Job, max_nodes: int | None, release: Release = DEFAULT,
            left: np.ndarray | None = None) -> np.ndarray | None:
    """The node indices cons_tres takes for ``job`` on ``room``, ascending (read-only), or None."""
    if not could_fit(room, job):
        return None
    taken = choose_nodes(layout, room, job, max_nodes=max_nodes, release=release, left=left)
    if taken is None:
        return None
    nodes = np.array(sorted(i for i, _ in taken), dtype=np.int64)
    nodes.setflags(write=False)  # shared by every ask of the memo
    return nodes


def _stop(offsets: np.ndarray, cols: np.ndarray, i: int) -> int:
    """Where entry ``i``'s (node, amount) rows end."""
    return int(offsets[i + 1]) if i + 1 < len(offsets) else len(cols)


def _end(entry: tuple[float, np.ndarray, np.ndarray]) -> float:
    return entry[0]


def _bits(nodes) -> int:
    mask = 0
    for i in nodes:
        mask |= 1 << int(i)
    return mask


@dataclass
class Reservation:
    start: float
    end: float
    nodes: np.ndarray  # node indices blocked during [start, end) (times as the node-space map has them)


class _NodeSpace:
    """``node_space``: records [begin, end) in time order up to the window's end, each with the
    nodes (a bit set) that no reservation holds then."""

    def __init__(self, begin: float, end: float, nodes: int, resolution: float):
        self.all = (1 << nodes) - 1
        self.begin, self.end, self.free = [begin], [end], [self.all]
        self.resolution = resolution

    def walk(self, start_res: float, end_time: float, past: bool = False) -> tuple[int, float | None]:
        """The nodes free in every record overlapping [start_res, end_time], and later_start.
        ``past`` (24.11+, SchedMD d5e0c8e664): when no record within the window frees nodes,
        later_start is the end of the record after the first one past the window."""
        avail, later = self.all, None
        begin, end, free = self.begin, self.end, self.free
        for j in range(len(begin)):
            if later is None and end[j] > start_res and j + 1 < len(begin) and free[j + 1] & ~(avail & free[j]):
                later = end[j]
            if end[j] <= start_res:
                continue
            if begin[j] > end_time:
                if past and later is None and j + 2 < len(begin):
                    later = end[j + 1]
                break
            avail &= free[j]
        return avail, later

    def clashes(self, nodes: int, start: float, end: float) -> bool:
        """``_test_resv_overlap``: a record during [start, end) lacks one of ``nodes``."""
        return any(e > start and b < end and nodes & ~f for b, e, f in zip(self.begin, self.end, self.free))

    def add(self, start: float, end: float, nodes: int) -> tuple[float, float] | None:
        """``_add_reservation``; returns the span it blocks, or None when it lies past the map."""
        begin, ends, free = self.begin, self.end, self.free
        start = max(start, begin[0])
        end = max(end, start + self.resolution)
        j, before, placed = 0, 0, False
        while j < len(begin) and not placed:
            if ends[j] > start:  # a record begins at the start
                self._split(j, start)
            placed = ends[j] >= start
            if not placed:
                before = j
                j += 1
        after = None
        j += 1
        while placed and j < len(begin):
            if end < ends[j]:  # a record begins at the end
                self._split(j, end)
            free[j] &= ~nodes
            if end == ends[j]:
                after = j + 1 if j + 1 < len(begin) else None
                break
            j += 1
        i = before  # drop one record whose nodes equal the next one's
        while i != after and i + 1 < len(begin):
            if free[i] != free[i + 1]:
                i += 1
                continue
            ends[i] = ends[i + 1]
            del begin[i + 1], ends[i + 1], free[i + 1]
            break
        end = min(end, ends[-1])
        return (start, end) if placed and start < end else None

    def _split(self, j: int, at: float) -> None:
        self.begin.insert(j + 1, at)
        self.end.insert(j + 1, self.end[j])
        self.free.insert(j + 1, self.free[j])
        self.end[j] = at


class BackfillPass:
    def __init__(self, layout: NodeLayout, free: np.ndarray, ends: RunningEnds, now: float,
                 window_s: float, resolution_s: float = 1.0, epoch_s: float = 0.0,
                 memo: ChoiceMemo | None = None, kill_wait_s: float = 0.0, weights: LeftWeights | None = None):
        """``memo``: choices kept across passes over the same ``layout`` (the simulation's);
        ``kill_wait_s``: KillWait, which will-run adds to the end of a job past its limit;
        ``weights``: the node weights GPU jobs leave (Slurm before 23.11), which each will-run
        reads and writes, so no will-run is taken from another."""
        self.weights = weights
        self.layout, self.now, self.window_s = layout, now, window_s
        self.memo = memo if memo is not None else ChoiceMemo()
        release = self.memo.release  # its rules, read once: will-run asks them on every try
        self._windows, self._gone_at_start = release.will_run_windows, release.gone_at_start_res
        self._last_relevant_job = release.starts_at_last_relevant_job
        self.resolution, self.epoch = resolution_s, epoch_s
        self.free = free.copy()
        # free on all nodes now: no job needing more can start (column by column: numpy's sum
        # down the three columns at once is far slower on a large cluster)
        self.total = Resources(*(int(self.free[:, r].sum()) for r in range(3)))
        self.ends = ends
        self._release_list: list[tuple[float, np.ndarray, np.ndarray]] | None = None
        self.reservations: list[Reservation] = []
        self.space = _NodeSpace(self._floor(now), self._floor(now + window_s), len(free), resolution_s)
        self._times: np.ndarray | None = None   # candidate starts of the counts (cached until they change)
        self._timeline_rows: tuple[np.ndarray, ...] = ()
        self._entries: tuple[np.ndarray, ...] | None = None  # planned ends and their rows, for _will_run
        self._matrix: np.ndarray | None = None  # reservations x nodes, 1 where reserved
        self._spans: tuple[np.ndarray, np.ndarray] | None = None  # reservation starts, ends
        self._profile: _FreeProfile | None = None  # free at each planned end (small plans only)
        self._no_start: dict[object, float] = {}  # shape -> shortest limit its counts never fit
        self._limits: set[float] = set()  # the limits of the jobs tested (now-dependent windows)
        self._beyond = math.inf  # the earliest plan refused for lying past the window
        # will-run per (usable nodes, shape, cap) until a job starts: it reads nothing else that
        # changes within a pass, and queued jobs of one shape ask it on the same nodes.
        self._will_runs: dict[tuple, tuple[float, np.ndarray] | None] = {}
        self._unmapped = False   # a plan past the map's last record (the window's end, rounded)
        self.kill_wait = kill_wait_s
        self._guessed = False    # a plan behind a job past its limit: it moves with time

    def _floor(self, t: float) -> float:
        """``t`` rounded down to ``bf_resolution`` on the wall clock."""
        return math.floor((t + self.epoch) / self.resolution) * self.resolution - self.epoch

    def room_now(self, limit: float) -> tuple[np.ndarray, bool]:
        """Free capacity a job with ``limit`` may use now (reserved nodes zeroed), and whether
        any node was masked."""
        self._limits.add(limit)
        blocked = self._blocked(np.array([self.now]), np.array([self.now + limit]), strict=False)
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
        self._times = self._profile = self._entries = None
        self._will_runs.clear()

    def reserve(self, job: Job, limit: float, max_nodes: int | None, shape: object = None) -> float | None:
        """Plan ``job`` as ``_attempt_backfill`` does; returns its planned start, or None (no
        plan within the window). ``shape``: a key the same for every job of the same task
        counts and demands.

        A job that gets no plan is checked against a necessary condition, counted as arrays: at
        some candidate start within the window (now, every planned end and reservation end)
        each role's tasks fit the free capacity then on the nodes not reserved during the job's
        window. A plan at any time passes it at the last candidate before (nothing frees
        between). Within a pass it only gets harder (jobs start, reservations are added) and
        harder for longer limits: once a shape fails it, every later job of that shape with a
        limit as long fails it too, and is not planned at all."""
        if shape is None:
            shape = (job.num_ps, job.num_workers, job.ps_demand, job.worker_demand)
        self._limits.add(limit)
        if limit >= self._no_start.get(shape, math.inf):
            return None
        start = self._try_later(job, limit, max_nodes)
        if start is None:
            profile = self._free_profile()
            if not (self._counts_small(profile, job, limit) if profile is not None
                    else self._counts_chunked(job, limit)):
                self._no_start[shape] = min(limit, self._no_start.get(shape, math.inf))
        return start

    def next_change(self) -> float:
        """The earliest time after now at which a pass over the same state could decide
        otherwise (inf: never). A pass depends on now only through the windows it tests
        against the node-space map, [now, now + limit] for each limit it tested, against the
        records' boundaries (each a reservation's start or end), and through the window's end:
        a plan refused past it, or past the map's last record, and the counts' candidates
        beyond it. A job planned at now (the advisor declined it) is the exception: its plan
        moves with time (see sim/scheduler.py)."""
        if self._guessed:  # now + 1 s: re-planned at every pass, as Slurm does
            return math.nextafter(self.now, math.inf)
        if not (self.reservations or self._no_start or self._beyond < math.inf):
            return math.inf
        last = self.space.end[-1]
        bounds = np.unique([t for r in self.reservations for t in (r.start, r.end) if t < last])
        later = [self._beyond - self.window_s]
        if len(bounds):
            limits = np.array(sorted(self._limits), dtype=float)
            at = np.searchsorted(bounds, self.now + limits, side="right")
            hit = at < len(bounds)
            later.extend((bounds[at[hit]] - limits[hit]).tolist())
            later.extend(bounds[bounds > self.now][:1].tolist())
        if self._unmapped:
            later.append(last + self.resolution - self.window_s)
        if self._no_start:  # a candidate the counts have not seen yet
            ends = self._entry_arrays()[0]
            past = np.concatenate((ends, bounds, [r.end for r in self.reservations]))
            past = past[past > self.now + self.window_s]
            if len(past):
                later.append(float(past.min()) - self.window_s)
        return max(min(later), math.nextafter(self.now, math.inf))

    def _try_later(self, job: Job, limit: float, max_nodes: int | None) -> float | None:
        """``_attempt_backfill`` from the ``TRY_LATER`` label on, for one job."""
        start_res, horizon = self.now, self.now + self.window_s
        while True:
            avail, later = self.space.walk(start_res, start_res + limit, self._windows)
            found = self._will_run(job, avail, max_nodes, start_res, later)
            if found is None:
                if later is None:
                    return None
                start_res = later
                continue
            start, nodes = max(found[0], start_res), found[1]
            if later is not None and start > later:
                start_res = later
                continue
            if start > horizon:
                self._beyond = min(self._beyond, start)
                return None
            mask = _bits(nodes)
            if start > self.now and self.space.clashes(mask, self._floor(start), self._floor(start + limit)):
                if start <= start_res:
                    return None  # cannot happen: records begin and end on resolution slots
                start_res = start
                continue
            span = self.space.add(self._floor(start), self._floor(start + limit), mask)
            self._unmapped = self._unmapped or span is None
            if span is not None:
                self.reservations.append(Reservation(span[0], span[1], nodes))
                self._times = None  # its end is a new candidate start of the counts
            return start

    def _will_run(self, job: Job, avail: int, max_nodes: int | None, start_res: float,
                  later: float | None) -> tuple[float, np.ndarray] | None:
        """``_will_run_test`` on the nodes in ``avail``: (start, node indices) or None. From
        24.11 it also reads the try's start_res and later_start (``will_run_data``)."""
        if self.weights is not None:
            return self._will_run_test(job, avail, max_nodes, start_res, later)
        key = (avail, job.num_ps, job.num_workers, job.ps_demand, job.worker_demand, max_nodes)
        if self._windows:
            key += (start_res, later)
        if key not in self._will_runs:
            self._will_runs[key] = self._will_run_test(job, avail, max_nodes, start_res, later)
        return self._will_runs[key]

    def _will_run_test(self, job: Job, avail: int, max_nodes: int | None, start_res: float,
                       later: float | None) -> tuple[float, np.ndarray] | None:
        usable = self._usable(avail)
        windows = self._windows
        if not windows or start_res <= self.now:  # 24.11 tests a later try in the future only
            found = self._choose(np.where(usable[:, None], self.free, 0), job, max_nodes)
            if found is not None:
                return self.now, found
        ends, offsets, cols, vals = self._entry_arrays()
        if not len(ends):
            return None
        touching = np.flatnonzero(np.logical_or.reduceat(usable[cols], offsets))
        future = self.free.copy()
        if windows:
            # _build_cr_job_list (4107be4f80): jobs ending before start_res are gone first, and
            # (3d8d6cb4e9) none ending after later_start is removed: the job waits for a later try
            # 25.05+ (324f83551b) also those ending at start_res
            side = "right" if self._gone_at_start else "left"
            gone = int(np.searchsorted(ends, start_res, side=side))
            early = touching[touching < gone]
            for i in early.tolist():
                np.add.at(future, cols[offsets[i]:_stop(offsets, cols, i)], vals[offsets[i]:_stop(offsets, cols, i)])
            if len(early) or start_res > self.now:
                found = self._choose(np.where(usable[:, None], future, 0), job, max_nodes)
                if found is not None:
                    return self.now, found
            cap = len(ends) if later is None else int(np.searchsorted(ends, later, side="right"))
            touching = touching[(touching >= gone) & (touching < cap)]
        return self._batches(job, usable, future, touching, max_nodes)

    def _batches(self, job: Job, usable: np.ndarray, future: np.ndarray, touching: np.ndarray,
                 max_nodes: int | None) -> tuple[float, np.ndarray] | None:
        """Running jobs on the usable nodes removed in end order, in batches: the first batch
        ends 30-60 s after the first job's end (aligned on a 30-s wall-clock barrier), each
        later window twice as long; the job is tested after each batch."""
        ends, offsets, cols, vals = self._entry_arrays()
        done, window, align, k = (int(touching[0]) if len(touching) else 0), WILL_RUN_WINDOW_S, None, 0
        while k < len(touching):
            first = int(touching[k])
            if align is None:  # the first batch's barrier: the next multiple of 30 s after its end
                align = ends[first] + WILL_RUN_WINDOW_S - (ends[first] + self.epoch) % WILL_RUN_WINDOW_S
            # removed up to the first job whose successor ends past the window (or the last)
            beyond = int(np.searchsorted(ends, align + window, side="right"))
            k = int(np.searchsorted(touching, max(first, beyond - 1)))
            last = int(touching[min(k, len(touching) - 1)])
            stop = _stop(offsets, cols, last)
            np.add.at(future, cols[offsets[done]:stop], vals[offsets[done]:stop])
            done = last + 1
            window *= 2
            while k < len(touching) and last + 1 < len(ends) and ends[last + 1] > align + window:
                window *= 2
            found = self._choose(np.where(usable[:, None], future, 0), job, max_nodes)
            if found is not None:
                if self._last_relevant_job:
                    last = self._last_relevant(touching[:k + 1], found, last)
                return self._guess_end(float(ends[last])), found
            k += 1
        return None

    def _last_relevant(self, removed: np.ndarray, found: np.ndarray, last: int) -> int:
        """25.11+ (SchedMD 977bb2ee4f, ``_get_last_relevant_job``): the start is the end of the
        latest-ending removed job on a node the job was given, not of the last one removed."""
        _, offsets, cols, _ = self._entry_arrays()
        for i in removed[::-1].tolist():
            if np.isin(cols[offsets[i]:_stop(offsets, cols, i)], found).any():
                return i
        return last

    def _guess_end(self, end: float) -> float:
        """``_guess_job_end`` (cons_common/job_test.c): a job still running past its limit
        (slurmctld ends it at its next limit check) is planned to end KillWait after the
        limit, and never before now + 1 s (OverTimeLimit=0)."""
        if end > self.now:
            return end
        self._guessed = True
        return max(end + self.kill_wait, self.now + 1.0)

    def _choose(self, room: np.ndarray, job: Job, max_nodes: int | None) -> np.ndarray | None:
        if self.weights is None:
            return self.memo.choose(self.layout, room, job, max_nodes)
        found = self.memo.choose(self.layout, room, job, max_nodes, self.weights.for_job(job))
        self.weights.evaluated(room, job)
        return found

    def _usable(self, avail: int) -> np.ndarray:
        n = len(self.free)
        raw = (avail & ((1 << n) - 1)).to_bytes((n + 7) // 8 or 1, "little")
        return np.unpackbits(np.frombuffer(raw, dtype=np.uint8), bitorder="little")[:n].astype(bool)

    def _entry_arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The planned ends in order, and each entry's (node, amount) rows, concatenated."""
        if self._entries is None:
            releases = self._releases()
            ends = np.array([e[0] for e in releases], dtype=float)
            sizes = np.array([len(e[1]) for e in releases], dtype=np.int64)
            offsets = np.concatenate(([0], np.cumsum(sizes)[:-1])).astype(np.int64) if releases else sizes
            cols = np.concatenate([e[1] for e in releases]) if releases else np.zeros(0, dtype=np.int64)
            vals = np.concatenate([e[2] for e in releases]) if releases else np.zeros((0, 3), dtype=np.int64)
            self._entries = (ends, offsets, cols, vals)
        return self._entries

    # -- the counts: a necessary condition for a plan -----------------------------------
    def _counts_chunked(self, job: Job, limit: float) -> bool:
        """Whether each role's slots suffice at some candidate within the window, a chunk of
        candidates at a time (free capacity at each, reserved nodes masked)."""
        times, rows, cols, vals = self._timeline()
        times = times[:int(np.searchsorted(times, self.now + self.window_s, side="right"))]
        chunk = max(1, _CELLS // max(1, len(self.free)))
        free = self.free
        for lo in range(0, len(times), chunk):
            t = times[lo:lo + chunk]
            deltas = np.zeros((len(t), len(free), 3), dtype=np.int64)
            a, b = np.searchsorted(rows, [lo, lo + len(t)])
            np.add.at(deltas, (rows[a:b] - lo, cols[a:b]), vals[a:b])
            stacked = free + np.cumsum(deltas, axis=0)  # free at each candidate
            blocked = self._blocked(t, t + limit, strict=True)
            ok = np.ones(len(t), dtype=bool)
            for demand, count in ((job.ps_demand, job.num_ps), (job.worker_demand, job.num_workers)):
                if count:
                    slots = np.minimum(usable_slots(stacked.reshape(-1, 3), demand), count).reshape(stacked.shape[:2])
                    if blocked is not None:
                        slots[blocked] = 0
                    ok &= slots.sum(axis=1) >= count
            if ok.any():
                return True
            free = stacked[-1]
        return False

    def _counts_small(self, profile: _FreeProfile, job: Job, limit: float) -> bool:
        """``_counts_chunked`` on a plan small enough to hold the free capacity at every
        planned end at once, each role's slots counted once per pass."""
        times, at = profile.candidates(self.reservations)
        keep = int(np.searchsorted(times, self.now + self.window_s, side="right"))
        t, at = times[:keep], at[:keep]
        blocked = self._blocked(t, t + limit, strict=True)
        ok = np.ones(len(t), dtype=bool)
        for demand, count in ((job.ps_demand, job.num_ps), (job.worker_demand, job.num_workers)):
            if count:
                slots = np.minimum(profile.slots(demand)[at], count)
                if blocked is not None:
                    slots[blocked] = 0
                ok &= slots.sum(axis=1) >= count
        return bool(ok.any())

    def _free_profile(self) -> _FreeProfile | None:
        if self._profile is None:
            if (len(self._releases()) + 1) * max(1, len(self.free)) > _CELLS:
                return None  # the chunked counts bound the memory
            self._profile = _FreeProfile(self.now, self.free, self._releases())
        return self._profile

    def _timeline(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Candidate starts, and what running jobs release at each, as (candidate, node, amount)
        entries sorted by candidate."""
        if self._times is None:
            releases = self._releases()
            ends = np.array([e[0] for e in releases], dtype=float)
            res_ends = np.array([r.end for r in self.reservations], dtype=float)
            times = np.unique(np.concatenate(([self.now], ends[ends > self.now], res_ends[res_ends > self.now])))
            if releases:
                at = np.searchsorted(times, np.maximum(ends, self.now))  # released by that candidate
                rows = np.repeat(at, [len(e[1]) for e in releases])
                cols = np.concatenate([e[1] for e in releases])
                vals = np.concatenate([e[2] for e in releases])
            else:
                rows, cols, vals = (np.zeros(0, dtype=np.int64),) * 2 + (np.zeros((0, 3), dtype=np.int64),)
            self._times, self._timeline_rows = times, (rows, cols, vals)
        return (self._times, *self._timeline_rows)

    def _blocked(self, t0: np.ndarray, t1: np.ndarray, strict: bool) -> np.ndarray | None:
        """Per candidate, the nodes reserved during [t0, t1]: as the node-space walk has them
        (a reservation that begins at t1 counts), or, ``strict``, as a plan at t0 may not use
        them (``_test_resv_overlap``: one that begins at t1 rounded down does not)."""
        if not self.reservations:
            return None
        if self._spans is None or len(self._spans[0]) != len(self.reservations):
            self._spans = (np.array([r.start for r in self.reservations]),
                           np.array([r.end for r in self.reservations]))
        starts, ends = self._spans
        if strict:
            t1 = np.floor((t1 + self.epoch) / self.resolution) * self.resolution - self.epoch
            overlap = (starts[None, :] < t1[:, None]) & (ends[None, :] > t0[:, None])
        else:
            overlap = (starts[None, :] <= t1[:, None]) & (ends[None, :] > t0[:, None])
        return (overlap.astype(np.float32) @ self._reserved_matrix()) > 0

    def _reserved_matrix(self) -> np.ndarray:
        if self._matrix is None or len(self._matrix) != len(self.reservations):
            m = np.zeros((len(self.reservations), len(self.free)), dtype=np.float32)
            for i, r in enumerate(self.reservations):
                m[i, r.nodes] = 1
            self._matrix = m
        return self._matrix

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
            times = np.unique(np.concatenate((self.times, res_ends[res_ends > self.now])))
            at = np.searchsorted(self.times, times, side="right") - 1
            self._candidates = (len(reservations), times, at)
        return self._candidates[1], self._candidates[2]
