"""Reports (with their live samples), outcomes and the model registry, on SQLite and PostgreSQL."""
from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from test_store import _samples

from slurm_advisor.domain.model_record import ModelRecord
from slurm_advisor.domain.outcome import Outcome
from slurm_advisor.domain.speed_report import SpeedReport
from slurm_advisor.errors import InputError
from slurm_advisor.store import Store


def _reports_and_outcomes(store: Store) -> None:
    live = _samples("live", 2)
    reports = [SpeedReport("101", 1000, 500, 10.0, 1000.0, "d-000000000001", 1000.5),
               SpeedReport("102", 0, 30, 3.0, 1001.0, None, 1001.0),
               SpeedReport("101", 1000, 400, 10.0, 1010.0, "d-000000000001", 1010.2)]
    assert store.record_reports([(reports[0], live[0]), (reports[1], None), (reports[2], live[1])]) == 3
    assert store.record_reports([]) == 0
    assert store.load_reports() == reports
    assert store.load_reports(job_id="101", limit=1) == reports[:1]
    assert reports[0].speed == 50.0 and reports[0].window_start == 990.0
    assert (store.count_reports(), store.count_reports(sampled=True), store.count_reports(sampled=False)) == (3, 2, 1)
    assert store.load_samples(source="live") == live  # what training reads

    running = Outcome("101", "RUNNING", "d-000000000001", 900.0, 950.0, None, ("n1", "n2"))
    assert store.record_outcomes([running, Outcome("102", "PENDING", None, 960.0)]) == 2
    assert store.outcome("101") == running and store.outcome("nope") is None
    done = Outcome("101", "COMPLETED", None, 900.0, 950.0, 1200.0, ("n1", "n2"))
    store.record_outcomes([done])  # upsert by job id; the decision id it had is kept
    assert store.outcome("101") == Outcome("101", "COMPLETED", "d-000000000001", 900.0, 950.0, 1200.0, ("n1", "n2"))
    assert store.outcome("101").final and not store.outcome("102").final
    assert [o.job_id for o in store.load_outcomes(final=False)] == ["102"]
    assert len(store.load_outcomes()) == 2
    # Slurm's per-node counts, read while the job ran, survive a later state that carries none
    read = Outcome("103", "RUNNING", "d-000000000003", 900.0, 950.0, None, ("n1", "n3"), (3, 1), "scontrol show job -d")
    store.record_outcomes([read])
    store.record_outcomes([Outcome("103", "COMPLETED", None, 900.0, 950.0, 1300.0, ("n1", "n3"))])
    assert store.outcome("103") == Outcome("103", "COMPLETED", "d-000000000003", 900.0, 950.0, 1300.0,
                                           ("n1", "n3"), (3, 1), "scontrol show job -d")


def _registry(store: Store) -> None:
    assert store.active_model() is None and store.list_models() == []
    first = store.register_model(ModelRecord("aaaaaaaaaaaa", "/m/a", created_at=1.0, first_sample_time=0.0,
                                             last_sample_time=99.0, samples=500, live_samples=20,
                                             metrics={"mape": 0.12}))
    assert first.status == "candidate" and first.metrics == {"mape": 0.12} and first.samples == 500
    store.register_model(ModelRecord("bbbbbbbbbbbb", "/m/b", created_at=2.0))
    assert store.set_model_status("aaaaaaaaaaaa", "active").promoted_at
    assert store.active_model().version == "aaaaaaaaaaaa"
    promoted = store.set_model_status("bbbbbbbbbbbb", "active")  # the other retires in the same transaction
    assert promoted.status == "active" and store.active_model().version == "bbbbbbbbbbbb"
    old = store.model("aaaaaaaaaaaa")
    assert old.status == "retired" and old.retired_at
    assert [m.version for m in store.list_models()] == ["bbbbbbbbbbbb", "aaaaaaaaaaaa"]
    assert [m.status for m in store.list_models()].count("active") == 1
    store.register_model(ModelRecord("cccccccccccc", "/m/c", status="active", created_at=3.0))
    assert [m.status for m in store.list_models()] == ["active", "retired", "retired"]
    assert store.set_model_status("cccccccccccc", "retired").status == "retired" and store.active_model() is None
    with pytest.raises(InputError, match="no model 'dddddddddddd'.*aaaaaaaaaaaa"):
        store.set_model_status("dddddddddddd", "active")
    with pytest.raises(InputError, match="expected one of candidate, active, retired"):
        store.set_model_status("aaaaaaaaaaaa", "live")
    with pytest.raises(InputError, match="cannot write"):
        store.register_model(ModelRecord("aaaaaaaaaaaa", "/m/again"))


def test_sqlite_reports_outcomes_registry(tmp_path: Path) -> None:
    with Store.open(str(tmp_path / "a.db")) as store:
        _reports_and_outcomes(store)
        _registry(store)
        assert store.revision() == "0005"


def test_the_database_itself_refuses_a_second_active_model(tmp_path: Path) -> None:
    with Store.open(str(tmp_path / "a.db")) as store:
        store.register_model(ModelRecord("aaaaaaaaaaaa", "/m/a", status="active"))
        store.register_model(ModelRecord("bbbbbbbbbbbb", "/m/b"))
    with sqlite3.connect(tmp_path / "a.db") as db, pytest.raises(sqlite3.IntegrityError):
        db.execute("UPDATE models SET status = 'active' WHERE version = 'bbbbbbbbbbbb'")


def test_upgrade_from_0002_keeps_decisions_and_samples(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    with Store.open(str(path)) as store:
        store.record_samples(_samples(n=2))
    with sqlite3.connect(path) as db:
        for table in ("reports", "outcomes", "models", "model_activations"):
            db.execute(f"DROP TABLE {table}")
        db.execute("ALTER TABLE decisions DROP COLUMN evidence")
        db.execute("UPDATE alembic_version SET version_num = '0002'")
    with Store.open(str(path)) as store:  # opening upgrades 0002 -> 0005
        assert store.revision() == "0005" and store.count_samples() == 2 and store.count_reports() == 0


@pytest.mark.postgres
def test_postgres_reports_outcomes_registry(pg_url: str) -> None:
    with Store.open(pg_url) as store:
        _reports_and_outcomes(store)
        _registry(store)
        assert store.revision() == "0005"


def test_upgrade_from_0003_records_the_promotions_so_far_as_the_history(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    with Store.open(str(path)) as store:
        for version, promoted_at, status in (("a" * 12, 100.0, "retired"), ("c" * 12, None, "candidate"),
                                             ("b" * 12, 200.0, "active")):
            store.register_model(ModelRecord(version, f"/m/{version}", status, promoted_at=promoted_at))
    with sqlite3.connect(path) as db:  # as a database of revision 0003 holds them: no history
        db.execute("DROP TABLE model_activations")
        db.execute("ALTER TABLE decisions DROP COLUMN evidence")
        db.execute("ALTER TABLE outcomes DROP COLUMN allocation")
        db.execute("UPDATE models SET promoted_at = 100.0 WHERE version = 'aaaaaaaaaaaa'")
        db.execute("UPDATE models SET promoted_at = 200.0 WHERE version = 'bbbbbbbbbbbb'")
        db.execute("UPDATE alembic_version SET version_num = '0003'")
    with Store.open(str(path)) as store:  # opening upgrades 0003 -> 0005
        assert [(c.version, c.action, c.time) for c in store.model_history()] == [
            ("a" * 12, "promote", 100.0), ("b" * 12, "promote", 200.0)]


def test_upgrade_from_0004_keeps_decisions_and_outcomes_without_evidence(tmp_path: Path) -> None:
    """A database of revision 0004 has neither column: its rows come back "not recorded"."""
    from test_decisions import decisions

    path = tmp_path / "old.db"
    with Store.open(str(path)) as store:
        store.record_decisions(decisions()[1:])
        store.record_outcomes([Outcome("101", "RUNNING", "d-000000000002", 900.0, 950.0, None, ("n4",))])
    with sqlite3.connect(path) as db:  # as revision 0004 left it
        db.execute("ALTER TABLE decisions DROP COLUMN evidence")
        db.execute("ALTER TABLE outcomes DROP COLUMN allocation")
        db.execute("UPDATE alembic_version SET version_num = '0004'")
    with Store.open(str(path)) as store:  # opening upgrades 0004 -> 0005
        assert store.revision() == "0005" and store.decision("d-000000000002").evidence is None
        assert store.load_decisions() == list(reversed(decisions()[1:]))
        assert store.outcome("101").tasks == () and store.outcome("101").tasks_from == ""
