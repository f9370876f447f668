"""Decisions, reports and outcomes go to the store from background threads: a request never
waits on the database."""
from __future__ import annotations

import json
import logging
import queue
import threading
import time
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


class DecisionWriter(BatchWriter):
    """Decisions to the store and, when ``log`` names a file, one JSON line each appended to it
    (``codec.decision_to_dict``; opened per batch, so a rotated log is followed)."""

    def __init__(self, store: Store | None, log: Path | None = None):
        super().__init__(None if store is None else store.record_decisions, what="decision",
                         describe=lambda d: d.id)
        self.log_path = log
        self.logged = 0
        self.log_errors = 0

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
