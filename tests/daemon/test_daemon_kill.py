"""kill -9 of the daemon while it writes reports: every report committed before the kill is still
there, in order and without holes, the database passes SQLite's integrity check, and the next
daemon opens it, writes what the spool kept of the acknowledged rest, and goes on writing."""
from __future__ import annotations

import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

from daemon_helpers import make_daemon
from test_reports import ListedQueue, _serve

from slurm_advisor.daemon.client import Client, DaemonUnavailable, call
from slurm_advisor.store import Store

HERE = Path(__file__).resolve().parent
DAEMON = """
import sys
from pathlib import Path
sys.path.insert(0, {here!r})
from daemon_helpers import make_daemon
from test_reports import ListedQueue
from slurm_advisor.daemon.server import AdvisorServer

daemon = make_daemon(Path({work!r}), queue=ListedQueue({{"101": 0}}))
daemon.start()
server = AdvisorServer(daemon.config.socket, daemon.dispatcher(), 2.0)
print("ready", flush=True)
server.serve_forever()
"""


def _committed(db: Path) -> int:
    with sqlite3.connect(db, timeout=5) as con:  # another reader, as an admin's CLI would be
        return con.execute("SELECT count(*) FROM reports").fetchone()[0]


def test_kill_9_while_writing_loses_no_committed_report(tmp_path):
    proc = subprocess.Popen([sys.executable, "-c", DAEMON.format(here=str(HERE), work=str(tmp_path))],
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        sock, db = tmp_path / "advisor.sock", tmp_path / "advisor.db"
        acked: list[int] = []

        def report_until_killed():
            try:
                with Client(sock, timeout_s=5) as client:
                    for i in range(1, 1_000_000):
                        if client.call("report", job_id="101", iterations=i, seconds=1.0)["ok"]:
                            acked.append(i)
            except DaemonUnavailable:
                pass  # the kill

        sender = threading.Thread(target=report_until_killed, daemon=True)
        sender.start()
        deadline = time.monotonic() + 60
        while _committed(db) < 2_000:  # the writer has committed a few batches
            assert time.monotonic() < deadline, "the daemon did not write"
            time.sleep(0.05)
        before = _committed(db)
        proc.send_signal(signal.SIGKILL)  # mid-stream: the sender is still sending
        proc.wait(timeout=10)
        sender.join(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
    # a report is acknowledged once queued, so every committed one was acknowledged; whether some
    # were still in the queue at the kill depends on timing and is not asserted (CI caught it equal)
    assert len(acked) >= before
    with sqlite3.connect(db) as con:
        assert con.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        stored = [row[0] for row in con.execute("SELECT iterations FROM reports ORDER BY id")]
    assert len(stored) >= before
    assert stored == [float(i) for i in range(1, len(stored) + 1)]  # in order, no hole, no torn batch
    assert len(stored) <= len(acked) + 1  # nothing stored that was never sent (one may miss its ack)
    # the next daemon opens the same database, replays the spool and goes on: every acknowledged
    # report is stored once (and perhaps the one whose reply the kill cut off)
    (tmp_path / "advisor.sock").unlink(missing_ok=True)
    daemon = make_daemon(tmp_path, queue=ListedQueue({"101": 0}))
    with _serve(daemon):
        assert call(daemon.config.socket, "report", job_id="101", iterations=0.5, seconds=7.0)["ok"] is True
    daemon.stop()
    with Store.open(str(db), create=False) as store:
        replayed = [r.iterations for r in store.load_reports()]
    assert replayed[-1] == 0.5  # the new daemon's, after the replay
    assert replayed[:-1] == [float(i) for i in range(1, len(replayed))]
    assert len(acked) <= len(replayed) - 1 <= len(acked) + 1
