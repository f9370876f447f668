"""Decisions, reports and outcomes go to the store in the background: a request never waits on
the database.

Reports and outcomes are written from threads. Decisions, one per request, are written from a
child process (:func:`decision_writer`): a writer thread shares the GIL with the request loop,
and while it encoded and inserted a batch every request in flight ran at half speed (at 1,000
nodes the round trip's p99 was 6.5-15.6 ms with the thread, 2.7-3.3 ms with the child:
benchmarks/advice_latency.py, README "The live path"). The child has the second core to
itself; the request loop only appends to a deque.
"""
from __future__ import annotations

import atexit
import json
import logging
import logging.handlers
import multiprocessing
import queue
import signal
import threading
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

from slurm_advisor.domain.codec import decision_to_dict
from slurm_advisor.errors import InputError
from slurm_advisor.store import Store

log = logging.getLogger("slurm_advisor.daemon")
_FLUSH_S = 0.5
_GATHER_S = 0.05  # a batch takes what arrives this long after its first item: one commit, not one each
_BATCH = 500
_BACKLOG = 100_000  # beyond this (a database down for long) items are dropped and counted
_PICKLE_AT_MOST = 20  # decisions per message to the decision writer process (~0.1 ms to pickle)
_CHILD_STOP_S = 20.0  # the decision writer's time to write what is queued at the stop (systemd waits 30 s)


class BatchWriter:
    """Items queued by ``put`` (never blocking) and written ``write(batch) -> count`` in batches of
    up to 500, one transaction each; a batch takes what arrives within ``gather_s`` of its first
    item. A batch that fails is written item by item, so one bad row
    costs only itself; ``write`` None (no store) drops nothing and writes nothing."""

    def __init__(self, write: Callable[[list[Any]], int] | None, *, what: str,
                 describe: Callable[[Any], str] = repr, gather_s: float = _GATHER_S):
        self.write, self.what, self.describe = write, what, describe
        self.gather_s = gather_s
        self.written = 0
        self.dropped = 0
        self._queue: queue.Queue[Any] = queue.Queue(maxsize=_BACKLOG)
        self._thread = threading.Thread(target=self._run, name=f"{what}-writer", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def put(self, item: Any) -> None:
        try:
            self._queue.put_nowait(item)
        except queue.Full:
            self.dropped += 1

    def stop(self) -> None:
        """Write what is queued, then end the thread."""
        if self._thread.is_alive():
            self._queue.put(None)
            self._thread.join(timeout=30)

    def _run(self) -> None:
        stopping = False
        while not stopping:
            batch: list[Any] = []
            try:
                item = self._queue.get(timeout=_FLUSH_S)
                closes = time.monotonic() + self.gather_s
                while item is not None:
                    batch.append(item)
                    if len(batch) >= _BATCH:  # full: write it; the next item waits for the next batch
                        break
                    item = self._queue.get(timeout=max(0.0, closes - time.monotonic()))
                stopping = item is None
            except queue.Empty:
                pass
            if batch:
                self._taken(batch)
            self._write(batch)

    def _taken(self, batch: list[Any]) -> None:
        """Called once per batch, before the store write (subclasses: a copy elsewhere)."""

    def _write(self, batch: list[Any]) -> None:
        if not batch or self.write is None:
            return
        try:
            self.written += self.write(batch)
        except InputError as exc:  # the store's one-line form of any database failure
            if len(batch) == 1:
                self.dropped += 1
                log.error("dropped %s %s: %s", self.what, self.describe(batch[0]), exc)
                return
            # One bad row (say, a decision id seen before a clock step back) must not cost the
            # batch: write them one by one.
            log.warning("writing %d %ss one by one: %s", len(batch), self.what, exc)
            for item in batch:
                self._write([item])
        except Exception:  # a bug costs the batch, never the writer thread
            self.dropped += len(batch)
            log.exception("dropped %d %ss", len(batch), self.what)


class DecisionBatches(BatchWriter):
    """Decisions to the store and, when ``log`` names a file, one JSON line each appended to it
    (``codec.decision_to_dict``; opened per batch, so a rotated log is followed)."""

    def __init__(self, store: Store | None, log: Path | None = None):
        super().__init__(None if store is None else store.record_decisions, what="decision",
                         describe=lambda d: d.id)
        self.log_path = log
        self.logged = 0
        self.log_errors = 0
        self.restarts = 0  # a thread is never replaced (the process writer's count)

    def _taken(self, batch: list[Any]) -> None:
        if self.log_path is None:
            return
        try:
            lines = "".join(json.dumps(decision_to_dict(d), separators=(",", ":")) + "\n" for d in batch)
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            with self.log_path.open("a", encoding="utf-8") as out:
                out.write(lines)
        except (OSError, TypeError, ValueError) as exc:  # the log is a copy: never stop the writer
            self.log_errors += len(batch)
            log.error("decision log %s: %d decisions not logged: %s", self.log_path, len(batch), exc)
            return
        self.logged += len(batch)


def decision_writer(store: Store | None, log: Path | None = None) -> DecisionBatches | ProcessDecisionWriter:
    """The daemon's decision writer: a child process for a store another process can open; a
    thread, as reports have, for SQLite in memory (only this process's pool sees it) or no store."""
    url = None if store is None else store.url_for_another_process()
    return DecisionBatches(store, log) if url is None else ProcessDecisionWriter(url, log)


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
    """

    def __init__(self, url: str, log: Path | None = None, gather_s: float = _GATHER_S):
        self._url, self._log, self._gather_s = url, log, gather_s
        self._context = multiprocessing.get_context("spawn")  # not fork: the daemon has threads, torch
        self._counts = self._context.Array("q", 4, lock=False)  # the child's written, dropped, logged, log_errors
        self._before = [0, 0, 0, 0]  # the same for children that ended
        self._overflow = 0           # decisions put with _BACKLOG waiting, or after the stop
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
        self._records = self._context.Queue()
        self._relay = logging.handlers.QueueListener(self._records, _Relay())
        self._relay.start()
        self._spawn()
        self._shipper.start()
        # Before multiprocessing's own exit handler (atexit runs last in, first out), which would
        # wait for a child that ends only when our end of the pipe closes.
        atexit.register(self.stop)

    def put(self, item: Any) -> None:
        if len(self._pending) >= _BACKLOG or self._stopping.is_set():
            self._overflow += 1
        else:
            self._pending.append(item)

    def stop(self) -> None:
        """Write what is queued, then end the child."""
        if not self._shipper.is_alive():
            return
        atexit.unregister(self.stop)
        deadline = time.monotonic() + _CHILD_STOP_S
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

    def _ship_loop(self) -> None:
        stopping = False
        while not stopping:
            stopping = self._stopping.wait(self._gather_s)
            batch = [self._pending.popleft() for _ in range(len(self._pending))]
            for at in range(0, len(batch), _PICKLE_AT_MOST):
                self._ship(batch[at:at + _PICKLE_AT_MOST])

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
            args=(self._url, self._log, receive, self._counts, self._records, log.getEffectiveLevel()))
        self._child.start()
        receive.close()  # the child's copy is its only one: the pipe ends when our end closes

    def _replace(self) -> None:
        self._pipe.close()
        self._child.join(timeout=1.0)
        code = self._child.exitcode
        lost = self._settle()
        log.error("the decision writer process ended (exit code %s); %d decisions sent to it are "
                  "lost; starting another", code, lost)
        self.restarts += 1
        self._spawn()

    def _settle(self) -> int:
        """Fold an ended child's counts into the totals; how many decisions it took no account of."""
        counts = list(self._counts)
        lost = max(0, self._sent - counts[0] - counts[1])
        counts[1] += lost
        self._before = [a + b for a, b in zip(self._before, counts, strict=True)]
        self._counts[:] = [0, 0, 0, 0]
        self._sent = 0
        return lost


class _Relay(logging.Handler):
    """The child's log records, handled by the daemon's loggers as if logged there."""

    def emit(self, record: logging.LogRecord) -> None:
        logging.getLogger(record.name).handle(record)


class _ChildBatches(DecisionBatches):
    """The child's writer: the daemon's batches as they come, its counts published after each."""

    def __init__(self, store: Store | None, log_path: Path | None, counts: Any):
        super().__init__(store, log_path)
        self._counts = counts
        self._unwritable = store is None  # the store would not open here: every batch is dropped

    def run(self, pipe: Any) -> None:
        """Until the pipe ends (the daemon's stop or death), each time all that has arrived in one
        transaction of at most ``_BATCH``."""
        ended = False
        while not ended:
            batch: list[Any] = []
            try:
                batch.extend(pipe.recv())
                while len(batch) < _BATCH and pipe.poll():
                    batch.extend(pipe.recv())
            except EOFError:
                ended = True
            if batch:
                self._taken(batch)
                self._write(batch)
                self._counts[:] = [self.written, self.dropped, self.logged, self.log_errors]

    def _write(self, batch: list[Any]) -> None:
        if self._unwritable:
            self.dropped += len(batch)
        else:
            super()._write(batch)


def write_decisions(url: str, log_path: Path | None, pipe: Any, counts: Any, records: Any, level: int) -> None:
    """The decision writer process's main: decisions from ``pipe`` to the store at ``url``."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    root = logging.getLogger()
    root.addHandler(logging.handlers.QueueHandler(records))
    root.setLevel(level)
    try:
        store = Store.attach(url)
    except InputError as exc:
        log.error("the decision writer cannot open the store: %s; decisions go to the log only", exc)
        store = None
    try:
        _ChildBatches(store, log_path, counts).run(pipe)
    finally:
        if store is not None:
            store.close()
