"""Keeping Python's full garbage collections out of the request path.

A full (generation 2) collection walks every object the interpreter tracks. At 10,000 nodes
the snapshot, its running jobs and the recent decisions are hundreds of thousands, and one collection
held the GIL for 160-210 ms (``benchmarks/advice_latency.py`` at 10,000 nodes, 2026-12-06): a
request that met one kept slurmctld waiting that long, inside its locks. Nearly all of those
objects live for a refresh or longer. So after each refresh the daemon moves every object alive
into the permanent generation (``gc.freeze``: a list splice, no walk), and collections walk only
what was made since. Frozen objects are still freed by reference counting; only cyclic garbage
made before a freeze waits, for a full collection every ``full_every_s`` in the refresh thread
(one such pause an hour instead of one every few hundred requests), and for ``release`` at stop.
"""
from __future__ import annotations

import gc
import time
from collections.abc import Callable


class FrozenHeap:
    def __init__(self, full_every_s: float = 3600.0, clock: Callable[[], float] = time.monotonic):
        self.full_every_s = full_every_s
        self._clock = clock
        self._last_full = clock()
        self.full_collections = 0

    def after_refresh(self) -> None:
        """Freeze what is alive now; first collect everything when the last full collection is
        ``full_every_s`` old."""
        now = self._clock()
        if now - self._last_full >= self.full_every_s:
            gc.unfreeze()
            gc.collect()
            self._last_full = now
            self.full_collections += 1
        gc.freeze()

    @staticmethod
    def release() -> None:
        """Give every frozen object back to the collector (the daemon stops; its process goes on)."""
        gc.unfreeze()
