"""The decision writer: decisions reach the store from a child process, which survives what a
service manager sends the group, is replaced when it dies, and ends when the daemon is gone."""
from __future__ import annotations

import multiprocessing
import os
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlalchemy import create_engine
from sqlalchemy.pool import StaticPool

from slurm_advisor.daemon.writer import decision_writer
from slurm_advisor.domain.decision import Decision
from slurm_advisor.store import Store

HERE = Path(__file__).resolve().parent


def decisions(first: int, count: int) -> list[Decision]:
    return [Decision(f"d-{i:012x}", datetime.now(UTC), "advise", "none", "p", None, "t", None, {"n": i})
            for i in range(first, first + count)]


def writer_process() -> multiprocessing.Process:
    children = [p for p in multiprocessing.active_children() if p.name == "slurm-advisor decision writer"]
    assert len(children) == 1
    return children[0]


def wait_for(condition, timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def test_decisions_are_written_by_another_process_and_all_of_them_by_the_stop(tmp_path):
    store = Store.open(str(tmp_path / "d.db"))
    writer = decision_writer(store, tmp_path / "decisions.jsonl")
    writer.start()
    child = writer_process()
    assert child.pid != os.getpid()
    for d in decisions(0, 1000):
        writer.put(d)
    writer.stop()
    assert (writer.written, writer.dropped, writer.logged) == (1000, 0, 1000)
    assert store.count_decisions() == 1000 and not child.is_alive()
    assert len((tmp_path / "decisions.jsonl").read_text().splitlines()) == 1000
    store.close()


def test_sigterm_to_the_group_does_not_cost_the_queued_decisions(tmp_path):
    store = Store.open(str(tmp_path / "d.db"))
    writer = decision_writer(store)
    writer.start()
    child = writer_process()
    writer.put(decisions(0, 1)[0])
    wait_for(lambda: writer.written == 1)  # booted: its signal handlers are set
    os.kill(child.pid, signal.SIGTERM)
    for d in decisions(1, 50):
        writer.put(d)
    writer.stop()
    assert (writer.written, writer.dropped, writer.restarts) == (51, 0, 0) and store.count_decisions() == 51
    store.close()


@pytest.mark.parametrize("spooled", [False, True], ids=["in-memory", "spooled"])
def test_a_writer_that_dies_is_replaced_and_its_unwritten_decisions_counted(tmp_path, caplog, spooled):
    # spooled: the decisions put while no child runs are on the spool, and its successor takes them
    store = Store.open(str(tmp_path / "d.db"))
    writer = decision_writer(store, spool=tmp_path / "spool" if spooled else None)
    writer.start()
    for d in decisions(0, 10):
        writer.put(d)
    wait_for(lambda: writer.written == 10)
    first = writer_process()
    os.kill(first.pid, signal.SIGKILL)
    first.join(timeout=10)
    for d in decisions(10, 10):
        writer.put(d)
    wait_for(lambda: writer.written == 20)
    assert writer_process().pid != first.pid
    writer.stop()
    assert (writer.written, writer.dropped, writer.restarts) == (20, 0, 1) and store.count_decisions() == 20
    assert "decision writer process ended" in caplog.text
    store.close()


def test_the_writer_ends_when_the_daemon_is_killed(tmp_path):
    script = f"""
import sys, time
sys.path.insert(0, {str(HERE)!r})
from test_writer import decisions
from slurm_advisor.daemon.writer import decision_writer
from slurm_advisor.store import Store
if __name__ == "__main__":
    store = Store.open({str(tmp_path / "d.db")!r})
    writer = decision_writer(store)
    writer.start()
    for d in decisions(0, 5):
        writer.put(d)
    while writer.written < 5:
        time.sleep(0.02)
    import multiprocessing
    print(multiprocessing.active_children()[0].pid, flush=True)
    time.sleep(60)
"""
    (tmp_path / "daemon.py").write_text(script)
    daemon = subprocess.Popen([sys.executable, str(tmp_path / "daemon.py")], stdout=subprocess.PIPE, text=True)
    try:
        child = int(daemon.stdout.readline())
    finally:
        daemon.kill()
        daemon.wait()

    def gone() -> bool:
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            return True
        return open(f"/proc/{child}/stat").read().split()[2] == "Z"  # exited, not yet reaped

    wait_for(gone, 10.0)
    with Store.open(str(tmp_path / "d.db"), create=False) as store:
        assert store.count_decisions() == 5


def test_a_store_in_memory_is_written_from_a_thread():
    # one connection for every thread: the only way threads share a database in memory
    engine = create_engine("sqlite://", poolclass=StaticPool, connect_args={"check_same_thread": False})
    store = Store(engine, "sqlite://")
    store._upgrade()
    assert store.url_for_another_process() is None
    writer = decision_writer(store)
    writer.start()
    assert not [p for p in multiprocessing.active_children() if p.name == "slurm-advisor decision writer"]
    for d in decisions(0, 3):
        writer.put(d)
    writer.stop()
    assert writer.written == 3 and store.count_decisions() == 3


@pytest.mark.parametrize("url", ["postgresql://advisor:s3cret@db.example/advisor"])
def test_another_process_gets_the_url_with_its_password(url):
    store = Store(create_engine(url), "shown")
    assert store.url_for_another_process() == url


def test_a_writer_never_stopped_writes_its_decisions_at_exit_and_does_not_hang_it(tmp_path):
    script = f"""
import sys
sys.path.insert(0, {str(HERE)!r})
from test_writer import decisions
from slurm_advisor.daemon.writer import decision_writer
from slurm_advisor.store import Store
if __name__ == "__main__":
    writer = decision_writer(Store.open({str(tmp_path / "d.db")!r}))
    writer.start()
    for d in decisions(0, 7):
        writer.put(d)
"""
    (tmp_path / "daemon.py").write_text(script)
    subprocess.run([sys.executable, str(tmp_path / "daemon.py")], check=True, timeout=60)
    with Store.open(str(tmp_path / "d.db"), create=False) as store:
        assert store.count_decisions() == 7


def test_the_spool_is_replayed_at_start_and_each_decision_stored_once(tmp_path):
    from slurm_advisor.daemon.batches import decision_line
    store = Store.open(str(tmp_path / "d.db"))
    store.record_decisions(decisions(0, 5))  # a killed run stored these, not the five after them
    spool = tmp_path / "spool"
    spool.mkdir()
    (spool / "decision-0000000007.spool").write_bytes(
        b"".join(decision_line(d) for d in decisions(0, 10)) + b'{"id": "d-0000')  # cut short by a crash
    writer = decision_writer(store, tmp_path / "decisions.jsonl", spool)
    writer.start()
    for d in decisions(10, 10):
        writer.put(d)
    writer.stop()
    assert store.count_decisions() == 20 and not list(spool.glob("*.spool"))
    assert (writer.written, writer.dropped, writer.spooled, writer.spool_failed, writer.spool_damaged) == (15, 0, 10, 0, 1)
    store.close()

