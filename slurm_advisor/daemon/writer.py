"""Decisions go to the store from a background thread: a request never waits on the database."""
from __future__ import annotations

import logging
import queue
import threading

from slurm_advisor.domain.decision import Decision
from slurm_advisor.errors import InputError
from slurm_advisor.store import Store

log = logging.getLogger("slurm_advisor.daemon")
_FLUSH_S = 0.5
_BATCH = 500
_BACKLOG = 100_000  # beyond this (a database down for long) decisions are dropped and counted


class DecisionWriter:
    def __init__(self, store: Store | None):
        self.store = store
        self.written = 0
        self.dropped = 0
        self._queue: queue.Queue[Decision | None] = queue.Queue(maxsize=_BACKLOG)
        self._thread = threading.Thread(target=self._run, name="decision-writer", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def put(self, decision: Decision) -> None:
        try:
            self._queue.put_nowait(decision)
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
            batch: list[Decision] = []
            try:
                item = self._queue.get(timeout=_FLUSH_S)
                while item is not None and len(batch) < _BATCH:
                    batch.append(item)
                    item = self._queue.get_nowait()
                stopping = item is None
            except queue.Empty:
                pass
            self._write(batch)

    def _write(self, batch: list[Decision]) -> None:
        if not batch or self.store is None:
            return
        try:
            self.written += self.store.record_decisions(batch)
        except InputError as exc:  # the store's one-line form of any database failure
            if len(batch) == 1:
                self.dropped += 1
                log.error("dropped decision %s: %s", batch[0].id, exc)
                return
            # One bad row (say, a decision id seen before a clock step back) must not cost the
            # batch: write them one by one.
            log.warning("writing %d decisions one by one: %s", len(batch), exc)
            for decision in batch:
                self._write([decision])
