"""Which nodes could hold the rest of a job ("whole"), followed task by task without a pass
over every node (numpy; no torch here).

A node is whole while its free capacity covers what the job still needs. The tasks' demands
are known before the first is placed, so the job's remaining demand after each task is a known
non-increasing sequence, and a node whose free capacity does not change turns whole at a task
count found by binary search (by its closed form on large clusters, ``_count_above``) and stays
whole. Only the nodes the job's tasks take change their free capacity: each is searched again
when it is taken. Every answer equals the direct test ``(free >= remaining).all(axis=1)``.
"""
from __future__ import annotations

import bisect

import numpy as np

_SEARCH_UP_TO = 2048  # nodes (see _count_above)


class WholeNodes:
    def __init__(self, free: np.ndarray, total: np.ndarray, demands: list[np.ndarray]):
        """``free`` [nodes, 3] now, ``total`` the job's demand, ``demands`` each task's in order."""
        remaining = [total.copy()]
        for d in demands:  # as the state subtracts them, in float64
            remaining.append(remaining[-1] - d)
        self.remaining = np.array(remaining)              # [tasks + 1, 3], non-increasing
        self._desc = [(-self.remaining[:, r]).tolist() for r in range(3)]  # ascending, for bisect
        self.when = np.max([_count_above(free[:, r], self.remaining[:, r]) for r in range(3)], axis=0)
        self._by_when = np.argsort(self.when.astype(np.uint16), kind="stable")  # a radix sort
        self._bounds = np.searchsorted(self.when[self._by_when], np.arange(len(remaining) + 1))
        self._moved = np.zeros(len(free), dtype=bool)     # taken nodes: searched again, listed in _extra
        self._extra: dict[int, list[int]] = {}
        self.whole = self.when == 0

    def turn_whole(self, placed: int, i: int, free_i: list[float]) -> np.ndarray:
        """After the ``placed``-th task took node ``i`` (now ``free_i``): the nodes whose "whole"
        changed (it is updated in ``self.whole``)."""
        was = bool(self.whole[i])
        self._moved[i] = True
        when = max(placed, max(bisect.bisect_left(self._desc[r], -free_i[r]) for r in range(3)))
        self.when[i] = when
        if when > placed:
            self._extra.setdefault(when, []).append(i)
        bucket = self._by_when[self._bounds[placed]:self._bounds[placed + 1]]
        turned = [bucket[~self._moved[bucket]]]  # free unchanged since the job began
        extra = [j for j in self._extra.pop(placed, ()) if j != i and self.when[j] == placed]
        if extra:
            turned.append(np.array(extra, dtype=np.int64))
        if (when == placed) != was:
            turned.append(np.array([i], dtype=np.int64))
        out = np.concatenate(turned) if len(turned) > 1 else turned[0]
        self.whole[out] = True
        self.whole[i] = when == placed
        return out


def _count_above(free: np.ndarray, remaining: np.ndarray) -> np.ndarray:
    """Per node, how many of the job's remaining demands (non-increasing) exceed its free
    capacity: ``searchsorted(-remaining, -free, "left")``, the task count at which it turns whole.

    By arithmetic when every value is a whole number (as demands and free capacity are): the
    remaining demands fall in runs of equal steps (the PS tasks', then the workers'), and within a
    run the count is a ceiling division: a few vector passes, which beat numpy's searchsorted
    of every node from a few thousand nodes. Up to ``_SEARCH_UP_TO`` nodes the search is the
    faster (the passes have a fixed cost)."""
    if len(free) <= _SEARCH_UP_TO:
        return np.searchsorted(-remaining, -free, "left")
    column = np.ascontiguousarray(free)
    whole = column.astype(np.int64)
    rem = remaining.astype(np.int64)
    if not (np.array_equal(rem, remaining) and np.array_equal(whole, column)):
        return np.searchsorted(-remaining, -free, "left")
    out = np.zeros(len(whole), dtype=np.int64)
    levels, a = rem.tolist(), 0
    while a < len(levels):
        step = levels[a] - levels[a + 1] if a + 1 < len(levels) else 0
        b = a + 1
        while b < len(levels) and levels[b - 1] - levels[b] == step:
            b += 1
        # levels[a:b] = levels[a] - j * step: how many j in [0, b - a) with that above free
        above = levels[a] - whole
        if step:
            out += np.clip(-(-above // step), 0, b - a)
        else:
            out += np.where(above > 0, b - a, 0)
        a = b
    return out
