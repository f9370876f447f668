"""Decisions in the store: round trip, order, and the same on a real PostgreSQL."""
from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from slurm_advisor.domain.decision import Decision
from slurm_advisor.store import Store

T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def decisions() -> list[Decision]:
    return [
        Decision("d-000000000001", T0, "advise", "place", "learned", "abc123", "resnet50", 1000,
                 {"comment": "slurm-advisor: type=resnet50 ps=1 workers=2", "num_tasks": 3},
                 layout=(("ps", "n1"), ("worker", "n1"), ("worker", "n2")), latency_ms=0.8,
                 evidence={"v": 1, "model": "abc123", "layouts": [
                     {"name": "advised", "tasks": [["n1", 1, 1], ["n2", 0, 1]], "predicted": 2.5},
                     {"name": "slurm", "tasks": [["n3", 1, 2]], "predicted": 2.0}]}),
        Decision("d-000000000002", T0 + timedelta(seconds=1), "observe", "none", "learned", "abc123", "bert",
                 None, {"comment": "slurm-advisor: type=bert ps=0 workers=1"}, would=(("worker", "n4"),)),
        Decision("d-000000000003", T0 + timedelta(seconds=2), "enforce", "cap", "learned", "abc123", "vgg16",
                 7, {}, max_nodes=2, reason="waiting for one switch", fallback=False),
    ]


def _exercise(store: Store) -> None:
    assert store.record_decisions(decisions()) == 3
    loaded = store.load_decisions()
    assert loaded == list(reversed(decisions()))  # newest first, every field back
    assert store.load_decisions(limit=1)[0].id == "d-000000000003"
    assert store.count_decisions() == 3
    assert loaded[2].nodes == ("n1", "n2") and loaded[1].nodes == ("n4",)
    assert store.decision("d-000000000001").evidence["layouts"][1]["predicted"] == 2.0
    assert store.decision("d-000000000002").evidence is None  # none recorded: SQL NULL, "not recorded"


def test_sqlite_round_trip(tmp_path: Path) -> None:
    with Store.open(str(tmp_path / "a.db")) as store:
        _exercise(store)


def test_sqlite_uses_wal_so_readers_do_not_block_the_daemon(tmp_path: Path) -> None:
    with Store.open(str(tmp_path / "a.db")) as store:
        store.record_decisions(decisions()[:1])
    assert (tmp_path / "a.db-wal").exists() or (tmp_path / "a.db").read_bytes()[18:20] == b"\x02\x02"


def test_a_duplicate_decision_id_is_one_clear_error(tmp_path: Path) -> None:
    from slurm_advisor.errors import InputError
    with Store.open(str(tmp_path / "a.db")) as store:
        store.record_decisions(decisions()[:1])
        with pytest.raises(InputError, match="cannot write to database"):
            store.record_decisions(decisions()[:1])


@pytest.mark.postgres
def test_postgres_round_trip(pg_url: str) -> None:
    with Store.open(pg_url) as store:
        _exercise(store)
