"""Items written to the store in batches from a thread (reports, outcomes; decisions where no
child process can open the store), optionally through a spool (daemon/spool.py): an item put
is then on disk before ``put`` returns, and the thread reads it back from there.
"""
from __future__ import annotations

import json
import logging
import queue
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from slurm_advisor.daemon.evidence import Recorded
from slurm_advisor.daemon.spool import SpoolChannel
from slurm_advisor.domain.codec import decision_from_dict, decision_to_dict
from slurm_advisor.domain.decision import Decision
from slurm_advisor.domain.speed_report import SpeedReport
from slurm_advisor.errors import InputError
from slurm_advisor.store import Store

log = logging.getLogger("slurm_advisor.daemon")
FLUSH_S = 0.5
GATHER_S = 0.05  # a batch takes what arrives this long after its first item: one commit, not one each
BATCH = 500
BACKLOG = 100_000  # beyond this (a database down for long) items are dropped and counted
_SPOOLED = object()  # in a BatchWriter's queue: "an item is on the spool", a wake-up


class BatchWriter:
    """Items queued by ``put`` (never blocking) and written ``write(batch) -> count`` in batches of
    up to 500, one transaction each; a batch takes what arrives within ``gather_s`` of its first
    item. A batch that fails is written item by item, so one bad row
    costs only itself; ``write`` None (no store) drops nothing and writes nothing.

    With a ``spool``, ``put`` appends the item there (on disk when ``put`` returns) and the queue
    only wakes the thread, which reads the spool back — at its start what a killed run left too —
    and writes it with ``write_spooled`` (which must skip what the store has: a replay)."""

    def __init__(self, write: Callable[[list[Any]], int] | None, *, what: str,
                 describe: Callable[[Any], str] = repr, gather_s: float = GATHER_S,
                 spool: SpoolChannel | None = None):
        self.write, self.what, self.describe = write, what, describe
        self.gather_s = gather_s
        self.spool = spool  # items acknowledged once on disk; None: in memory only
        self.write_spooled = write  # how items read back from the spool are written (idempotently)
        self._drains = False  # the spool opened: this writer drains it
        self.written = 0
        self.dropped = 0
        self._queue: queue.Queue[Any] = queue.Queue(maxsize=BACKLOG)
        self._thread = threading.Thread(target=self._run, name=f"{what}-writer", daemon=True)

    def start(self) -> None:
        # A spool that does not open (logged) counts every item in spool_failed, kept in memory.
        self._drains = self.spool is not None and self.spool.open()
        self._thread.start()

    def put(self, item: Any) -> None:
        """Queue ``item``: on the spool when there is one (it is on disk when this returns), else
        in memory."""
        spooled = self.spool is not None and self.spool.put(item)
        try:  # a spooled item only wakes the writer: it reads the item back from the spool
            self._queue.put_nowait(_SPOOLED if spooled else item)
        except queue.Full:
            self.dropped += not spooled

    def stop(self) -> None:
        """Write what is queued (and spooled), then end the thread."""
        if self._thread.is_alive():
            if self.spool is not None:
                self.spool.close()  # nothing is appended now: the writer may finish the last file
            self._queue.put(None)
            self._thread.join(timeout=30)

    def _run(self) -> None:
        stopping = False
        while not stopping:
            batch, stopping = self._gather()
            if self._drains:
                self._drain(final=stopping)
            if batch:
                self._taken(batch)
            self._write(batch)

    def _gather(self) -> tuple[list[Any], bool]:
        """What the queue holds within ``gather_s`` of its first item; whether the stop came."""
        batch: list[Any] = []
        try:
            item = self._queue.get(timeout=FLUSH_S)
            closes = time.monotonic() + self.gather_s
            while item is not None:
                if item is not _SPOOLED:
                    batch.append(item)
                if len(batch) >= BATCH:  # full: write it; the next item waits for the next batch
                    break
                item = self._queue.get(timeout=max(0.0, closes - time.monotonic()))
            return batch, item is None
        except queue.Empty:
            return batch, False

    def _drain(self, *, final: bool) -> None:
        """The spool's new items to the store in batches; its drained files deleted after. At the
        stop, everything it holds."""
        while True:
            items = self._from_spool(final)
            for at in range(0, len(items), BATCH):
                self._taken(items[at:at + BATCH])
                self._write(items[at:at + BATCH], spooled=True)
            self._release_spooled(final and not items)  # after the write: a file goes once in the store
            if not items or not final:
                return

    def _from_spool(self, final: bool) -> list[Any]:
        return self.spool.take(final=final)

    def _release_spooled(self, last: bool) -> None:
        self.spool.release()
        if last:
            self.spool.finished()

    @property
    def spooled(self) -> int:
        return 0 if self.spool is None else self.spool.appender.appended

    @property
    def spool_failed(self) -> int:
        return 0 if self.spool is None else self.spool.failed

    @property
    def spool_damaged(self) -> int:
        return 0 if self.spool is None else self.spool.reader.damaged

    def _taken(self, batch: list[Any]) -> None:
        """Called once per batch, before the store write (subclasses: a copy elsewhere)."""

    def _write(self, batch: list[Any], *, spooled: bool = False) -> None:
        """``spooled``: the items come from the spool, where a replay may hold some the store has
        (``write_spooled`` skips those); the rest from memory, where a stored id is an error."""
        write = self.write_spooled if spooled else self.write
        if not batch or write is None:
            return
        try:
            self.written += write(batch)
        except InputError as exc:  # the store's one-line form of any database failure
            if len(batch) == 1:
                self.dropped += 1
                log.error("dropped %s %s: %s", self.what, self.describe(batch[0]), exc)
                return
            # One bad row (say, a decision id seen before a clock step back) must not cost the
            # batch: write them one by one.
            log.warning("writing %d %ss one by one: %s", len(batch), self.what, exc)
            for item in batch:
                self._write([item], spooled=spooled)
        except Exception:  # a bug costs the batch, never the writer thread
            self.dropped += len(batch)
            log.exception("dropped %d %ss", len(batch), self.what)


class DecisionBatches(BatchWriter):
    """Decisions, and the evidence that follows each (:func:`write_decisions`), to the store and,
    when ``log`` names a file, one JSON line each appended to it (:func:`decision_line`; opened per
    batch, so a rotated log is followed)."""

    def __init__(self, store: Store | None, log: Path | None = None):
        super().__init__(None if store is None else lambda batch: store_decisions(store, batch), what="decision",
                         describe=lambda d: getattr(d, "id", None) or f"evidence of {d.decision_id}")
        self.log_path = log
        self.logged = 0
        self.log_errors = 0
        self.restarts = 0  # a thread is never replaced (the process writer's count)

    def _taken(self, batch: list[Any]) -> None:
        if self.log_path is None:
            return
        try:
            lines = "".join(decision_line(d).decode() for d in batch)
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            with self.log_path.open("a", encoding="utf-8") as out:
                out.write(lines)
        except (OSError, TypeError, ValueError) as exc:  # the log is a copy: never stop the writer
            self.log_errors += len(batch)
            log.error("decision log %s: %d decisions not logged: %s", self.log_path, len(batch), exc)
            return
        self.logged += len(batch)


def store_decisions(store: Store, batch: list[Decision | Recorded], *, skip_stored: bool = False) -> int:
    """The batch's decisions inserted, then the evidence that followed them applied to their rows
    (put after its decision, so in the same batch or a later one); returns the decisions written."""
    decisions = [item for item in batch if isinstance(item, Decision)]
    evidence = [(item.decision_id, item.evidence) for item in batch if isinstance(item, Recorded)]
    written = store.record_decisions(decisions, skip_stored=skip_stored) if decisions else 0
    if evidence:
        taken = store.record_evidence(evidence)
        if taken < len(evidence):  # its decision never reached the store (dropped, or kept in memory and lost)
            log.warning("%d of %d decisions' evidence found no stored decision", len(evidence) - taken, len(evidence))
    return written


def decision_line(item: Decision | Recorded) -> bytes:
    """A decision, or the evidence that follows it (``{"evidence_of": id, "evidence": ...}``), as
    its spool (and decision log) line."""
    whole = {"evidence_of": item.decision_id, "evidence": item.evidence} if isinstance(item, Recorded) \
        else decision_to_dict(item)
    return (json.dumps(whole, separators=(",", ":")) + "\n").encode()


def decision_of_line(line: bytes) -> Decision | Recorded:
    whole = json.loads(line)
    if "evidence_of" in whole:
        return Recorded(str(whole["evidence_of"]), dict(whole["evidence"]))
    return decision_from_dict(whole)


def report_line(item: tuple[SpeedReport, Any]) -> bytes:
    """A report (the daemon's report writer's item: the report, the snapshot) as its spool line;
    the snapshot stays in memory."""
    r = item[0]
    return (json.dumps([r.job_id, r.uid, r.iterations, r.seconds, r.window_end, r.decision_id, r.received_at],
                       separators=(",", ":"), allow_nan=False) + "\n").encode()


def report_of_line(line: bytes) -> tuple[SpeedReport, None]:
    job_id, uid, iterations, seconds, window_end, decision_id, received_at = json.loads(line)
    return SpeedReport(str(job_id), int(uid), float(iterations), float(seconds), float(window_end),
                       decision_id, float(received_at)), None
