"""retrain/owners.py on literal reports, outcomes and decisions: Slurm's clock against the reports,
the per-owner cap, the owners kept for the judge."""
from __future__ import annotations

from datetime import UTC, datetime

from slurm_advisor.domain import Job, Placement, Resources, RunningJob, SpeedSample
from slurm_advisor.domain.decision import Decision
from slurm_advisor.domain.outcome import Outcome
from slurm_advisor.domain.speed_report import SpeedReport
from slurm_advisor.retrain.data import split_by_time_and_owner
from slurm_advisor.retrain.owners import (
    OwnerRules,
    assess,
    clock_ratios,
    job_owners,
    judge_owners,
    owner_cap,
    weighed,
)

RULES = OwnerRules()
T0 = datetime(2026, 11, 1, tzinfo=UTC)


def decision(i: int, iters: float | None) -> Decision:
    comment = "slurm-advisor: type=resnet50 ps=0 workers=2" + (f" iters={iters:g}" if iters else "")
    return Decision(f"d-{i:012x}", T0, "advise", "place", "learned", None, "resnet50", 1000,
                    {"comment": comment, "num_tasks": 2})


def job(i: int, uid: int, *, speed: float, lie: float = 1.0, iters: float | None = 1000.0,
        state: str = "COMPLETED") -> tuple[list[SpeedReport], Outcome, Decision]:
    """Job i ran ``iters`` at ``speed`` it/s (Slurm saw it run iters/speed s); its owner reports
    ``lie`` x the iterations it did, in two windows."""
    run = (iters or 1000.0) / speed
    reports = [SpeedReport(str(i), uid, lie * speed * run / 2, run / 2, 1000.0 + (k + 1) * run / 2, f"d-{i:012x}")
               for k in range(2)]
    return reports, Outcome(str(i), state, f"d-{i:012x}", 990.0, 1000.0, 1000.0 + run), decision(i, iters)


def site(*jobs_):
    reports = [r for rs, _, _ in jobs_ for r in rs]
    return reports, [o for _, o, _ in jobs_], [d for _, _, d in jobs_]


def test_honest_reports_agree_with_slurms_clock_and_a_liar_is_discounted():
    honest = [job(i, 1001, speed=2.0 + i) for i in range(4)]
    liar = [job(10 + i, 1002, speed=2.0, lie=8.0) for i in range(4)]   # speed x nodes^3 on 2 nodes
    reports, outcomes, decisions = site(*honest, *liar)
    ratios, unchecked = clock_ratios(reports, outcomes, decisions)
    assert unchecked == 0
    assert all(abs(ratios[str(i)] - 1.0) < 1e-9 for i in range(4))
    assert all(abs(ratios[str(10 + i)] - 0.125) < 1e-9 for i in range(4))
    owners = assess(reports, outcomes, decisions, RULES)
    assert set(owners.discounted) == {1002} and "4 of 4 checked jobs" in owners.discounted[1002]
    assert "0.12x the run time Slurm measured" in owners.discounted[1002]
    assert owners.checked == {1001: 4, 1002: 4}


def test_jobs_that_cannot_be_checked_are_counted_and_never_discount():
    # no iters=, not completed (a cancelled job ran shorter than its length), or too few jobs
    reports, outcomes, decisions = site(job(1, 7, speed=1.0, lie=8.0, iters=None),
                                        job(2, 7, speed=1.0, lie=8.0, state="CANCELLED"),
                                        job(3, 7, speed=1.0, lie=8.0), job(4, 7, speed=1.0, lie=8.0))
    owners = assess(reports, outcomes, decisions, RULES)
    assert owners.unchecked_jobs == 2 and owners.checked == {7: 2} and owners.discounted == {}


def test_a_job_belongs_to_the_uid_most_of_its_reports_came_from():
    rs = [SpeedReport("9", 5, 1, 1, 1), SpeedReport("9", 0, 1, 1, 2), SpeedReport("9", 5, 1, 1, 3)]
    assert job_owners(rs) == {"9": 5}


def test_a_quarter_of_the_owners_judge_alone_and_the_same_ones_every_time():
    assert judge_owners([1, 2], RULES) == frozenset()
    eight = judge_owners(range(1000, 1008), RULES)
    assert len(eight) == 2 and eight == judge_owners(reversed(range(1000, 1008)), RULES)
    assert len(judge_owners([1, 2, 3], RULES)) == 1


def test_the_cap_is_the_largest_count_within_the_share():
    assert owner_cap({1: 100, 2: 10, 3: 10, 4: 10, 5: 10}, 0.25) == 13   # 13 <= 0.25 x 53
    assert owner_cap({1: 100, 2: 100}, 0.25) == 100                      # two owners: half each is the best
    assert owner_cap({1: 7}, 0.25) == 7
    assert owner_cap({}, 0.25) == 0


def sample(job_id: str, t: float, source: str = "live") -> SpeedSample:
    j = Job(job_id, "resnet50", 0, 1, Resources(1, 0, 1000), Resources(1, 1, 1000), 100.0)
    return SpeedSample(t, RunningJob(j, Placement.of(j, ["n1"]), 0.0), (), (), 1.0, source=source)


def test_weighed_drops_the_discounted_caps_the_loud_keeps_the_newest_and_leaves_sim_alone():
    of_job = {"a": 1, "b": 2, "c": 3, "d": 4, "x": 9}
    samples = ([sample("a", t) for t in range(40)] + [sample(j, t) for j in "bcd" for t in range(4)]
               + [sample("x", t) for t in range(5)] + [sample("s", t, "sim") for t in range(50)])
    owners = assess([], [], [], RULES)
    owners.of_job, owners.discounted = of_job, {9: "lies"}
    kept = weighed(samples, owners, RULES)
    assert sum(s.subject.job.id == "x" for s in kept) == 0
    a = [s.time for s in kept if s.subject.job.id == "a"]
    assert a == list(range(36, 40)) and owners.capped == {1: 36}       # 4 <= 0.25 x 16
    assert sum(s.source == "sim" for s in kept) == 50
    split = split_by_time_and_owner(kept, 0.2, None, owners.owner, frozenset({2}))
    assert not any(owners.owner(s) == 2 for s in split.train)
    assert sum(owners.owner(s) == 2 for s in split.holdout) == 4
