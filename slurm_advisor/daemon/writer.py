"""Decisions, reports and outcomes go to the store in the background: a request never waits on
the database.

Reports and outcomes are written from threads. Decisions, one per request, are written from a
child process (:func:`decision_writer`): a writer thread shares the GIL with the request loop,
and while it encoded and inserted a batch every request in flight ran at half speed (at 1,000
nodes the round trip's p99 was 6.5-15.6 ms with the thread, 2.7-3.3 ms with the child:
benchmarks/advice_latency.py, README "The live path"). The child has the second core to
itself; the request loop only appends each decision to the spool (one write: daemon/spool.py),
which the child drains — or, where the spool cannot take it, to a deque shipped to the child.
The thread writers are in daemon/batches.py.
"""
from __future__ import annotations

import atexit
import logging
import logging.handlers
import multiprocessing
import signal
import threading
import time
from collections import deque
from pathlib import Path
from typing import Any

from slurm_advisor.daemon.batches import (
    BACKLOG,
    BATCH,
    GATHER_S,
    BatchWriter,
    DecisionBatches,
    decision_line,
    decision_of_line,
    store_decisions,
)
from slurm_advisor.daemon.evidence import Recorded
from slurm_advisor.daemon.spool import SpoolChannel, SpoolReader
from slurm_advisor.errors import InputError
from slurm_advisor.store import Store

log = logging.getLogger("slurm_advisor.daemon")
_PICKLE_AT_MOST = 20  # decisions per message to the decision writer process (~0.1 ms to pickle)
_CHILD_STOP_S = 20.0  # the decision writer's time to write what is queued at the stop (systemd waits 30 s)
_COUNTS = 6  # numbers the decision writer process publishes (ProcessDecisionWriter.__init__)


def decision_writer(store: Store | None, log: Path | None = None,
                    spool: Path | None = None) -> DecisionBatches | ProcessDecisionWriter:
    """The daemon's decision writer: a child process for a store another process can open,
    draining the spool in directory ``spool`` when given; a thread, as before the spool, for
    SQLite in memory (only this process's pool sees it: nothing to keep across a restart) or no
    store."""
    url = None if store is None else store.url_for_another_process()
    if url is None:
        return DecisionBatches(store, log)
    channel = None if spool is None else SpoolChannel(spool, "decision", decision_line, decision_of_line)
    return ProcessDecisionWriter(url, log, spool=channel)


class ProcessDecisionWriter:
    """The daemon's decisions to the store (and the decision log) from a child process; the same
    ``start``/``put``/``stop`` and counts as :class:`BatchWriter`.

    ``put`` only appends to a deque: no lock, no wake-up. A shipping thread takes what gathered
    every 50 ms and sends it down a pipe in pickles of at most 20 decisions (0.1 ms each), so the
    request loop is never kept from the GIL for longer. (A hand-over per decision woke a thread,
    and so took the GIL from the request loop, once a request.)

    The child opens the store by its URL and logs through the daemon's own handlers (its records
    come back over a queue). It ignores SIGINT and SIGTERM, which a service manager may send the
    whole group: it ends when the pipe closes — the daemon's stop, or its death — after writing
    what it was sent. A child that dies is replaced at the next batch; what it had not written
    is counted as dropped.

    With a spool (``spool``), ``put`` appends the decision to it instead — one write, no
    fsync — and the child drains the spool (polling it every ``gather_s``), replays what a
    previous run left there at its start, and deletes what it has written. A child that dies
    loses nothing then: its successor reads the spool again (the store skips decisions it has).
    The deque and pipe remain for decisions the spool did not take (disk full, say).
    """

    def __init__(self, url: str, log: Path | None = None, gather_s: float = GATHER_S,
                 spool: SpoolChannel | None = None):
        self._url, self._log, self._gather_s = url, log, gather_s
        self.spool = spool
        self._drains = False
        self._context = multiprocessing.get_context("spawn")  # not fork: the daemon has threads, torch
        # the child's written, dropped, logged, log_errors, taken from the pipe, damaged spool lines
        self._counts = self._context.Array("q", _COUNTS, lock=False)
        self._before = [0] * _COUNTS  # the same for children that ended
        self._overflow = 0           # decisions put with BACKLOG waiting, or after the stop
        self._evidence_spooled = 0   # evidence lines on the spool (not decisions: ``spooled`` leaves them out)
        self._evidence_lock = threading.Lock()  # the evidence worker's puts and ``spooled``: never the request's
        self._undelivered = 0        # decisions no child took (the shipping thread's count)
        self._sent = 0               # decisions sent to the current child
        self.restarts = 0            # children that died and were replaced
        self._pending: deque[Any] = deque()
        self._stopping = threading.Event()
        self._shipper = threading.Thread(target=self._ship_loop, name="decision-shipper", daemon=True)
        self._child: Any = None
        self._pipe: Any = None
        self._records: Any = None
        self._relay: logging.handlers.QueueListener | None = None

    def start(self) -> None:
        self._drains = self.spool is not None and self.spool.open()
        self._records = self._context.Queue()
        self._relay = logging.handlers.QueueListener(self._records, _Relay())
        self._relay.start()
        self._spawn()
        self._shipper.start()
        # Before multiprocessing's own exit handler (atexit runs last in, first out), which would
        # wait for a child that ends only when our end of the pipe closes.
        atexit.register(self.stop)

    def put(self, item: Any) -> None:
        if isinstance(item, Recorded) and self.spool is not None:
            with self._evidence_lock:  # counted with its line, as ``spooled`` reads them
                spooled = self.spool.put(item)
                self._evidence_spooled += spooled
            if spooled:
                return
        elif self.spool is not None and self.spool.put(item):
            return
        if len(self._pending) >= BACKLOG or self._stopping.is_set():
            self._overflow += 1
        else:
            self._pending.append(item)

    def stop(self) -> None:
        """Write what is queued, then end the child."""
        if not self._shipper.is_alive():
            return
        atexit.unregister(self.stop)
        deadline = time.monotonic() + _CHILD_STOP_S
        if self.spool is not None:
            self.spool.close()  # the child may now finish the newest file
        self._stopping.set()
        self._shipper.join(timeout=_CHILD_STOP_S)
        if not self._shipper.is_alive():
            self._pipe.close()  # the child's end-of-file: it writes what it has and ends
            self._child.join(timeout=max(0.0, deadline - time.monotonic()))
        if self._child.is_alive():  # stuck (a database that does not answer): what it holds is lost
            log.error("the decision writer did not finish within %g s: stopping it; decisions it "
                      "had not written are lost", _CHILD_STOP_S)
            self._child.kill()
            self._child.join()
            self._shipper.join()  # its send fails now
            self._pipe.close()
        self._settle()
        self._relay.stop()
        self._records.close()

    @property
    def written(self) -> int:
        return self._before[0] + self._counts[0]

    @property
    def dropped(self) -> int:
        return self._overflow + self._undelivered + self._before[1] + self._counts[1]

    @property
    def logged(self) -> int:
        return self._before[2] + self._counts[2]

    @property
    def log_errors(self) -> int:
        return self._before[3] + self._counts[3]

    @property
    def spool_damaged(self) -> int:
        return self._before[5] + self._counts[5]

    @property
    def spooled(self) -> int:
        """Decisions on the spool before their reply (the evidence lines after them left out)."""
        if self.spool is None:
            return 0
        with self._evidence_lock:
            return self.spool.appender.appended - self._evidence_spooled

    spool_failed = BatchWriter.spool_failed

    def _ship_loop(self) -> None:
        stopping = False
        while not stopping:
            stopping = self._stopping.wait(self._gather_s)
            batch = [self._pending.popleft() for _ in range(len(self._pending))]
            for at in range(0, len(batch), _PICKLE_AT_MOST):
                self._ship(batch[at:at + _PICKLE_AT_MOST])
            if self._drains and not stopping and not self._child.is_alive():
                self._replace()  # no send notices it: decisions go through the spool

    def _ship(self, batch: list[Any]) -> None:
        for _ in range(2):  # a dead child is replaced once (not at the stop), then the batch is dropped
            try:
                self._pipe.send(batch)
            except OSError:
                if self._stopping.is_set():
                    break
                self._replace()
            else:
                self._sent += len(batch)
                return
        self._undelivered += len(batch)

    def _spawn(self) -> None:
        receive, self._pipe = self._context.Pipe(duplex=False)
        self._child = self._context.Process(
            target=write_decisions, name="slurm-advisor decision writer", daemon=True,
            args=(self._url, self._log, receive, self._counts, self._records, log.getEffectiveLevel(),
                  (self.spool.reader.directory, self.spool.reader.name) if self._drains else None,
                  self._gather_s))
        self._child.start()
        receive.close()  # the child's copy is its only one: the pipe ends when our end closes

    def _replace(self) -> None:
        self._pipe.close()
        self._child.join(timeout=1.0)
        code = self._child.exitcode
        lost = self._settle()
        log.error("the decision writer process ended (exit code %s); %d decisions sent to it are "
                  "lost (those on the spool are not); starting another", code, lost)
        self.restarts += 1
        self._spawn()

    def _settle(self) -> int:
        """Fold an ended child's counts into the totals; how many decisions it took no account of."""
        counts = list(self._counts)
        lost = max(0, self._sent - counts[4])
        counts[1] += lost
        self._before = [a + b for a, b in zip(self._before, counts, strict=True)]
        self._counts[:] = [0] * _COUNTS
        self._sent = 0
        return lost


class _Relay(logging.Handler):
    """The child's log records, handled by the daemon's loggers as if logged there."""

    def emit(self, record: logging.LogRecord) -> None:
        logging.getLogger(record.name).handle(record)


class _ChildBatches(DecisionBatches):
    """The child's writer: the daemon's batches as they come, its counts published after each."""

    def __init__(self, store: Store | None, log_path: Path | None, counts: Any, spool: SpoolReader | None):
        # Idempotent: the spool may hold decisions a killed run (or a dead child) wrote already.
        super().__init__(store, log_path)
        if store is not None:
            self.write_spooled = lambda batch: store_decisions(store, batch, skip_stored=True)
        self._counts = counts
        self._unwritable = store is None  # the store would not open here: every batch is dropped
        self._reader = spool
        self._piped = 0

    def run(self, pipe: Any, poll_s: float) -> None:
        """Until the pipe ends (the daemon's stop or death), each time all that has arrived on the
        pipe and the spool, in transactions of at most ``BATCH``."""
        ended = False
        while not ended:
            batch: list[Any] = []
            try:
                if pipe.poll(poll_s if self._reader is not None else None):
                    batch.extend(pipe.recv())
                    while len(batch) < BATCH and pipe.poll():
                        batch.extend(pipe.recv())
            except EOFError:
                ended = True
            self._piped += len(batch)
            if self._reader is not None:
                self._drain(final=ended)
            if batch:
                self._taken(batch)
                self._write(batch)
            self._counts[:] = [self.written, self.dropped, self.logged, self.log_errors, self._piped,
                               0 if self._reader is None else self._reader.damaged]

    def _from_spool(self, final: bool) -> list[Any]:
        return self._reader.take(decision_of_line, final=final)

    def _release_spooled(self, last: bool) -> None:
        self._reader.release()
        if last:
            self._reader.close()

    def _write(self, batch: list[Any], *, spooled: bool = False) -> None:
        if self._unwritable:
            self.dropped += len(batch)
        else:
            super()._write(batch, spooled=spooled)


def write_decisions(url: str, log_path: Path | None, pipe: Any, counts: Any, records: Any, level: int,
                    spool: tuple[Path, str] | None = None, poll_s: float = GATHER_S) -> None:
    """The decision writer process's main: decisions from ``pipe`` and the spool (its directory
    and name) to the store at ``url``."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    root = logging.getLogger()
    root.addHandler(logging.handlers.QueueHandler(records))
    root.setLevel(level)
    try:
        store = Store.attach(url)
    except InputError as exc:
        log.error("the decision writer cannot open the store: %s; decisions go to the log only "
                  "(those on the spool stay there for the next start)", exc)
        store = None
    # Without a store the spool is left alone: draining it would drop what was acknowledged.
    reader = None if spool is None or store is None else SpoolReader(*spool)
    try:
        _ChildBatches(store, log_path, counts, reader).run(pipe, poll_s)
    finally:
        if store is not None:
            store.close()
