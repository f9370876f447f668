"""Resources: the (cpus, gpus, mem_mb) vector every capacity check rests on."""
import dataclasses

import pytest

from slurm_advisor.domain import Resources


def test_arithmetic_is_elementwise() -> None:
    a, b = Resources(8, 2, 1000), Resources(3, 1, 400)
    assert a + b == Resources(11, 3, 1400)
    assert a - b == Resources(5, 1, 600)
    assert b.times(3) == Resources(9, 3, 1200)
    assert b.times(0) == Resources()


def test_default_is_zero() -> None:
    assert Resources() == Resources(0, 0, 0)
    assert Resources().is_zero()
    assert not Resources(0, 0, 1).is_zero()
    assert not Resources(0, 1, 0).is_zero()
    assert not Resources(1, 0, 0).is_zero()


def test_fits_in_needs_every_resource() -> None:
    free = Resources(4, 2, 1000)
    assert Resources(4, 2, 1000).fits_in(free)  # exactly full is fine
    assert Resources(0, 0, 0).fits_in(free)
    assert not Resources(5, 0, 0).fits_in(free)
    assert not Resources(0, 3, 0).fits_in(free)
    assert not Resources(0, 0, 1001).fits_in(free)
    assert not Resources().fits_in(Resources(-1, 0, 0))  # over-committed node fits nothing


def test_fraction_of_is_zero_where_capacity_is_zero() -> None:
    assert Resources(8, 1, 500).fraction_of(Resources(32, 4, 1000)) == (0.25, 0.25, 0.5)
    assert Resources(8, 1, 500).fraction_of(Resources(32, 0, 1000)) == (0.25, 0.0, 0.5)


def test_is_frozen_and_hashable() -> None:
    r = Resources(1, 2, 3)
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.cpus = 5  # type: ignore[misc]
    assert {r: "x"}[Resources(1, 2, 3)] == "x"
