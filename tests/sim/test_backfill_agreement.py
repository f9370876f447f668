"""Schedules recorded on real Slurm testbeds, replayed in the simulator (issue 42).

Each file in backfill_cases/ is one workload of ``slurm_advisor/sim/agreement.py`` (on 22.05:
development seeds 101-108, and the reported seeds 1-6 measured once the first fixes were in; on
24.11 and 26.05, in .ci/slurm-chroot.sh's chroots, seeds 1-6 and seed 1 again) as
``benchmarks/backfill_agreement.py record`` ran it on .ci/slurm-testbed.sh (bf_interval=1,
bf_resolution=1): the submissions, Slurm's starts, ends and allocations, slurmctld's start; each
is replayed with its own release's behaviour (slurm/release.py).
"""
from __future__ import annotations

import dataclasses
from pathlib import Path
from unittest import mock

import pytest

from slurm_advisor.advisor import Advisor
from slurm_advisor.domain import Job, Node, Resources
from slurm_advisor.policies import make_policy
from slurm_advisor.sim import agreement
from slurm_advisor.sim.agreement import Case, replay
from slurm_advisor.sim.engine import Simulation
from slurm_advisor.sim.scheduler import SchedulerConfig
from slurm_advisor.slurm.release import Release
from slurm_advisor.speedmodels.constant import ConstantSpeed

CASES = Path(__file__).with_name("backfill_cases")
#: Cases the simulator does not yet meet. Seed 103 (22.05): j18 (2 tasks, 5 min) backfilled at
#: 110 s in Slurm and waits for a wide job's reservation until 195 s in the simulator, with the
#: node weights GPU jobs leave modelled (slurm/left_weights.py), as it did without them; 22.05's
#: plans flip between passes with those weights, and the same workload run twice on Slurm
#: differs by up to 0.10 of the mean run time (seed 106), so this one is left as it is.
#: Seed 2 on 26.05, its third run (with slurmctld logging verbosely): slurmctld handled the 21
#: submissions of second 0 at 1.004 s, so every planned end lies 1 s later than the recorded
#: submissions give, and will-run's 30-s batches split elsewhere (its log: j8 planned on n1 and
#: n3, not n3 alone). Arriving at 1 s, the simulator makes the logged plans of every job at 2 s
#: and meets the targets (0.007); the cases keep Slurm's whole-second submit times only, so the
#: replay cannot know. The other two runs (j0 at 1 s and at 0 s) meet.
NODE_CHOICE = {"slurm-22.05-seed103", "slurm-26.05-seed2-run3"}


def case(name: str) -> Case:
    return Case.load(CASES / f"{name}.json")


@pytest.mark.parametrize("name", sorted(p.stem for p in CASES.glob("*.json")))
def test_recorded_case_agrees_with_slurm(name: str) -> None:
    c = case(name)
    a = agreement.agreement(c, replay(c))
    meets = a.ratio <= 0.10 and a.in_order >= 0.95
    if name in NODE_CHOICE:
        assert not meets, f"{name} agrees now: take it out of NODE_CHOICE"
        pytest.xfail("a plan the simulator does not yet make (see NODE_CHOICE)")
    assert meets, a


def test_a_job_without_gpus_is_planned_on_the_weights_the_last_gpu_job_left() -> None:
    # seed 3 (22.05): while j11 (20 tasks) waits at the head, j15 (3 tasks, 4 min) backfilled at
    # 119 s and the GPU job j16 waited until 248 s. Planned on equal weights (as 23.11+ does),
    # j11's reservation takes the nodes j15 could use: j15 waits until 170 s and j16 starts at
    # 190 s; planned on the weights GPU jobs left, the simulator starts them as Slurm did.
    c = case("slurm-22.05-seed3")
    assert [c.starts[j] for j in (15, 16, 19, 20)] == [119, 248, 190, 172]
    kept = replay(c)
    assert [round(kept[j]) for j in (15, 16, 19, 20)] == [118, 248, 190, 172], kept
    fresh = _replay_with(c, release=Release(24, 11, 5))
    assert [round(fresh[j]) for j in (15, 16, 19, 20)] == [170, 190, 258, 258], fresh


def test_from_24_11_a_later_try_is_tested_with_the_jobs_ending_before_it_gone() -> None:
    # seed 2 on 24.11: at 55 s j11 (4 tasks) is planned from its retry at 180 s (its first plan
    # clashed with j10's on n1). 24.11 removes the jobs ending before 180 s first and it fits on
    # n2 and n3, so j14 (1 task, 4 min) cannot use n2's free CPU and j16 (3 tasks, 1 min) takes
    # it, as in Slurm (56 s and 120 s). With will-run as 22.05 plans (Release 23.02), the retry's
    # first batch frees n3 for j11 alone, and j14 starts at 55 s instead, j16 at 109 s.
    c = case("slurm-24.11-seed2")
    assert (c.starts[14], c.starts[16]) == (120, 56)
    starts = replay(c)
    assert (round(starts[14]), round(starts[16])) == (118, 55), starts
    before = _replay_with(c, release=Release(23, 2, 0))
    assert (round(before[14]), round(before[16])) == (55, 109), before


def test_from_25_11_a_plan_starts_when_the_last_job_on_its_nodes_ends() -> None:
    # seed 5 on 26.05: planned at the end of the last job removed from any usable node (as
    # 24.11 does), j16 (3 tasks) and j15 (GPUs) backfill at 112 s and 225 s and j19 waits until
    # 147 s; Slurm started them at 227, 308 and 112 s, as the plans that start at the end of
    # the last job on the nodes chosen (25.11+) give them.
    c = case("slurm-26.05-seed5")
    assert (c.starts[15], c.starts[16], c.starts[19]) == (308, 227, 112)
    starts = replay(c)
    assert [round(starts[j]) for j in (15, 16, 19)] == [306, 225, 112], starts
    before = _replay_with(c, release=Release(24, 11, 5))
    assert [round(before[j]) for j in (15, 16, 19)] == [225, 112, 147], before


def test_from_25_05_a_later_try_also_removes_the_jobs_ending_at_its_start() -> None:
    # seed 2 on 26.05: at 55 s j11 (4 tasks) is planned from its retry at 180 s. 26.05 removes
    # the jobs ending at 180 s too (j2, 13 tasks) and j11 fits on n3 alone (its log, third run:
    # "to start at 22:30:31 ... on nodes n3"), so j14 (1 task) starts at once on n2, as in
    # Slurm (55 s), and j16 waits (123 s). With 24.11's ``<`` j11 takes n2 and n3: j14 waits.
    c = case("slurm-26.05-seed2")
    assert (c.starts[14], c.starts[16]) == (55, 123)
    starts = replay(c)
    assert (round(starts[14]), round(starts[16])) == (55, 122), starts
    with mock.patch.object(Release, "gone_at_start_res", property(lambda self: False)):
        before = replay(c)
    assert (round(before[14]), round(before[16])) == (120, 55), before


def test_a_job_past_its_limit_is_ended_at_slurmctlds_next_check() -> None:
    # seed 105: j10 (20 tasks, 1 min) started at 100 s, passed its limit at 160 s and was ended
    # at 170 s, at the check 30 s after slurmctld's start; j13 (16 tasks) waited for it and
    # started at 170 s in Slurm, j14 after j13. Ended at its limit, they start 10 s early.
    c = case("slurm-22.05-seed105")
    assert c.states[10] == "TIMEOUT" and c.ends[10] == 170
    assert (c.epoch_s + c.ends[10] - c.notes["slurmctld_boot_s"]) % 30 == 0
    starts = replay(c)
    assert [round(starts[j] - c.starts[j]) for j in (10, 13, 14)] == [0, 0, 0], starts
    at_limit = _replay_with(c, timelimit_check_s=0.0)
    assert [round(at_limit[j] - c.starts[j]) for j in (10, 13, 14)] == [0, -10, -10], at_limit


def test_a_job_that_finishes_between_its_limit_and_the_check_completes() -> None:
    # seed 101: j8 (1 task, sleep 80 s, 1 min) started at 53 s; its limit passed at 113 s,
    # the checks came at 110 and 140 s, so it ended by itself at 133 s (Slurm still calls it
    # TIMEOUT: it ended past its limit)
    c = case("slurm-22.05-seed101")
    assert (c.starts[8], c.ends[8], c.states[8]) == (53, 133, "TIMEOUT")
    nodes = tuple(Node(f"n{i}", 8, 4, 32_000) for i in range(1, 5))
    job = Job("j", "sleep", 0, 1, Resources(), Resources(1, 0, 1000), 80.0, time_limit_s=60.0)
    config = SchedulerConfig(bf_interval_s=1.0, epoch_s=c.epoch_s + 53,
                             timelimit_phase_s=c.notes["slurmctld_boot_s"])
    (record,) = Simulation(nodes, [job], Advisor(make_policy("slurm-default")), ConstantSpeed(),
                           scheduler=config).run().records
    assert (record.end, record.state) == (80.0, "COMPLETED")


@pytest.mark.parametrize(("epoch", "phase", "deadline", "killed"),
                         [(0.0, 0.0, 60.0, 60.0), (0.0, 0.0, 61.0, 90.0), (100.0, 95.0, 60.0, 85.0),
                          (7.0, 0.0, 0.5, 23.0)])
def test_the_limit_check_runs_every_30_s_from_slurmctlds_start(epoch, phase, deadline, killed) -> None:
    config = SchedulerConfig(epoch_s=epoch, timelimit_phase_s=phase)
    assert config.killed_at(deadline) == pytest.approx(killed)
    assert SchedulerConfig(timelimit_check_s=0).killed_at(deadline) == deadline


def _replay_with(c: Case, **changes) -> list[float]:
    return replay(c, config=dataclasses.replace(agreement.case_config(c), **changes))


@pytest.mark.parametrize(("kill_wait", "c_start"), [(30.0, 66.0), (2.0, 100.0)])
def test_backfill_plans_a_job_past_its_limit_to_end_killwait_after_it(kill_wait, c_start) -> None:
    # A (all of n1, limit 65 s) runs on past its limit until the check at 90 s. B (12 CPUs) waits
    # for n1 and n2; will-run plans it at A's end as _guess_job_end gives it: the limit +
    # KillWait, never before now + 1 s. C (4 CPUs on n2, 20 s) arrives at 66 s: it backfills if
    # it ends before B's planned start (65 + 30 s); with KillWait 2 s (plan at now + 1 s) it
    # waits for A's end at the check, and then for B, which starts there (90-100 s).
    nodes = (Node("n1", 8, 0, 32_000), Node("n2", 8, 0, 32_000))
    cpus = Resources(1, 0, 1000)
    jobs = [Job("a", "t", 0, 8, Resources(), cpus, 200.0, time_limit_s=65.0),
            Job("d", "t", 0, 4, Resources(), cpus, 300.0, time_limit_s=600.0),
            Job("b", "t", 0, 12, Resources(), cpus, 10.0, submit_time=1.0, time_limit_s=60.0),
            Job("c", "t", 0, 4, Resources(), cpus, 5.0, submit_time=66.0, time_limit_s=20.0)]
    config = SchedulerConfig(bf_interval_s=1.0, bf_resolution_s=1.0, kill_wait_s=kill_wait)
    records = Simulation(nodes, jobs, Advisor(make_policy("slurm-default")), ConstantSpeed(),
                         scheduler=config).run().records
    got = {r.job_id: (r.start, r.end, r.state) for r in records}
    assert got["a"] == (0.0, 90.0, "TIMEOUT")
    assert got["c"][0] == c_start


def test_the_harness_reads_the_scheduler_parameters_it_models_and_refuses_the_rest() -> None:
    config = agreement.scheduler_config("bf_interval=2,bf_resolution=5,bf_window=30,bf_max_job_test=7,"
                                        "batch_sched_delay=0", 100.0, 50.0, 3.0)
    assert (config.bf_interval_s, config.bf_resolution_s, config.bf_window_s, config.bf_max_job_test) == (
        2.0, 5.0, 1800.0, 7)
    assert (config.epoch_s, config.timelimit_phase_s, config.kill_wait_s) == (100.0, 50.0, 3.0)
    with pytest.raises(ValueError, match="bf_min_age_reserve not modelled"):
        agreement.scheduler_config("bf_interval=1,bf_min_age_reserve=60", 0.0)
