"""`pg_url`: the CI's real PostgreSQL (SLURM_ADVISOR_TEST_PG_URL), at the current schema and empty
before and after each test. Skipped when the variable is not set."""
from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from sqlalchemy import create_engine, text

from slurm_advisor.store import Store

_TABLES = "speed_samples, decisions, reports, outcomes, models"


def _empty(url: str) -> None:
    # Plain SQL: the store has no delete API (and should not grow one for tests).
    engine = create_engine(url)
    with engine.begin() as connection:
        connection.execute(text(f"TRUNCATE {_TABLES} RESTART IDENTITY"))
    engine.dispose()


@pytest.fixture
def pg_url() -> Iterator[str]:
    url = os.environ.get("SLURM_ADVISOR_TEST_PG_URL")
    if not url:
        pytest.skip("SLURM_ADVISOR_TEST_PG_URL is not set")
    Store.open(url).close()  # a fresh CI database: create the schema first
    _empty(url)
    try:
        yield url
    finally:
        _empty(url)
