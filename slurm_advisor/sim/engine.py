"""The trace-driven simulator: a deterministic event loop around the one Advisor.

Jobs arrive and wait in Slurm's order; Slurm's two scheduling loops (``sim/scheduler.py``)
decide *when* a job may start — the main pass at every arrival and end, a backfill pass
(``sim/backfill.py``) at every ``bf_interval`` tick at which it could decide otherwise than
the last one — and the advisor
decides *where*. A job keeps its nodes until it completes or Slurm ends it past its time limit
(at its next time-limit check: state TIMEOUT), and runs at the speed the ground truth gives it; whenever a
neighbour arrives or leaves, the speeds of the jobs it touches are recomputed. One clock,
owned here; one seeded generator, passed to the advisor.
"""
from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from slurm_advisor.advisor import Advisor
from slurm_advisor.domain import (
    ClusterSnapshot,
    Job,
    Node,
    Placement,
    RunningJob,
    SpeedSample,
    SwitchLoad,
    switch_loads,
)
from slurm_advisor.domain.observation import for_placement
from slurm_advisor.policies.isolated import IsolatedSpeeds
from slurm_advisor.policies.slurm_default import SlurmDefaultPolicy
from slurm_advisor.sim.backfill import BackfillPass, ChoiceMemo, RunningEnds
from slurm_advisor.sim.metrics import JobRecord, SimResult
from slurm_advisor.sim.scheduler import SchedulerConfig
from slurm_advisor.slurm.cons_tres import could_fit
from slurm_advisor.slurm.left_weights import LeftWeights
from slurm_advisor.speedmodels.base import SpeedModel

# At equal times: ends free their nodes first, then limits are enforced, then arrivals queue,
# then the backfill pass runs on the result.
_FINISH, _DEADLINE, _ARRIVE, _BACKFILL = 0, 1, 2, 3
Recorder = Callable[[list[SpeedSample]], None]


@dataclass
class _Progress:
    running: RunningJob
    remaining: float      # iterations left at time `last`
    deadline: float       # start + time limit
    killed_at: float      # when Slurm ends it if it still runs then (its first time-limit check)
    speed: float = 0.0
    last: float = 0.0
    version: int = 0

    def settle(self, now: float) -> float:
        """Advance to ``now``; returns the iterations done since the last settle."""
        done = min(self.remaining, self.speed * (now - self.last))
        self.remaining -= done
        self.last = now
        return done

    def expected_end(self) -> float:
        return self.last + self.remaining / self.speed if self.speed > 0 else math.inf


class _Events:
    """The event heap. At equal times events pop in kind order (see the constants above), then
    in the order they were pushed."""

    def __init__(self) -> None:
        self._heap: list[tuple] = []
        self._seq = 0

    def push(self, time: float, kind: int, job_id: str, version: int = 0) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (time, kind, self._seq, job_id, version))

    def next_time(self) -> float | None:
        return self._heap[0][0] if self._heap else None

    def pop(self) -> tuple[int, str, int]:
        """(kind, job id, version) of the next event."""
        _, kind, _, job_id, version = heapq.heappop(self._heap)
        return kind, job_id, version


class _Jobs:
    """The admitted jobs by index, each with its shape (task counts and demands, as a small int:
    the backfill pass rules out a shape at once) and its time limit once it arrived."""

    def __init__(self, jobs: Sequence[Job]):
        self.all = list(jobs)
        self.by_id = {j.id: j for j in self.all}
        self.index = {j.id: i for i, j in enumerate(self.all)}
        shapes: dict[tuple, int] = {}
        self.shape = {j.id: shapes.setdefault((j.num_ps, j.num_workers, j.ps_demand, j.worker_demand),
                                              len(shapes)) for j in self.all}
        self.shapes = len(shapes)
        self.shape_of = np.array([self.shape[j.id] for j in self.all], dtype=np.int64)
        self.limit_of = np.full(len(self.all), math.nan)  # set on arrival


class _Queue:
    """Slurm's queue of pending jobs in priority order, with each job's index beside it."""

    def __init__(self) -> None:
        self.jobs: list[Job] = []
        self.indices: list[int] = []

    def append(self, job: Job, index: int) -> None:
        self.jobs.append(job)
        self.indices.append(index)

    def remove(self, job: Job) -> None:
        # By identity: list.remove would compare whole Job dataclasses field by field.
        at = next(i for i, queued in enumerate(self.jobs) if queued is job)
        del self.jobs[at], self.indices[at]

    def __bool__(self) -> bool:
        return bool(self.jobs)


class _Output:
    """What a run gives back besides its schedule: speed samples to the recorder (with
    measurement noise from a generator of their own, apart from decisions), the progress log,
    the records of ended jobs."""

    def __init__(self, recorder: Recorder | None, sample_noise: float, seed: int, log_progress: bool):
        self.recorder, self.sample_noise, self.log_progress = recorder, sample_noise, log_progress
        self.noise_rng = np.random.default_rng(seed + 7919)
        self.records: list[JobRecord] = []
        self.log: list[tuple[str, float, float, float]] = []


class _BackfillState:
    """What Slurm's backfill keeps between its passes: will-run's choices, the weights GPU jobs
    leave (22.05, mixed workloads), from when a pass could decide otherwise than the last, and
    the pending tick."""

    def __init__(self, config: SchedulerConfig, jobs: Sequence[Job], nodes: Sequence[Node]):
        self.choices = ChoiceMemo(release=config.release)
        self.weights = LeftWeights.kept_for(config.release, jobs, len(nodes))
        # Slurm's passes read and write the weights GPU jobs leave: each one counts
        self.every_tick = config.every_tick or self.weights is not None
        self.eager = config.eager_plans or self.weights is not None
        self.totals = np.array([(n.cpus, n.gpus, n.mem_mb) for n in nodes], dtype=np.int64).reshape(-1, 3)
        self.stale_at = math.inf     # from when a backfill pass could decide otherwise than the last
        self.at = math.inf           # the pending backfill tick


class Simulation:
    def __init__(self, nodes: Sequence[Node], jobs: Sequence[Job], advisor: Advisor,
                 truth: SpeedModel, *, seed: int = 0, recorder: Recorder | None = None,
                 sample_noise: float = 0.0, scheduler: SchedulerConfig | None = None,
                 log_progress: bool = False, isolated: IsolatedSpeeds | None = None):
        """``isolated``: the jobs' speeds alone under ``truth`` on these nodes, shared by
        simulations that replay one fitted model again and again (training); else its own."""
        self.snapshot = ClusterSnapshot.empty(tuple(nodes))
        self.advisor, self.truth = advisor, truth
        self.config = scheduler or SchedulerConfig()
        self.rng = np.random.default_rng(seed)
        self.out = _Output(recorder, sample_noise, seed, log_progress)
        if isolated is not None and (isolated.model is not truth or isolated.empty.nodes != self.snapshot.nodes):
            raise ValueError("isolated speeds of another truth or cluster")
        self.isolated = isolated if isolated is not None else IsolatedSpeeds(truth, nodes)
        admitted, self.skipped = self._admissible(jobs)
        self._jobs = _Jobs(admitted)
        self._events = _Events()
        self._queue = _Queue()
        self._progress: dict[str, _Progress] = {}
        self._jobs_on: dict[str, set[str]] = {n.name: set() for n in nodes}
        self._ends = RunningEnds()
        self._limits: dict[str, float] = {}
        self._caps: dict[str, int | None] = {}   # node cap of a held job's last Hold
        self.fallbacks = 0
        self.holds = 0  # decisions to wait for a better placement although the job fitted
        self._backfill = _BackfillState(self.config, self._jobs.all, nodes)
        #: First planned start of each job, and the first made while it headed the queue
        #: (Slurm's promise: with every job ending by its limit, it starts by then).
        self.planned: dict[str, float] = {}
        self.planned_as_head: dict[str, float] = {}

    @classmethod
    def continuing(cls, snapshot: ClusterSnapshot, remaining: Mapping[str, float], jobs: Sequence[Job],
                   advisor: Advisor, truth: SpeedModel, **kw) -> Simulation:
        """A simulation that goes on from ``snapshot``: its running jobs keep their nodes, each
        with ``remaining[job id]`` iterations left (its start time and time limit as they were:
        one already past its limit ends at once, as Slurm would end it), and ``jobs`` arrive at
        their submit times (none before the snapshot's time). A look-ahead from a live state
        (``benchmarks/lookahead.py``); its records include the running jobs'."""
        sim = cls(snapshot.nodes, jobs, advisor, truth, **kw)
        if any(j.submit_time < snapshot.time for j in sim._jobs.all):
            raise ValueError("a job of the look-ahead arrives before the snapshot's time")
        unknown = [rj.job.id for rj in snapshot.running if rj.job.id not in remaining]
        if unknown:
            raise ValueError(f"no iterations left given for running job(s) {', '.join(unknown)}")
        sim.snapshot = snapshot
        now = snapshot.time
        for rj in snapshot.running:
            sim._track(rj, max(rj.start_time + sim._limit(rj.job), now), remaining[rj.job.id], now)
        sim._update_speeds({rj.job.id for rj in snapshot.running}, now)
        return sim

    def _admissible(self, jobs: Sequence[Job]) -> tuple[list[Job], tuple[str, ...]]:
        """Jobs that could run on the empty cluster; the rest are reported, not simulated."""
        ok, skipped, fits_cache = [], [], {}
        for job in jobs:
            key = (job.num_ps, job.num_workers, job.ps_demand, job.worker_demand)
            if key not in fits_cache:
                fits_cache[key] = SlurmDefaultPolicy().place(self.snapshot, job) is not None
            (ok if fits_cache[key] else skipped).append(job)
        return ok, tuple(j.id for j in skipped)

    def run(self) -> SimResult:
        jobs = self._jobs
        for job in jobs.all:
            self._events.push(job.submit_time, _ARRIVE, job.id)
        while (now := self._events.next_time()) is not None:
            touched, changed, backfill_due = set(), False, False
            while self._events.next_time() == now:
                kind, job_id, version = self._events.pop()
                if kind == _ARRIVE:
                    self._queue.append(jobs.by_id[job_id], jobs.index[job_id])
                    jobs.limit_of[jobs.index[job_id]] = self._limit(jobs.by_id[job_id])
                    changed = True
                elif kind == _BACKFILL:
                    backfill_due = now == self._backfill.at
                elif self._is_current(job_id, kind, version):
                    touched |= self._end(job_id, now, timed_out=kind == _DEADLINE)
                    changed = True
            if changed:
                touched |= self._main_pass(now)
                self._backfill.stale_at = min(self._backfill.stale_at, now)
            if backfill_due:
                self._backfill.at = math.inf
                if self._backfill.stale_at <= now or self._backfill.every_tick:
                    touched |= self._backfill_pass(now)
            self._plan_backfill(now, ran=backfill_due)
            self._update_speeds(touched, now)
        return SimResult(self.advisor.policy.name, tuple(self.out.records),
                         sum(n.gpus for n in self.snapshot.nodes), self.skipped, self.fallbacks,
                         tuple(self.out.log), self.holds)

    def _is_current(self, job_id: str, kind: int, version: int) -> bool:
        """Stale finish events (superseded by a speed change) and limits of ended jobs change nothing."""
        prog = self._progress.get(job_id)
        return prog is not None and (kind == _DEADLINE or prog.version == version)

    # -- scheduling ------------------------------------------------------------------------
    def _main_pass(self, now: float) -> set[str]:
        """Slurm's main scheduler: jobs in priority order until the first that cannot start."""
        touched: set[str] = set()
        while self._queue:
            job = self._queue.jobs[0]
            free = self.snapshot.free_array()
            placement = self._try_start(job, self.snapshot, now)
            if self._backfill.weights is not None:
                self._backfill.weights.tried_now(free, self._backfill.totals, job, started=placement is not None)
            if placement is None:
                break
            touched |= self._start(job, placement, now)
        return touched

    def _backfill_pass(self, now: float) -> set[str]:
        """Slurm's backfill: jobs in priority order; each starts now if that delays no job ahead
        of it, else it is planned at its earliest start. A plan matters only to the jobs behind
        it that could start now, so a job is planned when the first such job comes (or at once
        with ``eager_plans``): the same starts, without planning a long queue at every pass.
        A pass that starts a job makes the next one due (``_more_work``: a start updates
        last_job_update): jobs it planned before that start are planned anew with it running,
        and will-run's batches of ending jobs, and so the plans, can differ."""
        plan = BackfillPass(self.snapshot.layout, self.snapshot.free_array(), self._ends, now,
                            self.config.bf_window_s, self.config.bf_resolution_s, self.config.epoch_s,
                            memo=self._backfill.choices, kill_wait_s=self.config.kill_wait_s, weights=self._backfill.weights)
        touched: set[str] = set()
        unplanned: list[Job] = []
        # Within a pass the room only shrinks (jobs start, reservations are added) and a longer
        # limit overlaps more reservations, so once a shape fails could_fit at some limit it
        # fails at every longer one (at any limit when no node was masked, or when the shape's
        # total is more than is free in all): per shape, that limit. The jobs it rules out are
        # passed over in blocks, found as arrays.
        no_room = np.full(self._jobs.shapes, math.inf)
        queue = self._queue.jobs[:self.config.bf_max_job_test]
        at = np.array(self._queue.indices[:len(queue)], dtype=np.int64)
        shapes, limits = self._jobs.shape_of[at], self._jobs.limit_of[at]
        i = 0
        while i < len(queue):
            tried = np.flatnonzero(limits[i:] < no_room[shapes[i:]])
            k = i + int(tried[0]) if len(tried) else len(queue)
            if k > i:  # none of these can start now
                unplanned.extend(queue[i:k])
                if self._backfill.eager:
                    self._plan(plan, unplanned)
            if k == len(queue):
                break
            job, i = queue[k], k + 1
            placement = None
            if job.total_demand().fits_in(plan.total):
                placement = self._backfill_start(job, plan, unplanned, no_room, now)
            else:
                no_room[shapes[k]] = -math.inf
            if placement is not None:
                if self._backfill.weights is not None:  # backfill starts it through select_nodes
                    self._backfill.weights.synced()
                    self._backfill.weights.evaluated(plan.free, job)
                touched |= self._start(job, placement, now)
                plan.started(now + self._limit(job), *self._ends.usage[job.id])
                continue
            unplanned.append(job)
            if self._backfill.eager:
                self._plan(plan, unplanned)
        if self.config.bf_interval_s == 0:
            self._backfill.stale_at = math.inf  # a pass at every change only
        else:
            self._backfill.stale_at = now if touched else plan.next_change()
        return touched

    def _backfill_start(self, job: Job, plan: BackfillPass, unplanned: list[Job], no_room: np.ndarray,
                        now: float) -> Placement | None:
        """Where ``job`` starts now in this pass, or None; plans the jobs ahead of it first if
        it could start (their reservations may keep it from starting)."""
        limit = self._limit(job)
        shape = self._jobs.shape[job.id]
        room, masked = plan.room_now(limit)
        fits = could_fit(room, job)
        if fits and unplanned:
            self._plan(plan, unplanned)
            room, masked = plan.room_now(limit)
            fits = could_fit(room, job)
        if not fits:
            no_room[shape] = min(no_room[shape], limit if masked else -math.inf)
            return None
        snapshot = self.snapshot.with_free(room) if masked else self.snapshot
        return self._advise(job, snapshot, now)

    def _plan(self, plan: BackfillPass, unplanned: list[Job]) -> None:
        for job in unplanned:
            start = plan.reserve(job, self._limit(job), self._caps.get(job.id), shape=self._jobs.shape[job.id])
            if start is not None:
                self.planned.setdefault(job.id, start)
                if job is self._queue.jobs[0]:
                    self.planned_as_head.setdefault(job.id, start)
        unplanned.clear()

    def _plan_backfill(self, now: float, ran: bool) -> None:
        """Schedule the next backfill tick when there is something for it to do."""
        if not self._queue:
            return
        if self._backfill.every_tick:
            at = self.config.next_backfill(now)
        elif self._backfill.stale_at < math.inf:
            at = self.config.next_backfill(max(self._backfill.stale_at, now))
        else:
            return
        if ran and at <= now:
            at = self.config.next_backfill(now + self.config.bf_interval_s)
        if at < self._backfill.at:
            self._backfill.at = at
            self._events.push(at, _BACKFILL, "")

    def _try_start(self, job: Job, snapshot: ClusterSnapshot, now: float) -> Placement | None:
        if not could_fit(snapshot.free_array(), job):
            return None  # no policy could place it: spare the advisor the call
        return self._advise(job, snapshot, now)

    def _advise(self, job: Job, snapshot: ClusterSnapshot, now: float) -> Placement | None:
        advice = self.advisor.advise(snapshot.at(now), job, self.rng)
        if advice.placement is not None and advice.fallback:
            self.fallbacks += 1
        if advice.held:
            self.holds += 1
            self._caps[job.id] = advice.max_nodes
        return advice.placement

    def _limit(self, job: Job) -> float:
        if job.id not in self._limits:
            self._limits[job.id] = self.config.time_limit(job.time_limit_s, job.iterations / self.isolated(job))
        return self._limits[job.id]

    def _start(self, job: Job, placement: Placement, now: float) -> set[str]:
        self._queue.remove(job)
        self.snapshot = self.snapshot.with_job(job, placement, now)
        rj = self.snapshot.running_job(job.id)
        self._track(rj, now + self._limit(job), job.iterations, now)
        self._caps.pop(job.id, None)
        return self._neighbours(rj) | {job.id}

    def _track(self, rj: RunningJob, deadline: float, remaining: float, now: float) -> None:
        """Follow a job running on the snapshot: its progress, its limit, its nodes."""
        job_id = rj.job.id
        killed_at = self.config.killed_at(deadline)
        self._progress[job_id] = _Progress(rj, remaining, deadline, killed_at, last=now)
        self._events.push(killed_at, _DEADLINE, job_id)
        per_node = rj.placement.demand_per_node(rj.job)
        index = self.snapshot.layout.index
        self._ends.add(job_id, deadline, np.array([index[n] for n in per_node], dtype=np.int64),
                       np.array([(d.cpus, d.gpus, d.mem_mb) for d in per_node.values()], dtype=np.int64))
        for node in rj.placement.nodes():
            self._jobs_on[node].add(job_id)

    # -- ending ----------------------------------------------------------------------------
    def _end(self, job_id: str, now: float, timed_out: bool) -> set[str]:
        prog = self._progress.pop(job_id)
        self._account(prog, now)
        rj = prog.running
        job = rj.job
        completed = not timed_out or prog.remaining <= 1e-9 * job.iterations
        neighbours = self._neighbours(rj)
        for node in rj.placement.nodes():
            self._jobs_on[node].discard(job_id)
        self.snapshot = self.snapshot.without_job(job_id, now)
        self._ends.remove(job_id, prog.deadline)
        self.out.records.append(JobRecord(job.id, job.type, job.submit_time, rj.start_time, now,
                                       job.iterations / self.isolated(job), len(rj.placement.nodes()),
                                       job.total_demand().gpus, "COMPLETED" if completed else "TIMEOUT",
                                       self._limits[job.id]))
        return neighbours | {job_id}  # the ended id is dropped in _update_speeds

    def _neighbours(self, rj: RunningJob) -> set[str]:
        out: set[str] = set()
        for node in rj.placement.nodes():
            out |= self._jobs_on[node]
        out.discard(rj.job.id)
        return out

    # -- speeds ----------------------------------------------------------------------------
    def _update_speeds(self, touched: set[str], now: float) -> None:
        if touched and not self.truth.local:
            touched = set(self._progress)  # a non-local model: any start or finish may change every speed
        touched = {j for j in touched if j in self._progress}
        if not touched:
            return
        if self.truth.local:
            # A local model looks only at the tasks sharing each job's nodes: pass just those.
            context = set(touched)
            for job_id in touched:
                context |= self._neighbours(self._progress[job_id].running)
            running = [self._progress[j].running for j in sorted(context)]
            speeds = self.truth.speeds(self.snapshot.nodes, running, touched)
        else:
            speeds = self.truth.speeds(self.snapshot.nodes, self.snapshot.running, None)
        for job_id in sorted(touched):
            prog = self._progress[job_id]
            self._account(prog, now)
            prog.speed = speeds[job_id]
            prog.version += 1
            end = prog.expected_end()
            if end <= prog.killed_at:  # otherwise the limit ends it first
                self._events.push(end, _FINISH, job_id, prog.version)
        if self.out.recorder is not None:
            loads = switch_loads(self.snapshot)  # once for the event's samples
            self.out.recorder([self._sample(self._progress[j].running, now, loads) for j in sorted(touched)])

    def _account(self, prog: _Progress, now: float) -> None:
        t0 = prog.last
        done = prog.settle(now)
        if self.out.log_progress and done > 0:
            self.out.log.append((prog.running.job.id, t0, now, done / prog.running.job.iterations))

    def _sample(self, rj: RunningJob, now: float, loads: dict[str, SwitchLoad]) -> SpeedSample:
        neighbours = tuple(self._progress[j].running for j in sorted(self._neighbours(rj)))
        names = dict.fromkeys(rj.placement.nodes())
        for n in neighbours:
            names.update(dict.fromkeys(n.placement.nodes()))
        index = self.snapshot.layout.index
        nodes = tuple(self.snapshot.nodes[i] for i in sorted(index[n] for n in names))
        speed = self._progress[rj.job.id].speed
        if self.out.sample_noise > 0:
            speed *= float(np.exp(self.out.noise_rng.normal(0.0, self.out.sample_noise)))
        return SpeedSample(now, rj, neighbours, nodes, speed, switches=for_placement(loads, self.snapshot, rj.placement))
