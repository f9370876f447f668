"""One backfill pass: per-node plans from time limits, reservations that block whole nodes."""
import numpy as np
import pytest

from slurm_advisor.domain import ClusterSnapshot, Job, Node, Resources
from slurm_advisor.sim import backfill
from slurm_advisor.sim.backfill import BackfillPass, RunningEnds
from slurm_advisor.sim.scheduler import SchedulerConfig

NODES = (Node("n1", 8, 2, 32_000), Node("n2", 8, 2, 32_000), Node("n3", 8, 2, 32_000))
GPU = np.array([2, 1, 8_000])


def job(n_gpus: int) -> Job:
    return Job("j", "x", 0, n_gpus, Resources(), Resources(2, 1, 8_000), 10.0)


def running(*jobs: tuple[str, float, dict[int, int]]) -> tuple[np.ndarray, RunningEnds]:
    """(id, planned end, {node index: GPUs}) -> the free array and the planned ends."""
    free = ClusterSnapshot.empty(NODES).free_array().copy()
    ends = RunningEnds()
    for job_id, end, per_node in jobs:
        idx = np.array(list(per_node), dtype=np.int64)
        amounts = np.array([GPU * g for g in per_node.values()], dtype=np.int64)
        np.subtract.at(free, idx, amounts)
        ends.add(job_id, end, idx, amounts)
    return free, ends


def test_a_reservation_is_the_first_planned_end_that_frees_enough_on_the_nodes() -> None:
    free, ends = running(("a", 30.0, {0: 2}), ("b", 10.0, {1: 1}), ("c", 20.0, {1: 1, 2: 2}))
    plan = BackfillPass(ClusterSnapshot.empty(NODES).layout, free, ends, now=0.0, window_s=1e9)
    # 4 GPUs: n2 is free at 20, n3 at 20 too; n1 only at 30
    assert plan.reserve(job(4), 50.0, None, 0.0) == 20.0
    assert plan.reservations[0].nodes.tolist() == [1, 2] and plan.reservations[0].end == 70.0


def test_per_node_not_cluster_wide() -> None:
    # 2 GPUs free in all at t=0 (one on n1, one on n2), but a 2-GPU one-node job needs them on
    # one node: the cluster-wide sum would say "now"; per node it is when n1 empties, at 100
    one_node = Job("j", "x", 0, 1, Resources(), Resources(4, 2, 8_000), 10.0)
    free, ends = running(("a", 100.0, {0: 1}), ("b", 300.0, {1: 1}), ("c", 400.0, {2: 2}))
    plan = BackfillPass(ClusterSnapshot.empty(NODES).layout, free, ends, now=0.0, window_s=1e9)
    assert plan.room_now(10.0)[0][:, 1].sum() == 2
    assert plan.reserve(one_node, 50.0, None, 0.0) == 100.0


def test_a_reservation_blocks_its_nodes_whole_during_its_window() -> None:
    free, ends = running(("a", 100.0, {0: 2, 1: 1}))
    plan = BackfillPass(ClusterSnapshot.empty(NODES).layout, free, ends, now=0.0, window_s=1e9)
    assert plan.reserve(job(4), 50.0, None, 0.0) == 100.0     # n1 + n2 from 100 to 150
    room, masked = plan.room_now(99.5)                      # a job ending before 100 may use them
    assert not masked and room[:, 1].tolist() == [0, 1, 2]
    room, masked = plan.room_now(100.0)                     # one ending at 100 may not (Slurm: <=)
    assert masked and room[:, 1].tolist() == [0, 0, 2]


def test_later_jobs_are_planned_around_earlier_reservations() -> None:
    free, ends = running(("a", 100.0, {0: 2, 1: 2, 2: 2}))
    plan = BackfillPass(ClusterSnapshot.empty(NODES).layout, free, ends, now=0.0, window_s=1e9)
    assert plan.reserve(job(6), 50.0, None, 0.0) == 100.0
    assert plan.reserve(job(2), 10.0, None, 0.0) == 150.0   # after the first reservation's window


def test_jobs_started_in_the_pass_release_at_their_limit() -> None:
    free, ends = running(("a", 100.0, {0: 2}))
    plan = BackfillPass(ClusterSnapshot.empty(NODES).layout, free, ends, now=0.0, window_s=1e9)
    plan.started(40.0, np.array([1, 2]), np.array([GPU * 2, GPU * 2]))
    assert plan.reserve(job(4), 10.0, None, 0.0) == 40.0


def test_no_reservation_beyond_the_window() -> None:
    free, ends = running(("a", 5000.0, {0: 2, 1: 2, 2: 2}))
    plan = BackfillPass(ClusterSnapshot.empty(NODES).layout, free, ends, now=0.0, window_s=3600.0)
    assert plan.reserve(job(2), 10.0, None, 0.0) is None and plan.reservations == []
    wide = BackfillPass(ClusterSnapshot.empty(NODES).layout, free, ends, now=0.0, window_s=1e9)
    assert wide.reserve(job(2), 10.0, None, 0.0) == 5000.0


def test_an_identical_earlier_job_bounds_the_search() -> None:
    free, ends = running(("a", 100.0, {0: 2}), ("b", 200.0, {1: 2}))
    plan = BackfillPass(ClusterSnapshot.empty(NODES).layout, free, ends, now=0.0, window_s=1e9)
    assert plan.reserve(job(2), 10.0, None, 150.0) == 200.0   # 0 and 100 are not even tried


def test_a_shape_that_fits_nowhere_is_still_searched_with_a_shorter_limit() -> None:
    # n1, n2 free at 100, n3 at 200; the 6-GPU job is planned on all three at 200-250
    free, ends = running(("a", 100.0, {0: 2, 1: 2}), ("b", 200.0, {2: 2}))
    plan = BackfillPass(ClusterSnapshot.empty(NODES).layout, free, ends, now=0.0, window_s=220.0)
    assert plan.reserve(job(6), 50.0, None, 0.0) == 200.0
    assert plan.reserve(job(2), 120.0, None, 0.0) is None   # 100-220 overlaps it; 250 is too late
    assert plan.reserve(job(2), 90.0, None, 0.0) == 100.0   # 100-190 does not
    assert plan.reserve(job(2), 150.0, None, 0.0) is None


class _Forgets(dict):
    """A memo that keeps nothing: every search runs in full."""

    def __setitem__(self, key, value) -> None:
        pass


@pytest.mark.parametrize("seed", range(4))
def test_the_shortcuts_plan_exactly_as_the_full_search(seed: int, monkeypatch) -> None:
    # the free capacity built once per pass, the shapes whose counts fit nowhere skipped: the
    # same reservations and starts as the chunked search with nothing skipped
    from test_scheduling import _random_trace, run
    nodes, jobs = _random_trace(seed, n=60, early=True)
    config = SchedulerConfig(bf_interval_s=2.0, eager_plans=True, bf_window_s=600.0)
    fast, fast_result = run(nodes, jobs, config=config)
    init = BackfillPass.__init__

    def full_search(self, *args, **kwargs):
        init(self, *args, **kwargs)
        self._no_start = _Forgets()

    monkeypatch.setattr(BackfillPass, "__init__", full_search)
    monkeypatch.setattr(backfill, "_CELLS", 8)  # two candidates a chunk on 4 nodes, never one profile
    slow, slow_result = run(nodes, jobs, config=config)
    assert fast.planned and fast.planned == slow.planned
    assert fast_result.records == slow_result.records
