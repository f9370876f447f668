"""EASY backfill: the reservation of the first waiting job, and who may jump ahead of it."""
import math

from slurm_advisor.domain import Job, Resources
from slurm_advisor.sim.backfill import Reservation, reserve


def gpus(n: int) -> Resources:
    return Resources(n, n, n)


def job(n_gpus: int) -> Job:
    return Job("j", "x", 0, n_gpus, Resources(), gpus(1), 10.0)


def test_shadow_time_is_the_first_end_that_frees_enough() -> None:
    ends = [(30.0, gpus(4)), (10.0, gpus(2)), (20.0, gpus(4))]
    r = reserve(job(10), gpus(4), ends)
    assert r.shadow_time == 20.0  # 4 + 2 (t=10) + 4 (t=20) = 10
    assert r.extra == gpus(0)


def test_extra_is_what_the_reserved_job_leaves_over() -> None:
    r = reserve(job(10), gpus(4), [(10.0, gpus(2)), (20.0, gpus(8)), (30.0, gpus(4))])
    assert r.shadow_time == 20.0
    assert r.extra == gpus(4)


def test_every_resource_must_be_available() -> None:
    need = Job("j", "x", 0, 1, Resources(), Resources(8, 1, 100), 1.0)
    ends = [(5.0, Resources(0, 1, 100)), (9.0, Resources(8, 0, 0))]
    r = reserve(need, Resources(), ends)
    assert r.shadow_time == 9.0 and r.extra == Resources(0, 0, 0)


def test_never_enough_gives_an_infinite_shadow() -> None:
    r = reserve(job(100), gpus(4), [(10.0, gpus(2))])
    assert math.isinf(r.shadow_time) and r.extra == Resources()


def test_short_jobs_are_admitted_before_the_shadow_time_without_using_extra() -> None:
    r = Reservation(100.0, gpus(0))
    assert r.admits(job(4), now=50.0, expected_runtime=40.0)
    assert r.admits(job(4), now=50.0, expected_runtime=50.0)  # ends exactly at the shadow time
    assert not r.admits(job(4), now=50.0, expected_runtime=50.5)
    assert r.extra == gpus(0)


def test_long_jobs_consume_extra_until_it_runs_out() -> None:
    r = Reservation(100.0, gpus(3))
    assert r.admits(job(2), now=0.0, expected_runtime=500.0)
    assert r.extra == gpus(1)
    assert not r.admits(job(2), now=0.0, expected_runtime=500.0)
    assert r.extra == gpus(1)  # a refusal consumes nothing
    assert r.admits(job(1), now=0.0, expected_runtime=500.0)
    assert r.extra == gpus(0)
    assert r.admits(job(8), now=0.0, expected_runtime=10.0)  # short jobs still get in


def test_infinite_shadow_admits_everything() -> None:
    assert Reservation(math.inf, Resources()).admits(job(8), 0.0, 1e12)
