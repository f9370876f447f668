"""The store on a SQLite file (always) and on a real PostgreSQL (``-m postgres``, URL from CI)."""
from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from slurm_advisor.domain import Job, Node, Placement, Resources, RunningJob, SpeedSample
from slurm_advisor.errors import InputError
from slurm_advisor.store import Store

NODES = (Node("n1", 32, 4, 256_000, switch="s1", features=frozenset({"v100", "ib"})),
         Node("n2", 32, 4, 256_000, switch="s1"))


def _running(job_id: str, num_ps: int, nodes: list[str], start: float = 0.0) -> RunningJob:
    job = Job(job_id, "resnet50", num_ps, len(nodes) - num_ps, Resources(4, 0, 8_000),
              Resources(4, 1, 16_000), iterations=1e5, submit_time=1.5, user="alice",
              model_size_mb=97.5, batch_size=32)
    return RunningJob(job, Placement.of(job, nodes), start)


def _samples(source: str = "sim", n: int = 3) -> list[SpeedSample]:
    neighbour = _running("j-ar", 0, ["n2", "n2"], 3.0)
    return [SpeedSample(10.0 * i, _running(f"j{i}", 1, ["n1", "n1", "n2"]), (neighbour,), NODES,
                        speed=2.25 + i, source=source) for i in range(n)]


def _exercise(store: Store) -> None:
    """The API contract, shared by the SQLite and PostgreSQL tests."""
    sim, live = _samples("sim", 3), _samples("live", 2)
    assert store.record_samples(sim) == 3
    assert store.record_samples(iter(live)) == 2
    assert store.record_samples([]) == 0
    assert store.load_samples() == sim + live
    assert store.load_samples(source="live") == live
    assert store.load_samples(limit=2) == sim[:2]
    assert (store.count_samples(), store.count_samples("sim"), store.count_samples("live")) == (5, 3, 2)


def test_round_trip_and_count_by_source(tmp_path: Path) -> None:
    with Store.open(f"sqlite:///{tmp_path / 'nested' / 'dir' / 'a.db'}") as store:
        _exercise(store)


def test_bare_path_is_sqlite(tmp_path: Path) -> None:
    with Store.open(str(tmp_path / "b.db")) as store:
        store.record_samples(_samples(n=1))
    assert (tmp_path / "b.db").is_file()


def test_reopen_keeps_data_and_schema(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    with Store.open(str(path)) as store:
        store.record_samples(_samples(n=2))
    with Store.open(str(path)) as store:
        assert store.count_samples() == 2
        store.record_samples(_samples(n=1))
    with Store.open(f"sqlite:///{path}") as store:
        assert [s.speed for s in store.load_samples()] == [2.25, 3.25, 2.25]
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT version_num FROM alembic_version").fetchall() == [("0005",)]
        stamped = db.execute("SELECT recorded_at FROM speed_samples").fetchall()
    assert all(value for (value,) in stamped)


def test_rejects_unknown_source(tmp_path: Path) -> None:
    with Store.open(str(tmp_path / "d.db")) as store:
        with pytest.raises(ValueError, match="sim, live"):
            store.record_samples(_samples("replay", 1))
        assert store.count_samples() == 0


@pytest.mark.parametrize("url", ["nosuchdialect://u:hunter2@host/db", "postgresql+nodriver://u:hunter2@h/db"])
def test_bad_url_is_input_error(url: str) -> None:
    with pytest.raises(InputError, match="bad database URL") as info:
        Store.open(url)
    assert "hunter2" not in str(info.value)
    assert "***" in str(info.value)


def test_unusable_sqlite_path_is_input_error(tmp_path: Path) -> None:
    (tmp_path / "dir.db").mkdir()
    with pytest.raises(InputError, match="cannot open database"):
        Store.open(str(tmp_path / "dir.db"))


def test_unreachable_server_is_input_error_with_masked_password() -> None:
    pytest.importorskip("psycopg")
    url = "postgresql+psycopg://advisor:hunter2@127.0.0.1:1/slurm_advisor?connect_timeout=2"
    with pytest.raises(InputError, match="cannot open database") as info:
        Store.open(url)
    message = str(info.value)
    assert "hunter2" not in message
    assert "advisor:***@127.0.0.1:1" in message


@pytest.mark.postgres
def test_postgres_round_trip_and_reopen(pg_url: str) -> None:
    with Store.open(pg_url) as store:
        _exercise(store)
        with Store.open(pg_url) as again:  # already at head: the migration must not run again
            assert again.count_samples() == 5


def test_reading_requires_an_existing_database(tmp_path: Path) -> None:
    path = tmp_path / "typo.db"
    with pytest.raises(InputError, match="does not exist") as info:
        Store.open(str(path), create=False)
    assert str(path) in str(info.value)
    assert not path.exists() and not (tmp_path / "nested").exists()
    with pytest.raises(InputError, match="does not exist"):
        Store.open(f"sqlite:///{tmp_path / 'nested' / 'x.db'}", create=False)
    assert not (tmp_path / "nested").exists()
    with Store.open(str(path)) as store:  # recording may create it
        store.record_samples(_samples(n=1))
    with Store.open(str(path), create=False) as store:
        assert store.count_samples() == 1


def test_batched_recording_keeps_every_sample_in_few_commits(tmp_path: Path) -> None:
    samples = _samples(n=7)
    with Store.open(str(tmp_path / "e.db")) as store:
        before = store.commits
        with store.batched(size=3) as record:
            for s in samples:
                record([s])
            assert store.count_samples() == 6  # two full batches written, one sample buffered
        assert store.load_samples() == samples
        assert store.commits - before == 3  # 3 + 3 + the rest at the end


def test_batched_recording_drops_the_unwritten_rest_on_error(tmp_path: Path) -> None:
    with Store.open(str(tmp_path / "f.db")) as store:
        with pytest.raises(RuntimeError), store.batched(size=10) as record:
            record(_samples(n=2))
            raise RuntimeError("the simulation failed")
        assert store.count_samples() == 0


def test_sqlite_connections_use_wal_without_an_fsync_per_commit(tmp_path: Path) -> None:
    # WAL + synchronous=NORMAL: readers never block the daemon's writes, and a commit costs no
    # fsync (a kill -9 still loses nothing committed: tests/daemon/test_daemon_kill.py)
    from sqlalchemy import text
    with Store.open(str(tmp_path / "a.db")) as store, store._engine.connect() as con:
        assert con.execute(text("PRAGMA journal_mode")).scalar() == "wal"
        assert con.execute(text("PRAGMA synchronous")).scalar() == 1  # NORMAL
