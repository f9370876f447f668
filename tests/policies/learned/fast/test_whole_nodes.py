"""WholeNodes answers as the direct test ``(free >= remaining).all(axis=1)`` after every task."""
from __future__ import annotations

import numpy as np
import pytest

from slurm_advisor.policies.learned.fast.whole_nodes import WholeNodes


@pytest.mark.parametrize("seed", range(20))
def test_whole_nodes_equal_the_direct_test(seed) -> None:
    rng = np.random.default_rng(seed)
    n, tasks = int(rng.integers(1, 60)), int(rng.integers(1, 30))
    free = rng.integers(0, 9, size=(n, 3)).astype(np.float64) * (4.0, 1.0, 8000.0)
    ps, worker = rng.integers(0, 3, 3) * (4.0, 0.0, 8000.0), rng.integers(0, 3, 3) * (4.0, 1.0, 8000.0)
    demands = [ps] * int(rng.integers(0, tasks)) + [worker] * tasks
    remaining = np.sum(demands, axis=0)
    nodes = WholeNodes(free, remaining, demands)
    np.testing.assert_array_equal(nodes.whole, (free >= remaining).all(axis=1))
    for placed, d in enumerate(demands, start=1):
        fits = np.flatnonzero((free >= d).all(axis=1))
        i = int(rng.choice(fits)) if len(fits) else int(rng.integers(n))
        before = nodes.whole.copy()
        free[i] -= d
        remaining = remaining - d
        turned = nodes.turn_whole(placed, i, free[i].tolist())
        expected = (free >= remaining).all(axis=1)
        np.testing.assert_array_equal(nodes.whole, expected)
        assert set(np.flatnonzero(before != expected)) <= set(turned.tolist()) <= set(
            np.flatnonzero(before != expected)) | {i}


@pytest.mark.parametrize("seed", range(10))
def test_the_task_count_at_which_a_node_turns_whole_is_searchsorteds(seed) -> None:
    """The arithmetic count (runs of equal steps, ceiling divisions) against numpy's search,
    on whole numbers of any size and on values that are not whole (the search itself)."""
    from slurm_advisor.policies.learned.fast.whole_nodes import _count_above

    rng = np.random.default_rng(seed)
    n = int(rng.integers(2049, 3000))  # above _SEARCH_UP_TO: the arithmetic
    for scale in (1.0, 1.5):
        free = rng.integers(-5, 400_000, n).astype(np.float64) * scale
        steps = [int(rng.integers(0, 60_000))] * int(rng.integers(0, 5)) + [int(rng.integers(0, 60_000))] * int(
            rng.integers(1, 30)) + [int(rng.integers(0, 9))] * int(rng.integers(0, 3))
        remaining = np.cumsum([0] + steps[::-1])[::-1].astype(np.float64) * scale + float(rng.integers(0, 9))
        np.testing.assert_array_equal(_count_above(free, remaining), np.searchsorted(-remaining, -free, "left"))
