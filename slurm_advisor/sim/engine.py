"""The trace-driven simulator: a deterministic event loop around the one Advisor.

Jobs arrive, wait in Slurm's order (FIFO + EASY backfill), are placed once by the advisor
when they start, keep their nodes until they finish, and run at the speed the speed model
gives them; whenever a neighbour arrives or leaves, the speeds of the jobs it touches are
recomputed. One clock, owned here; one seeded generator, passed to the advisor.
"""
from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from slurm_advisor.advisor import Advisor
from slurm_advisor.domain import ClusterSnapshot, Job, Node, Placement, Resources, RunningJob, SpeedSample
from slurm_advisor.policies.slurm_default import SlurmDefaultPolicy
from slurm_advisor.sim.backfill import Reservation, reserve
from slurm_advisor.sim.metrics import JobRecord, SimResult
from slurm_advisor.speedmodels.base import SpeedModel
from slurm_advisor.speedmodels.isolated import IsolatedSpeeds

_FINISH, _ARRIVE = 0, 1  # at equal times, finishing jobs free their nodes before arrivals queue
Recorder = Callable[[list[SpeedSample]], None]


@dataclass
class _Progress:
    running: RunningJob
    remaining: float      # iterations left at time `last`
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


class Simulation:
    def __init__(self, nodes: Sequence[Node], jobs: Sequence[Job], advisor: Advisor,
                 truth: SpeedModel, *, seed: int = 0, recorder: Recorder | None = None,
                 sample_noise: float = 0.0, backfill_depth: int = 100, log_progress: bool = False):
        self.snapshot = ClusterSnapshot.empty(tuple(nodes))
        self.advisor, self.truth = advisor, truth
        self.rng = np.random.default_rng(seed)
        self.noise_rng = np.random.default_rng(seed + 7919)  # measurement noise, apart from decisions
        self.recorder, self.sample_noise = recorder, sample_noise
        self.backfill_depth, self.log_progress = backfill_depth, log_progress
        self.isolated = IsolatedSpeeds(truth, nodes)
        self.jobs, self.skipped = self._admissible(jobs)
        self._events: list[tuple] = []
        self._seq = 0
        self._queue: list[Job] = []
        self._progress: dict[str, _Progress] = {}
        self._jobs_on: dict[str, set[str]] = {n.name: set() for n in nodes}
        self._records: list[JobRecord] = []
        self._log: list[tuple[str, float, float, float]] = []
        self.fallbacks = 0
        self.holds = 0  # decisions to wait for a better placement although the job fitted
        self._free = self.snapshot.total_capacity()  # cluster-wide free, kept incrementally
        self._expected_runtime: dict[str, float] = {}
        self._unplaceable: set[tuple] = set()  # job shapes that found no room since the last finish
        self._freed = True          # a job finished since the last scheduling pass
        self._fresh: set[str] = set()  # jobs that arrived since the last scheduling pass

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
        for job in self.jobs:
            self._push(job.submit_time, _ARRIVE, job.id, 0)
        by_id = {j.id: j for j in self.jobs}
        while self._events:
            now = self._events[0][0]
            touched: set[str] = set()
            changed = False  # stale finish events (superseded by a speed change) change nothing
            while self._events and self._events[0][0] == now:
                _, kind, _, job_id, version = heapq.heappop(self._events)
                if kind == _ARRIVE:
                    self._queue.append(by_id[job_id])
                    self._fresh.add(job_id)
                    changed = True
                elif self._progress.get(job_id) and self._progress[job_id].version == version:
                    touched |= self._finish(job_id, now)
                    changed = True
            if changed:
                touched |= self._schedule(now)
                self._update_speeds(touched, now)
        return SimResult(self.advisor.policy.name, tuple(self._records),
                         sum(n.gpus for n in self.snapshot.nodes), self.skipped, self.fallbacks,
                         tuple(self._log), self.holds)

    def _push(self, time: float, kind: int, job_id: str, version: int) -> None:
        self._seq += 1
        heapq.heappush(self._events, (time, kind, self._seq, job_id, version))

    # -- finishing -------------------------------------------------------------------------
    def _finish(self, job_id: str, now: float) -> set[str]:
        prog = self._progress.pop(job_id)
        self._unplaceable.clear()
        self._freed = True
        self._account(prog, now)
        rj = prog.running
        neighbours = self._neighbours(rj)
        for node in rj.placement.nodes():
            self._jobs_on[node].discard(job_id)
        self.snapshot = self.snapshot.without_job(job_id, now)
        self._free = self._free + rj.job.total_demand()
        job = rj.job
        self._records.append(JobRecord(job.id, job.type, job.submit_time, rj.start_time, now,
                                       job.iterations / self.isolated(job), len(rj.placement.nodes()),
                                       job.total_demand().gpus))
        return neighbours | {job_id}  # the finished id is dropped in _update_speeds

    def _neighbours(self, rj: RunningJob) -> set[str]:
        out: set[str] = set()
        for node in rj.placement.nodes():
            out |= self._jobs_on[node]
        out.discard(rj.job.id)
        return out

    # -- scheduling ------------------------------------------------------------------------
    def _schedule(self, now: float) -> set[str]:
        touched: set[str] = set()
        reservation: _LazyReservation | None = None
        candidates = self._queue[:self.backfill_depth]
        if not self._freed and self._queue and self._queue[0].id not in self._fresh:
            # Nothing finished since the last pass: every job seen then is still stuck (free
            # capacity only shrank, shadow times only moved later), so only arrivals are tried.
            reservation = _LazyReservation(lambda head=self._queue[0]: self._reserve(head))
            # Arrivals are appended, so the fresh jobs are the queue's tail.
            candidates = self._queue[max(0, len(self._queue) - len(self._fresh)):self.backfill_depth]
        self._freed, self._fresh = False, set()
        for job in list(candidates):
            if not job.total_demand().fits_in(self._free_total()):
                if reservation is None:
                    reservation = _LazyReservation(lambda head=job: self._reserve(head))
                continue
            if reservation is not None and not reservation.admits(
                    job, now, self._expected(job)):
                continue
            shape = (job.num_ps, job.num_workers, job.ps_demand, job.worker_demand)
            placement = None if shape in self._unplaceable else self._advise(job, now)
            if placement is not None:
                touched |= self._start(job, placement, now)
                continue
            # Free capacity only shrinks until a job finishes: a shape that found no room now
            # finds none before then, so it is not offered to the policy again until then.
            self._unplaceable.add(shape)
            if reservation is None:
                reservation = _LazyReservation(lambda head=job: self._reserve(head))
        return touched

    def _advise(self, job: Job, now: float) -> Placement | None:
        advice = self.advisor.advise(self.snapshot.at(now), job, self.rng)
        if advice.placement is not None and advice.fallback:
            self.fallbacks += 1
        self.holds += advice.held
        return advice.placement

    def _free_total(self) -> Resources:
        return self._free

    def _expected(self, job: Job) -> float:
        """Expected run time (alone): stands in for the user's --time limit in backfill."""
        if job.id not in self._expected_runtime:
            self._expected_runtime[job.id] = job.iterations / self.isolated(job)
        return self._expected_runtime[job.id]

    def _reserve(self, job: Job) -> Reservation:
        ends = [(p.expected_end(), p.running.job.total_demand()) for p in self._progress.values()]
        return reserve(job, self._free_total(), ends)

    def _start(self, job: Job, placement: Placement, now: float) -> set[str]:
        # By identity: list.remove would compare whole Job dataclasses field by field.
        del self._queue[next(i for i, queued in enumerate(self._queue) if queued is job)]
        self.snapshot = self.snapshot.with_job(job, placement, now)
        self._free = self._free - job.total_demand()
        rj = self.snapshot.running[-1]
        self._progress[job.id] = _Progress(rj, job.iterations, last=now)
        for node in placement.nodes():
            self._jobs_on[node].add(job.id)
        return self._neighbours(rj) | {job.id}

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
            self._push(prog.expected_end(), _FINISH, job_id, prog.version)
        if self.recorder is not None:
            self.recorder([self._sample(self._progress[j].running, now) for j in sorted(touched)])

    def _account(self, prog: _Progress, now: float) -> None:
        t0 = prog.last
        done = prog.settle(now)
        if self.log_progress and done > 0:
            self._log.append((prog.running.job.id, t0, now, done / prog.running.job.iterations))

    def _sample(self, rj: RunningJob, now: float) -> SpeedSample:
        neighbours = tuple(self._progress[j].running for j in sorted(self._neighbours(rj)))
        names = set(rj.placement.nodes())
        for n in neighbours:
            names |= set(n.placement.nodes())
        nodes = tuple(n for n in self.snapshot.nodes if n.name in names)
        speed = self._progress[rj.job.id].speed
        if self.sample_noise > 0:
            speed *= float(np.exp(self.noise_rng.normal(0.0, self.sample_noise)))
        return SpeedSample(now, rj, neighbours, nodes, speed)


class _LazyReservation:
    """The head job's reservation, computed only if a later job asks to backfill."""

    def __init__(self, compute: Callable[[], Reservation]):
        self._compute = compute
        self._value: Reservation | None = None

    def admits(self, job: Job, now: float, expected_runtime: float) -> bool:
        if self._value is None:
            self._value = self._compute()
        return self._value.admits(job, now, expected_runtime)
