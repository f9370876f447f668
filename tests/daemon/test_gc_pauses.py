"""Full garbage collections kept out of the request path: what a refresh leaves alive is frozen."""
from __future__ import annotations

import gc
import weakref

from daemon_helpers import make_daemon

from slurm_advisor.daemon.gc_pauses import FrozenHeap


class Node:
    """An object that can sit in a reference cycle and be watched through a weak reference."""

    def __init__(self):
        self.other = None


def cycle() -> weakref.ref:
    a, b = Node(), Node()
    a.other, b.other = b, a
    return weakref.ref(a)


def test_a_refresh_freezes_what_is_alive_and_a_due_full_collection_frees_frozen_cycles() -> None:
    now = [0.0]
    heap = FrozenHeap(full_every_s=3600.0, clock=lambda: now[0])
    try:
        garbage = cycle()  # unreachable already, but a cycle: only a collection frees it
        heap.after_refresh()
        assert gc.get_freeze_count() > 0
        gc.collect()
        assert garbage() is not None  # frozen: the collections between full ones never walk it
        now[0] = 1800.0
        heap.after_refresh()
        assert garbage() is not None and heap.full_collections == 0
        now[0] = 3600.0
        heap.after_refresh()
        assert garbage() is None and heap.full_collections == 1
        assert gc.get_freeze_count() > 0  # and what is alive is frozen again
    finally:
        heap.release()
    assert gc.get_freeze_count() == 0


def test_a_serving_daemon_keeps_the_heap_frozen_and_gives_it_back_when_it_stops(tmp_path) -> None:
    daemon = make_daemon(tmp_path, store=False)
    daemon.start()
    try:
        assert gc.get_freeze_count() > 0
    finally:
        daemon.stop()
    assert gc.get_freeze_count() == 0
