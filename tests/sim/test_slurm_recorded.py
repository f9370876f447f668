"""A schedule recorded on the real Slurm 22.05 testbed, replayed in the simulator.

tests/integration/test_slurm_backfill.py (seed 8) submitted these 24 CPU-only ``sleep`` jobs at
once to .ci/slurm-testbed.sh (4 nodes x 8 CPUs, sched/backfill, bf_interval=1, bf_resolution=1)
at 2026-12-01 17:12:05 UTC, 5 s past a multiple of 30 s of the Unix clock; Slurm's starts are
pinned below. The earlier planner (first time the job fits) started four narrow jobs 9-31 s
later than Slurm: j17, j18, j20, j21. Slurm's will-run batches of ending jobs, aligned on the
clock, plan the wide jobs later, which leaves those four room to backfill.
"""
from slurm_advisor.advisor import Advisor
from slurm_advisor.domain import Job, Node, Resources
from slurm_advisor.policies import make_policy
from slurm_advisor.sim.engine import Simulation
from slurm_advisor.sim.scheduler import SchedulerConfig
from slurm_advisor.speedmodels.constant import ConstantSpeed

TESTBED = tuple(Node(f"n{i}", 8, 4, 32_000) for i in range(1, 5))
EPOCH = 1796145125.0  # the first submission, Unix seconds
# (one-CPU tasks, sleep seconds, --time minutes, Slurm's start in seconds after the submission)
RECORDED = (
    (4, 17, 1, 0), (2, 38, 2, 0), (2, 48, 2, 0), (2, 66, 3, 0), (17, 23, 1, 0), (16, 31, 2, 23),
    (20, 24, 1, 67), (3, 38, 1, 0), (3, 47, 1, 24), (1, 68, 3, 24), (2, 41, 1, 24), (1, 75, 2, 24),
    (2, 38, 1, 39), (2, 39, 2, 39), (16, 33, 2, 91), (2, 19, 1, 49), (2, 57, 2, 72), (3, 34, 1, 72),
    (1, 21, 1, 39), (3, 72, 2, 91), (1, 40, 1, 61), (3, 47, 1, 79), (18, 33, 1, 125), (2, 60, 2, 92),
)


def replay(epoch: float) -> dict[str, float]:
    jobs = [Job(f"j{i}", "test", 0, tasks, Resources(), Resources(1, 0, 1000), iterations=sleep,
                submit_time=0.0, time_limit_s=60.0 * minutes)
            for i, (tasks, sleep, minutes, _) in enumerate(RECORDED)]
    config = SchedulerConfig(bf_interval_s=1.0, bf_resolution_s=1.0, epoch_s=epoch)
    result = Simulation(TESTBED, jobs, Advisor(make_policy("slurm-default")), ConstantSpeed(),
                        scheduler=config).run()
    return {r.job_id: r.start for r in result.records}


def test_every_start_is_within_a_few_seconds_of_slurms() -> None:
    # Slurm runs a second or so behind (whole-second clocks, launch and teardown): 2 s at most here
    starts = replay(EPOCH)
    off = {f"j{i}": (start, starts[f"j{i}"]) for i, (*_, start) in enumerate(RECORDED)
           if not -2.5 <= starts[f"j{i}"] - start <= 0.5}
    assert not off, off


def test_the_clock_phase_matters() -> None:
    # the same jobs submitted on a multiple of 30 s: the batches move, and so do the plans
    starts = replay(EPOCH - 5.0)
    assert sum(abs(starts[f"j{i}"] - start) > 4 for i, (*_, start) in enumerate(RECORDED)) > 0
