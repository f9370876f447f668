"""The `slurm` fixture: the real testbed (.ci/slurm-testbed.sh), empty before and after each test.

Skipped unless SLURM_ADVISOR_TEST_SLURM is set (tests/run.sh sets it after starting the testbed);
when it is set, a Slurm that does not answer is a failure, not a skip: CI must not pass by
silently testing nothing.
"""
from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from slurmctl import Slurm, SlurmError


@pytest.fixture(scope="session")
def slurm_reachable() -> None:
    """Checked once per session: a controller that does not answer fails every Slurm test."""
    if not os.environ.get("SLURM_ADVISOR_TEST_SLURM"):
        pytest.skip("needs the Slurm testbed: run tests/run.sh, or start .ci/slurm-testbed.sh "
                    "and set SLURM_CONF and SLURM_ADVISOR_TEST_SLURM=1")
    try:
        Slurm().ping()
    except SlurmError as exc:
        pytest.fail(f"SLURM_ADVISOR_TEST_SLURM is set but Slurm does not answer "
                    f"(SLURM_CONF={os.environ.get('SLURM_CONF', 'unset')}): {exc}")


@pytest.fixture
def slurm(slurm_reachable: None) -> Iterator[Slurm]:
    cluster = Slurm()
    try:
        states = cluster.node_states()
    except SlurmError as exc:
        pytest.fail(f"Slurm testbed does not answer: {exc}")
    if not states or any(state != "idle" for state in states.values()):
        pytest.fail(f"Slurm testbed not ready: nodes {states or 'none'} (want all idle)")
    yield cluster
    cluster.cancel_all()
