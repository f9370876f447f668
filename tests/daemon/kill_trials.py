"""kill -9 during a burst of advice and reports, then a restart: what the clients were told was
taken against what the store holds. test_kill_durability.py runs a few trials in CI,
benchmarks/kill_durability.py twenty.

A trial: a real daemon process over a SQLite store (and its spool beside it); clients — half
asking for advice on a new connection each (as the hook does), half sending speed reports on
one connection each — until the daemon is killed with SIGKILL after a random number of
acknowledged requests; then a daemon on the same store starts (replaying the spool) and stops
(writing everything), and every acknowledged decision id and report is looked up in the store.
"""
from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from daemon_helpers import make_daemon, marked
from test_reports import ListedQueue

from slurm_advisor.daemon.client import Client, DaemonUnavailable
from slurm_advisor.store import Store

HERE = Path(__file__).resolve().parent
JOBS = {"101": 0, "102": 0, "103": 0, "104": 0}  # running, owned by root: reports are accepted
DAEMON = """
import sys
from pathlib import Path
sys.path.insert(0, {here!r})
from daemon_helpers import make_daemon
from test_reports import ListedQueue
from slurm_advisor.daemon.server import AdvisorServer

daemon = make_daemon(Path({work!r}), queue=ListedQueue({jobs!r}), spool_dir=Path({spool_dir!r}), **{db!r})
daemon.start()
server = AdvisorServer(daemon.config.socket, daemon.dispatcher(), 2.0)
print("ready", flush=True)
server.serve_forever()
"""


@dataclass
class Trial:
    kill_after: int          # acknowledged requests (both kinds) before the kill was sent
    decisions_acked: int
    reports_acked: int
    decisions_lost: int      # acknowledged, not in the store after the restart
    reports_lost: int
    reports_doubled: int     # acknowledged, stored more than once
    spool_files_left: int    # after the restarted daemon's clean stop (should be none)
    seconds: float

    @property
    def lost(self) -> int:
        return self.decisions_lost + self.reports_lost + self.reports_doubled


class _Burst:
    """Client threads that count what was acknowledged until the daemon goes away."""

    def __init__(self, sock: Path, clients: int, kill_after: int):
        self.sock, self.kill_after = sock, kill_after
        self.decisions: list[str] = []
        self.reports: list[tuple[str, float]] = []
        self.reached = threading.Event()
        self._lock = threading.Lock()
        self.threads = [threading.Thread(target=self._advise if i % 2 == 0 else self._report, args=(i,), daemon=True)
                        for i in range(clients)]

    def _acked(self, into: list, item) -> None:
        with self._lock:
            into.append(item)
            if len(self.decisions) + len(self.reports) >= self.kill_after:
                self.reached.set()

    def _advise(self, client: int) -> None:
        try:
            while True:
                with Client(self.sock, timeout_s=5) as connection:
                    reply = connection.call("advise", job=marked(workers=1 + client % 3))
                if reply.get("decision"):
                    self._acked(self.decisions, reply["decision"])
        except DaemonUnavailable:
            pass  # the kill

    def _report(self, client: int) -> None:
        job = list(JOBS)[client % len(JOBS)]
        try:
            with Client(self.sock, timeout_s=5) as connection:
                for i in range(1, 10**9):
                    iterations = i + client / 16  # unique per report (exact in binary): its key in the check
                    if connection.call("report", job_id=job, iterations=iterations, seconds=1.0)["ok"]:
                        self._acked(self.reports, (job, float(iterations)))
        except DaemonUnavailable:
            pass


def run_trial(work: Path, rng: random.Random, *, clients: int = 4, most: int = 800, spool: bool = True,
              db: str | None = None) -> Trial:
    """One trial in the empty directory ``work``, over a SQLite store there or the empty database
    ``db``. ``spool`` False: a spool directory that cannot be made (under a regular file), so the
    daemons acknowledge from memory as before the spool."""
    started = time.monotonic()
    kill_after = rng.randint(20, most)
    if not spool:
        (work / "a-file").write_text("")
    spool_dir = work / "a-file" / "spool" if not spool else work / "spool" if db else work / "advisor.db.spool"
    store = {"db": db} if db else {}
    proc = subprocess.Popen([sys.executable, "-c", DAEMON.format(here=str(HERE), work=str(work), jobs=JOBS,
                                                                 spool_dir=str(spool_dir), db=store)],
                            stdout=subprocess.PIPE, text=True,
                            # the killed daemon's resource tracker warns of the semaphores it left: expected
                            env={**os.environ, "PYTHONWARNINGS": "ignore::UserWarning:multiprocessing.resource_tracker"})
    try:
        assert proc.stdout.readline().strip() == "ready"
        burst = _Burst(work / "advisor.sock", clients, kill_after)
        for thread in burst.threads:
            thread.start()
        assert burst.reached.wait(60), "the daemon did not answer"
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    for thread in burst.threads:
        thread.join(timeout=10)
    # The next daemon on the same store and spool: it replays at its start, writes all at its stop.
    (work / "advisor.sock").unlink(missing_ok=True)
    daemon = make_daemon(work, queue=ListedQueue(JOBS), spool_dir=spool_dir, **store)
    daemon.start()
    daemon.stop()
    with Store.open(db or str(work / "advisor.db")) as store:
        stored_ids = {d.id for d in store.load_decisions()}
        stored = Counter((r.job_id, r.iterations) for r in store.load_reports())
    return Trial(kill_after, len(burst.decisions), len(burst.reports),
                 decisions_lost=sum(d not in stored_ids for d in burst.decisions),
                 reports_lost=sum(stored[r] == 0 for r in burst.reports),
                 reports_doubled=sum(stored[r] > 1 for r in burst.reports),
                 spool_files_left=len(list(spool_dir.glob("*.spool"))),
                 seconds=time.monotonic() - started)
