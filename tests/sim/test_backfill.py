"""One backfill pass: per-node plans from time limits, reservations that block whole nodes, and the
rules of Slurm 22.05's planner (select/cons_common/job_test.c ``_will_run_test``, sched/backfill/
backfill.c ``_attempt_backfill``), each case derived from that code."""
import numpy as np
import pytest

from slurm_advisor.domain import ClusterSnapshot, Job, Node, Resources
from slurm_advisor.sim import backfill
from slurm_advisor.sim.backfill import BackfillPass, RunningEnds
from slurm_advisor.sim.scheduler import SchedulerConfig
from slurm_advisor.slurm.release import Release

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


def plan_for(*jobs, epoch: float = 0.0, window: float = 1e9, resolution: float = 1.0) -> BackfillPass:
    free, ends = running(*jobs)
    return BackfillPass(ClusterSnapshot.empty(NODES).layout, free, ends, now=0.0, window_s=window,
                        resolution_s=resolution, epoch_s=epoch)


def test_will_run_removes_the_jobs_ending_in_the_first_window_together() -> None:
    # _will_run_test: the first batch runs to the 30-s barrier after the first end (10 -> 30)
    # plus 30 s; the start is the *last* removed job's end. 4 GPUs fit once b and c end (20),
    # but a (30) is in the same batch: Slurm plans the job at 30, on the nodes free then.
    plan = plan_for(("a", 30.0, {0: 2}), ("b", 10.0, {1: 1}), ("c", 20.0, {1: 1, 2: 2}))
    assert plan.reserve(job(4), 50.0, None) == 30.0
    assert plan.reservations[0].start == 30.0 and plan.reservations[0].end == 80.0


def test_the_batches_are_aligned_on_the_wall_clock() -> None:
    # ``delta = end_time % time_window``: the barrier is a multiple of 30 s of the Unix clock.
    # a ends at 10, b at 62. Simulated 0 at a multiple of 30: barrier 30, batch up to 60, the
    # job starts at 10 on n1. 25 s later on the clock: barrier 35, batch up to 65, b is in it.
    jobs = (("a", 10.0, {0: 2}), ("b", 62.0, {1: 2}), ("c", 1000.0, {2: 2}))
    assert plan_for(*jobs).reserve(job(2), 50.0, None) == 10.0
    assert plan_for(*jobs, epoch=25.0).reserve(job(2), 50.0, None) == 62.0


def test_each_later_window_is_twice_as_long() -> None:
    # batch 1 to 30 + 30 (a); then time_window doubles: batch 2 to 30 + 60 takes b (70) and
    # c (85). The two nodes are free at 70, the plan is at 85.
    plan = plan_for(("a", 10.0, {0: 2}), ("b", 70.0, {1: 2}), ("c", 85.0, {2: 2}))
    assert plan.reserve(job(4), 50.0, None) == 85.0


def test_jobs_on_nodes_the_job_cannot_use_are_skipped() -> None:
    # "r" is planned on n1 from 25 (x's end) for 1000 s, so the next job may not use n1. x,
    # on n1 only, is skipped: it sets no barrier. From y's end (70): barrier 90, batch to 120,
    # which takes z (100). Had x set it (barrier 30), y alone would be the second batch: 70.
    plan = plan_for(("x", 25.0, {0: 1}), ("y", 70.0, {1: 2}), ("z", 100.0, {2: 2}))
    two_gpus_one_node = Job("j", "x", 0, 1, Resources(), Resources(4, 2, 8_000), 10.0)
    assert plan.reserve(two_gpus_one_node, 1000.0, None) == 25.0
    assert plan.reservations[0].nodes.tolist() == [0]
    assert plan.reserve(two_gpus_one_node, 50.0, None) == 100.0


def test_a_clash_with_a_reservation_is_retried_from_the_plan_then_after_the_reservation() -> None:
    # "r" (2 GPUs on one node) is planned on n1 at 55 (x and x2 end in one batch) until 105.
    # The next job's window [0, 50] misses r's, so it may use n1: will-run plans it on n1 at
    # 55, which clashes with r (_test_resv_overlap): TRY_LATER from 55 without n1 gives 200
    # (y's end), after later_start (r's end, 105): TRY_LATER from 105, with n1, gives 105.
    plan = plan_for(("x", 25.0, {0: 1}), ("x2", 55.0, {0: 1}), ("y", 200.0, {1: 2}), ("z", 300.0, {2: 2}))
    two_gpus_one_node = Job("j", "x", 0, 1, Resources(), Resources(4, 2, 8_000), 10.0)
    assert plan.reserve(two_gpus_one_node, 50.0, None) == 55.0
    assert plan.reserve(two_gpus_one_node, 50.0, None) == 105.0
    assert [r.nodes.tolist() for r in plan.reservations] == [[0], [0]]


def test_reservations_start_and_end_on_bf_resolution_slots() -> None:
    # _attempt_backfill rounds start and end_reserve down to bf_resolution (60 s by default):
    # planned at 100 for 50 s, the job holds n1 + n2 from 60 to 120 in the map. So a job
    # whose limit ends at 70 may not use them now, though it would end before 100.
    plan = plan_for(("a", 100.0, {0: 2, 1: 1}), resolution=60.0)
    assert plan.reserve(job(4), 50.0, None) == 100.0
    assert (plan.reservations[0].start, plan.reservations[0].end) == (60.0, 120.0)
    assert plan.room_now(59.0)[1] is False and plan.room_now(70.0)[1] is True


def test_per_node_not_cluster_wide() -> None:
    # 2 GPUs free in all at t=0 (one on n1, one on n2), but a 2-GPU one-node job needs them on
    # one node: the cluster-wide sum would say "now"; per node it is when n1 empties, at 100
    one_node = Job("j", "x", 0, 1, Resources(), Resources(4, 2, 8_000), 10.0)
    plan = plan_for(("a", 100.0, {0: 1}), ("b", 300.0, {1: 1}), ("c", 400.0, {2: 2}))
    assert plan.room_now(10.0)[0][:, 1].sum() == 2
    assert plan.reserve(one_node, 50.0, None) == 100.0


def test_a_reservation_blocks_its_nodes_whole_during_its_window() -> None:
    plan = plan_for(("a", 100.0, {0: 2, 1: 1}))
    assert plan.reserve(job(4), 50.0, None) == 100.0     # n1 + n2 from 100 to 150
    room, masked = plan.room_now(99.5)                      # a job ending before 100 may use them
    assert not masked and room[:, 1].tolist() == [0, 1, 2]
    room, masked = plan.room_now(100.0)                     # one ending at 100 may not (Slurm: <=)
    assert masked and room[:, 1].tolist() == [0, 0, 2]


def test_later_jobs_are_planned_around_earlier_reservations() -> None:
    plan = plan_for(("a", 100.0, {0: 2, 1: 2, 2: 2}))
    assert plan.reserve(job(6), 50.0, None) == 100.0
    assert plan.reserve(job(2), 10.0, None) == 150.0   # after the first reservation's window


def test_jobs_started_in_the_pass_release_at_their_limit() -> None:
    plan = plan_for(("a", 100.0, {0: 2}))
    plan.started(40.0, np.array([1, 2]), np.array([GPU * 2, GPU * 2]))
    assert plan.reserve(job(4), 10.0, None) == 40.0


def test_no_reservation_beyond_the_window() -> None:
    jobs = ("a", 5000.0, {0: 2, 1: 2, 2: 2}),
    plan = plan_for(*jobs, window=3600.0)
    assert plan.reserve(job(2), 10.0, None) is None and plan.reservations == []
    assert plan_for(*jobs).reserve(job(2), 10.0, None) == 5000.0


def test_a_shape_that_fits_nowhere_is_still_searched_with_a_shorter_limit() -> None:
    # n1, n2 free at 100, n3 at 200; the 6-GPU job is planned on all three at 200-250
    plan = plan_for(("a", 100.0, {0: 2, 1: 2}), ("b", 200.0, {2: 2}), window=220.0)
    assert plan.reserve(job(6), 50.0, None) == 200.0
    assert plan.reserve(job(2), 120.0, None) is None   # 100-220 overlaps it; 250 is too late
    assert plan.reserve(job(2), 90.0, None) == 100.0   # 100-190 does not
    assert plan.reserve(job(2), 150.0, None) is None


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


def test_the_choice_memo_answers_as_cons_tres_and_forgets_past_its_budget() -> None:
    layout = ClusterSnapshot.empty(NODES).layout
    free, _ = running(("a", 50.0, {0: 2}), ("b", 80.0, {1: 1}))
    memo = backfill.ChoiceMemo(budget_bytes=2 * free.nbytes)
    two, four = job(2), job(4)
    first = memo.choose(layout, free, two, None)
    assert first.tolist() == backfill._choose(layout, free, two, None).tolist() == [2]
    assert memo.choose(layout, free.copy(), two, None) is first  # the same room: remembered
    assert not first.flags.writeable  # shared by every ask: nobody may change it
    assert memo.choose(layout, free, four, None) is None  # another shape: asked (3 GPUs free)
    other = free.copy()
    other[1] = [8, 2, 32_000]  # n2 empty too: another room, asked (the third: over the budget)
    assert memo.choose(layout, other, four, None).tolist() == [1, 2]
    assert memo.choose(layout, free, two, None) is not first  # forgotten, asked again
    assert memo.choose(layout, free, two, None).tolist() == [2]


def _pass_of(release: Release, *jobs) -> BackfillPass:
    free, ends = running(*jobs)
    return BackfillPass(ClusterSnapshot.empty(NODES).layout, free, ends, now=0.0, window_s=1e9,
                        resolution_s=1.0, memo=backfill.ChoiceMemo(release=release))


ALL = 0b111


def test_from_24_11_a_later_try_starts_with_the_jobs_ending_before_it_gone() -> None:
    # a (n1) ends at 10, b (n2) at 45; a 2-GPU job tried from start_res 40. 22.05 tests it now,
    # then removes a and b in one batch (barrier 30, to 60): start b's end, 45. 24.11 removes
    # the jobs ending before 40 first (a) and it fits: "now", which backfill makes start_res.
    jobs = (("a", 10.0, {0: 2}), ("b", 45.0, {1: 2}), ("c", 1000.0, {2: 2}))
    assert _pass_of(Release(22, 5, 8), *jobs)._will_run(job(2), ALL, None, 40.0, None)[0] == 45.0
    start, nodes = _pass_of(Release(24, 11, 5), *jobs)._will_run(job(2), ALL, None, 40.0, None)
    assert (start, nodes.tolist()) == (0.0, [0])


def test_from_24_11_no_job_ending_after_later_start_is_removed() -> None:
    # a (n1) ends at 10, b (n2) at 15, later_start 12: 22.05 removes both in the first batch and
    # plans the 2-GPU job at 15 (backfill then tries again from 12). 24.11 stops before b: the
    # job fits on n1 at 10. With no job left to remove it fails: the job waits for a later try.
    jobs = (("a", 10.0, {0: 2}), ("b", 15.0, {1: 2}), ("c", 1000.0, {2: 2}))
    assert _pass_of(Release(22, 5, 8), *jobs)._will_run(job(2), ALL, None, 0.0, 12.0)[0] == 15.0
    assert _pass_of(Release(24, 11, 5), *jobs)._will_run(job(2), ALL, None, 0.0, 12.0)[0] == 10.0
    assert _pass_of(Release(24, 11, 5), *jobs)._will_run(job(4), ALL, None, 0.0, 12.0) is None


def test_from_25_11_the_start_is_the_end_of_the_last_job_on_the_chosen_nodes() -> None:
    # b (n1) ends at 10, c (n1, n2) at 20, a (n3) at 30: one batch (barrier 30, to 60) frees all;
    # cons_tres takes n1 and n2 for 4 GPUs. 22.05 and 24.11 plan the start at the last removed
    # job's end (a, 30); 26.05 at the end of the last one on n1 or n2 (c, 20).
    jobs = (("a", 30.0, {2: 2}), ("b", 10.0, {0: 1}), ("c", 20.0, {0: 1, 1: 2}))
    for release, start in ((Release(22, 5, 8), 30.0), (Release(24, 11, 5), 30.0), (Release(26, 5, 5), 20.0)):
        plan = _pass_of(release, *jobs)
        assert plan.reserve(job(4), 50.0, None) == start, release
        assert plan.reservations[0].nodes.tolist() == [0, 1]


def test_from_24_11_later_start_is_set_past_the_window_too() -> None:
    # records: [0, 10) all nodes, [10, 20) without n1, [20, 30) without n1 and n2, [30, end)
    # without n2. A job with a 5-s window from 0: no record up to the first one past the window
    # ([10, 20)) is followed by one that frees nodes, so 22.05 has no later_start; 24.11 takes
    # the end of the record after that one (30).
    space = backfill._NodeSpace(0.0, 100.0, 3, 1.0)
    space.add(10.0, 30.0, 0b001)
    space.add(20.0, 100.0, 0b010)
    assert space.walk(0.0, 5.0) == (ALL, None)
    assert space.walk(0.0, 5.0, past=True) == (ALL, 30.0)


def test_from_25_05_a_later_try_also_removes_the_jobs_ending_at_its_start() -> None:
    # a (n1) ends at 10, b (n2) at 40, c (n3) at 45; a 4-GPU job tried from start_res 40. 24.11
    # removes a first (ending before 40), then b and c in one batch (barrier 60): start c's end,
    # 45. 25.05 removes b too (``<=``, 324f83551b) and the job fits on n1 and n2: "now", which
    # backfill makes start_res, 40.
    jobs = (("a", 10.0, {0: 2}), ("b", 40.0, {1: 2}), ("c", 45.0, {2: 2}))
    assert _pass_of(Release(24, 11, 5), *jobs)._will_run(job(4), ALL, None, 40.0, None)[0] == 45.0
    start, nodes = _pass_of(Release(25, 5, 0), *jobs)._will_run(job(4), ALL, None, 40.0, None)
    assert (start, nodes.tolist()) == (0.0, [0, 1])
