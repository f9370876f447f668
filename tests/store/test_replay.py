"""Writing what the daemon's spool replays: a decision or report already stored is skipped, so a
replay after kill -9 stores each exactly once — on SQLite and on a real PostgreSQL."""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from test_decisions import decisions

from slurm_advisor.domain.speed_report import SpeedReport
from slurm_advisor.store import Store


def reports() -> list[SpeedReport]:
    return [SpeedReport("101", 1000, 10.0, 2.0, 1_700_000_000.25, "d-000000000001", 1_700_000_000.25),
            SpeedReport("101", 1000, 10.0, 2.0, 1_700_000_000.5, "d-000000000001", 1_700_000_000.5),
            SpeedReport("102", 0, 3.0, 1.0, 1_700_000_001.0, None, 1_700_000_000.25)]


def _replay(store: Store) -> None:
    first, replayed = decisions()[:2], decisions()
    assert store.record_decisions(first) == 2
    assert store.record_decisions(replayed, skip_stored=True) == 1  # only the third is new
    assert store.record_decisions(replayed, skip_stored=True) == 0
    assert sorted(d.id for d in store.load_decisions()) == [d.id for d in decisions()]

    assert store.record_reports([(r, None) for r in reports()[:2]]) == 2
    assert store.record_reports([(r, None) for r in reports()], skip_stored=True) == 1
    assert store.record_reports([(r, None) for r in reports()], skip_stored=True) == 0
    # the same job and time with other numbers is another report, not a replay
    other = replace(reports()[0], iterations=11.0)
    assert store.record_reports([(other, None)], skip_stored=True) == 1
    assert [(r.job_id, r.iterations, r.received_at) for r in store.load_reports()] == \
        [(r.job_id, r.iterations, r.received_at) for r in [*reports(), other]]


def test_sqlite_replay_stores_each_once(tmp_path: Path) -> None:
    with Store.open(str(tmp_path / "a.db")) as store:
        _replay(store)


@pytest.mark.postgres
def test_postgres_replay_stores_each_once(pg_url: str) -> None:
    with Store.open(pg_url) as store:
        _replay(store)


def test_a_sqlite_file_is_named_and_memory_is_not(tmp_path: Path) -> None:
    with Store.open(str(tmp_path / "a.db")) as store:
        assert store.sqlite_file() == (tmp_path / "a.db").resolve()
    with Store.open("sqlite://") as store:
        assert store.sqlite_file() is None
