"""How the simulated Slurm schedules: its settings, and the time-limit rule for jobs without one.

Slurm's controller runs two loops (``src/slurmctld/job_scheduler.c`` and
``src/plugins/sched/backfill/backfill.c``):

- the **main scheduler**, on every submission and every job end: pending jobs in priority
  order (FIFO here: ``PriorityType=priority/basic``), each started if it fits now; the first
  that does not fit stops the pass (one partition: everything behind it waits for backfill);
- the **backfill scheduler**, every ``bf_interval`` seconds: pending jobs in priority order
  (at most ``bf_max_job_test``), each started now if that delays no job ahead of it, else
  given a reservation at the start select/cons_tres's will-run test finds (planned with every
  running job ending at its *time limit*, per node; see sim/backfill.py) if that start lies
  within ``bf_window``.

A job still running at its limit is ended at slurmctld's next time-limit check (every 30 s
from its start, ``job_time_limit``), not at the limit; until then will-run plans it to end
KillWait after its limit, never before now + 1 s (``_guess_job_end``).

Slurm runs a backfill pass at every tick while there is work (``_more_work``: a job started,
ended, was submitted or changed since the last pass, which the main scheduler's periodic
passes alone see to while jobs wait). The simulator runs one at a tick only when it could
decide otherwise than the last, which gives the same schedule (tests/sim/test_scheduling.py
compares with a pass at every tick): after any event; after a pass that started a job (the
next one sees it running, and will-run's batches of ending jobs move); and when time alone
changes the outcome, since a pass tests each job on the nodes free of reservations during
[now, now + limit]: when now + limit reaches a reservation's start or now its end, or a plan
refused past ``bf_window`` comes inside it (``BackfillPass.next_change``). One case is not
covered: a job the planner could start now but the advisor declines (a hold, or a policy that
finds nothing where cons_tres would) is planned at "now", a plan that moves with time; until
the next event it is not re-made at every tick. With ``bf_interval_s=0`` (an idealisation) a
pass runs at every event and only then.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from slurm_advisor.slurm.release import DEFAULT, Release


@dataclass(frozen=True)
class SchedulerConfig:
    """Slurm 22.05's defaults unless said otherwise (``man slurm.conf``, SchedulerParameters)."""

    bf_interval_s: float = 30.0      # bf_interval (default 30 s); 0: a pass at every change
    bf_window_s: float = 86_400.0    # bf_window (default 1440 min): no reservations beyond it
    bf_max_job_test: int = 500       # bf_max_job_test (default 500)
    bf_resolution_s: float = 60.0    # bf_resolution (default 60 s): reservations start and end on its slots
    #: The wall-clock time (Unix seconds) of simulated time 0. Slurm aligns bf_resolution slots
    #: and will-run's 30-s batches of ending jobs on the clock; only the remainder modulo 30 s
    #: and bf_resolution matters.
    epoch_s: float = 0.0
    #: Jobs without a time limit get limit_factor x their run time alone, rounded up to whole
    #: minutes (Slurm's unit for --time). Users ask for far more than their jobs use: most jobs
    #: use under half of their estimate, many a tenth (Tsafrir, Etsion, Feitelson, "Backfilling
    #: using system-generated predictions rather than user runtime estimates", IEEE TPDS 2007),
    #: and ML users commonly ask for a partition's maximum. 10x also matters for the figures: a
    #: job killed at its limit ends early and so *shortens* the average JCT; at 3x, slurm-default
    #: lost 53 of 200 jobs of the benchmark's large mix at load 0.6 under `contention` (its
    #: scattered placements run up to 10x slower than alone), at 10x 3. Every result reports
    #: its timeouts.
    limit_factor: float = 10.0
    max_time_s: float | None = None  # the partition's MaxTime (None: INFINITE, as in the testbed)
    #: slurmctld ends a job that passed its limit at its next periodic check, not at the limit:
    #: ``_slurmctld_background`` (src/slurmctld/controller.c) calls ``job_time_limit()`` every
    #: PERIODIC_TIMEOUT (30 s) from the controller's start, which ends jobs with ``now >=
    #: end_time`` (OverTimeLimit=0). A job that finishes before that check completes. 0: at the limit.
    timelimit_check_s: float = 30.0
    #: The wall-clock time (Unix seconds) of one such check: slurmctld's start (BOOT_TIME).
    timelimit_phase_s: float = 0.0
    #: KillWait (default 30 s): backfill plans a job past its limit to end this long after it.
    kill_wait_s: float = 30.0
    #: Run a backfill pass at every tick while jobs wait, changed or not: the plain schedule
    #: that the skip of unchanged passes is tested against (slower, same results).
    every_tick: bool = False
    #: Plan every waiting job at every backfill pass, as Slurm does. By default a job is planned
    #: only once a job behind it could start now (the only use of a plan within a pass): the
    #: same starts, tested against this (a long queue is planned at every pass otherwise).
    eager_plans: bool = False
    #: The Slurm whose scheduling is modelled where releases differ (``slurm/release.py``): its
    #: cons_tres node choice in backfill's plans, and before 23.11 the node weights GPU jobs
    #: leave for the plans of jobs without GPUs (then every pass is run, each job planned).
    release: Release = DEFAULT

    def __post_init__(self) -> None:
        if not (self.bf_interval_s >= 0 and math.isfinite(self.bf_interval_s)):
            raise ValueError("bf_interval_s must be a non-negative number of seconds")
        if not self.bf_window_s > 0:
            raise ValueError("bf_window_s must be positive")
        if not (self.bf_resolution_s > 0 and math.isfinite(self.bf_resolution_s)):
            raise ValueError("bf_resolution_s must be a positive number of seconds")
        if not math.isfinite(self.epoch_s):
            raise ValueError("epoch_s must be a finite number of seconds")
        if self.bf_max_job_test < 1:
            raise ValueError("bf_max_job_test must be at least 1")
        if self.every_tick and self.bf_interval_s == 0:
            raise ValueError("every_tick needs a positive bf_interval_s")
        if not (self.timelimit_check_s >= 0 and math.isfinite(self.timelimit_check_s)
                and math.isfinite(self.timelimit_phase_s)):
            raise ValueError("timelimit_check_s must be a non-negative number of seconds, its phase finite")
        if not (self.kill_wait_s >= 0 and math.isfinite(self.kill_wait_s)):
            raise ValueError("kill_wait_s must be a non-negative number of seconds")
        if not self.limit_factor >= 1:
            raise ValueError("limit_factor must be at least 1 (a limit below the run time kills every job)")

    def time_limit(self, given: float | None, runtime_alone: float) -> float:
        """The job's limit in seconds: the one it gives (capped by MaxTime), else the rule."""
        limit = given if given is not None else 60.0 * math.ceil(self.limit_factor * runtime_alone / 60.0)
        return min(limit, self.max_time_s) if self.max_time_s is not None else limit

    def killed_at(self, deadline: float) -> float:
        """When a job still running at ``deadline`` (its start + limit) is ended: the first
        time-limit check at or after it."""
        if self.timelimit_check_s == 0 or not math.isfinite(deadline):
            return deadline
        offset = self.epoch_s - self.timelimit_phase_s
        return math.ceil((deadline + offset) / self.timelimit_check_s) * self.timelimit_check_s - offset

    def next_backfill(self, now: float) -> float:
        """The first backfill tick at or after ``now``."""
        if self.bf_interval_s == 0:
            return now
        return math.ceil(now / self.bf_interval_s) * self.bf_interval_s
