"""Claims of jobs Slurm never listed: counted per queue read, dropped after a few."""
from __future__ import annotations

from daemon_helpers import NODES

from slurm_advisor.daemon.claims import UNSEEN_MIN_S, UNSEEN_READS, Claims
from slurm_advisor.domain import ClusterSnapshot, Job, Placement, Resources

JOB = Job("d-0123456789ab", "resnet50", 0, 2, Resources(1, 1, 1000), Resources(1, 1, 1000), 1.0)
OTHER = Job("d-0123456789ac", "resnet50", 0, 2, Resources(1, 1, 1000), Resources(1, 1, 1000), 1.0)


def claims_at(now: float, *jobs: Job) -> Claims:
    claims = Claims(ttl_s=120)
    for job in jobs:
        claims.add(job.id, ClusterSnapshot.empty(NODES), job, Placement.of(job, ["n1", "n1"]), now)
    return claims


def test_a_claim_missed_by_enough_reads_is_dropped_and_its_capacity_freed():
    claims = claims_at(100.0, JOB, OTHER)
    dropped = [claims.drop_unseen({OTHER.id}, 100.0 + i, 100.0 + i + 0.5) for i in range(1, UNSEEN_READS + 1)]
    assert dropped == [[]] * (UNSEEN_READS - 1) + [[JOB.id]]
    assert len(claims) == 1
    free = claims.apply(ClusterSnapshot.empty(NODES), 105.0)
    assert free[0].tolist() == [6, 2, 30000]  # only OTHER's two tasks left on n1


def test_a_read_begun_before_the_claim_was_made_is_no_miss():
    claims = claims_at(100.0, JOB)
    for _ in range(2 * UNSEEN_READS):
        assert claims.drop_unseen(set(), 100.0, 110.0) == []  # each read began as the claim was made
    assert len(claims) == 1


def test_fast_reads_do_not_drop_a_claim_before_its_minimum_age():
    claims = claims_at(100.0, JOB)
    for i in range(1, 2 * UNSEEN_READS):
        assert claims.drop_unseen(set(), 100.0 + i * 0.05, 100.0 + i * 0.05) == []
    assert claims.drop_unseen(set(), 100.0 + UNSEEN_MIN_S, 100.0 + UNSEEN_MIN_S) == [JOB.id]


def test_a_job_listed_once_starts_its_count_again():
    claims = claims_at(100.0, JOB)
    for i in range(1, UNSEEN_READS):
        claims.drop_unseen(set(), 100.0 + i, 100.0 + i)
    claims.drop_unseen({JOB.id}, 110.0, 110.0)  # a read that raced the listing found it after all
    for i in range(1, UNSEEN_READS):
        assert claims.drop_unseen(set(), 110.0 + i, 110.0 + i) == []
    assert len(claims) == 1
