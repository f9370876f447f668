"""The simulator's FIFO + backfill starts jobs when a real slurmctld (sched/backfill) does.

A seeded mix of CPU-only ``sleep`` jobs goes to the testbed at once: a few wide ones (12-32
one-CPU tasks over several nodes) that must wait for room, and narrow ones that backfill into
the holes when their time limit (``--time``, whole minutes) ends before the wide job's planned
start. The same jobs are then simulated at 1 iteration/s (iterations = sleep seconds) with
Slurm's backfill interval and resolution, and the wall-clock time of the first submission (Slurm
aligns its will-run batches of ending jobs on the clock). Every start must agree within
``TOLERANCE_S``, and jobs whose Slurm starts lie further apart than that must start in the same
order.
"""
from __future__ import annotations

import math

import numpy as np
import pytest
from slurmctl import ACTIVE, Slurm

from slurm_advisor.advisor import Advisor
from slurm_advisor.domain import Job, Node, Resources
from slurm_advisor.policies import PolicyContext, make_policy
from slurm_advisor.sim.engine import Simulation
from slurm_advisor.sim.scheduler import SchedulerConfig
from slurm_advisor.slurm.release import Release
from slurm_advisor.speedmodels.constant import ConstantSpeed

SEED = 8
JOBS = 24
WIDE = 5
MEM_PER_CPU = 1000
#: Slurm keeps times in whole seconds (up to 1 s on each start and end); it starts a just
#: submitted batch job at the next backfill pass (bf_interval=1: up to 1 s later; the main
#: scheduler defers batch jobs), and a job ends some 0.1-0.5 s after its sleep (launch and
#: teardown). Along a chain of jobs that wait for one another these add up; 4 s covers the
#: chains of this mix and stays far below the 15 s shortest job, so a wrong order still fails.
TOLERANCE_S = 4.0
#: Seconds a job holds its CPUs in the simulation beyond its sleep. slurmctld's log shows a job
#: ending some 0.05 s after its sleep and the next job starting on its CPUs at the next backfill
#: pass (once a second, at a fixed phase of the second; the main scheduler comes later), so in
#: Slurm's whole-second clock the successor starts 0 or 1 s after the job's start + sleep, as
#: the job started before or at that phase. Its planned end (start + limit) moves with it, and
#: planned ends decide the will-run batch (30 s, aligned on the clock) a job falls in: a second
#: across a barrier moves a wide job's plan by half a minute. Half a second stays off Slurm's
#: whole seconds by half a second either way.
PICKUP_S = 0.5
TESTBED = (Node("n1", 8, 4, 32_000), Node("n2", 8, 4, 32_000), Node("n3", 8, 4, 32_000),
           Node("n4", 8, 4, 32_000))


def workload(rng: np.random.Generator) -> list[tuple[int, int, int]]:
    """(one-CPU tasks, sleep seconds, --time minutes) per job, in submission order.

    Wide jobs sleep shorter so the whole mix runs in about 3 minutes on 32 CPUs; limits are
    the sleep plus a 5 s margin rounded up to minutes, one in three a minute longer still.
    """
    wide = set(rng.choice(JOBS, size=WIDE, replace=False).tolist())
    jobs = []
    for i in range(JOBS):
        tasks = int(rng.integers(12, 33)) if i in wide else int(rng.integers(1, 5))
        sleep = int(rng.integers(15, 36)) if i in wide else int(rng.integers(15, 76))
        minutes = math.ceil((sleep + 5) / 60) + int(rng.random() < 1 / 3)
        jobs.append((tasks, sleep, minutes))
    return jobs


def run_on_slurm(slurm: Slurm, jobs: list[tuple[int, int, int]]) -> tuple[float, list[float], list[float], list[float]]:
    """Submit all at once; the first submission (Unix seconds), and (submit, start, end) of each job
    in seconds since then."""
    ids = [slurm.submit([f"--ntasks={tasks}", "--cpus-per-task=1", f"--mem-per-cpu={MEM_PER_CPU}",
                         f"--time={minutes}"], sleep_s=sleep)
           for tasks, sleep, minutes in jobs]
    views = [slurm.wait(job_id, lambda v: v.state not in ACTIVE, timeout_s=400, what="an end state")
             for job_id in ids]
    assert [v.state for v in views] == ["COMPLETED"] * len(views), [(v.id, v.state) for v in views]
    t0 = min(v.submit for v in views)
    since = [[(t - t0).total_seconds() for t in (v.submit, v.start, v.end)] for v in views]
    return (t0.timestamp(), *(list(column) for column in zip(*since)))


def simulate(jobs: list[tuple[int, int, int]], submits: list[float], epoch: float,
             release: Release) -> dict[str, tuple[float, float]]:
    sim_jobs = [Job(f"j{i}", "test", 0, tasks, Resources(), Resources(1, 0, MEM_PER_CPU), iterations=sleep + PICKUP_S,
                    submit_time=submit, time_limit_s=60.0 * minutes)
                for i, ((tasks, sleep, minutes), submit) in enumerate(zip(jobs, submits))]
    policy = make_policy("slurm-default", PolicyContext(release=release))
    result = Simulation(TESTBED, sim_jobs, Advisor(policy), ConstantSpeed(),
                        scheduler=SchedulerConfig(bf_interval_s=1.0, bf_resolution_s=1.0, epoch_s=epoch,
                                                  release=release)).run()
    return {r.job_id: (r.start, r.end) for r in result.records}


@pytest.mark.slurm
@pytest.mark.xfail(strict=False, reason=(
    "a known limit of the model: the planner is Slurm's (will-run batches on the clock, TRY_LATER, "
    "bf_resolution), and on 6 of 7 testbed runs the simulator started all 24 jobs within 2 s of Slurm; but "
    "Slurm's schedule can turn on which of two jobs ending in the same second its backfill pass "
    "sees first: on one run j1 and j7 (both 38 s, started 35 ms apart) ended 6 ms before and 4 ms "
    "after a pass, so j12 and j18 took n4, j15 took n1 a second later and j13 waited behind j6's "
    "plan (7 jobs 7-27 s off). The simulator has no sub-second order of slurmctld's passes and "
    "job completions; Slurm's whole-second job records do not show it"))
def test_backfill_start_times_match_slurm(slurm: Slurm) -> None:
    assert slurm.nodes() == TESTBED, "the test is written for the 4-node testbed of .ci/slurm-testbed.sh"
    jobs = workload(np.random.default_rng(SEED))
    epoch, submits, starts, ends = run_on_slurm(slurm, jobs)
    table = [f"j{i:<3} {t:>4} {s:>4}s {m}min | {sub:3.0f} {st:5.0f} {en:5.0f} ({en - st - s:+.0f})"
             for i, ((t, s, m), sub, st, en) in enumerate(zip(jobs, submits, starts, ends))]
    print("\njob  tasks sleep limit | slurm: submit start end (end-start-sleep)", *table, sep="\n")
    simulated = simulate(jobs, submits, epoch, slurm.release())  # the testbed's own rules
    table = [f"{row} | simulated: {simulated.get(f'j{i}', ('-', '-'))}" for i, row in enumerate(table)]
    print("simulated:", *table, sep="\n")

    ids = [f"j{i}" for i in range(JOBS)]
    assert set(simulated) == set(ids), f"simulated {sorted(simulated)}"
    off = [f"{j}: slurm {starts[i]:.0f} s, simulated {simulated[j][0]:.1f} s"
           for i, j in enumerate(ids) if abs(simulated[j][0] - starts[i]) > TOLERANCE_S]
    order = [f"{a} before {b} in Slurm ({starts[i]:.0f} s < {starts[k]:.0f} s), not simulated "
             f"({simulated[a][0]:.1f} s, {simulated[b][0]:.1f} s)"
             for i, a in enumerate(ids) for k, b in enumerate(ids)
             if starts[i] + TOLERANCE_S < starts[k] and not simulated[a][0] < simulated[b][0]]
    assert not off and not order, "\n".join([f"starts off by more than {TOLERANCE_S:g} s:", *off,
                                             "order:", *order, *table])
