"""Job: PS and worker tasks, their order and their demands."""
import dataclasses
import math

import pytest

from slurm_advisor.domain import Job, Resources, Role

PS = Resources(4, 0, 16_000)
WORKER = Resources(4, 1, 24_000)


def job(num_ps: int = 2, num_workers: int = 3, **kw) -> Job:
    return Job("j", "resnet50", num_ps, num_workers, PS, WORKER, kw.pop("iterations", 100.0), **kw)


def test_roles_put_parameter_servers_first() -> None:
    assert job(2, 3).roles() == (Role.PS, Role.PS, Role.WORKER, Role.WORKER, Role.WORKER)
    assert job(0, 2).roles() == (Role.WORKER, Role.WORKER)


def test_allreduce_is_a_job_without_ps() -> None:
    assert job(0, 4).is_allreduce
    assert not job(1, 4).is_allreduce


def test_counts_and_demands() -> None:
    j = job(2, 3)
    assert j.num_tasks == 5
    assert j.demand(Role.PS) == PS
    assert j.demand(Role.WORKER) == WORKER
    assert j.total_demand() == Resources(20, 3, 2 * 16_000 + 3 * 24_000)
    assert job(0, 2).total_demand() == Resources(8, 2, 48_000)


@pytest.mark.parametrize("num_ps, num_workers, iterations, message", [
    (0, 0, 10.0, "num_workers"),
    (-1, 1, 10.0, "num_ps"),
    (0, 1, 0.0, "iterations"),
    (0, 1, -5.0, "iterations"),
    (0, 1, math.nan, "iterations"),
])
def test_invalid_jobs_are_refused(num_ps: int, num_workers: int, iterations: float, message: str) -> None:
    with pytest.raises(ValueError, match=message) as err:
        Job("bad", "x", num_ps, num_workers, PS, WORKER, iterations)
    assert "bad" in str(err.value)


def test_optional_fields_default() -> None:
    j = job()
    assert (j.submit_time, j.user, j.model_size_mb, j.batch_size) == (0.0, "", None, None)


def test_equal_jobs_compare_and_hash_equal() -> None:
    assert job() == job()
    assert hash(job()) == hash(job())
    assert job() != job(iterations=200.0)


def test_is_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        job().num_workers = 9  # type: ignore[misc]
