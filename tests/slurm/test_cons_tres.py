"""slurm-default and slurm-topo = Slurm 22.05's select/cons_tres, case by case from its source.

Each case names the rule of ``src/plugins/select/cons_tres/job_test.c`` it pins down. Free
capacity is given in GPUs; CPUs and memory are in step (one worker = 2 CPUs, 8 GB; 1 GPU in
the GPU cases), so a node's usable task slots for a worker-only job equal its free GPUs. A job
without GPUs follows the plain rules; a job with GPUs also orders nodes by free GPUs and, with
one task, counts one slot per node (the last section, with the testbed's own disagreements).
"""
import numpy as np

from slurm_advisor.domain import ClusterSnapshot, Job, Node, Resources
from slurm_advisor.policies import BASELINES, make_policy
from slurm_advisor.policies.slurm_default import SlurmDefaultPolicy
from slurm_advisor.slurm.release import Release

WORKER = Resources(2, 0, 8_000)
GPU_WORKER = Resources(2, 1, 8_000)


def snapshot(free_gpus: dict[str, int], switches: dict[str, str] | None = None) -> ClusterSnapshot:
    switches = switches or {}
    nodes = tuple(Node(n, 16, 8, 64_000, switches.get(n)) for n in free_gpus)
    return ClusterSnapshot(nodes, {n: Resources(2 * g, g, 8_000 * g) for n, g in free_gpus.items()})


def workers(n: int, num_ps: int = 0) -> Job:
    return Job("j", "resnet50", num_ps, n, Resources(2, 0, 8_000), WORKER, 100.0)


def gpu_workers(n: int) -> Job:
    return Job("j", "resnet50", 0, n, Resources(), GPU_WORKER, 100.0)


def layout(policy: str, snap: ClusterSnapshot, job: Job, **kw) -> list[tuple[str, int]] | None:
    p = make_policy(policy).place(snap, job, np.random.default_rng(0), **kw)
    return None if p is None else [(n, ps + w) for n, ps, w in p.per_node()]


def test_a_job_that_fits_one_node_goes_to_the_best_fitting_one() -> None:
    # _eval_nodes, rem_nodes <= 1: the node with the fewest usable slots that still hold it
    snap = snapshot({"n1": 2, "n2": 6, "n3": 8})
    assert layout("slurm-default", snap, workers(4)) == [("n2", 4)]
    assert layout("slurm-default", snap, workers(2)) == [("n1", 2)]
    assert layout("slurm-default", snap, workers(7)) == [("n3", 7)]


def test_the_reviewed_example() -> None:
    # free GPUs n1:2 n2:8 n3:4 n4:8: a 4-GPU job best-fits n3; 12 GPUs are taken in node order
    snap = snapshot({"n1": 2, "n2": 8, "n3": 4, "n4": 8})
    assert layout("slurm-default", snap, workers(4)) == [("n3", 4)]
    assert layout("slurm-default", snap, workers(12)) == [("n1", 2), ("n2", 8), ("n3", 2)]


def test_ties_go_to_the_first_node_in_slurm_order() -> None:
    nodes = tuple(Node(n, 16, 8, 64_000) for n in ("n3", "n1", "n2"))
    snap = ClusterSnapshot.empty(nodes)
    assert layout("slurm-default", snap, workers(3)) == [("n3", 3)]


def test_a_full_node_splits_the_runs_and_the_tightest_sufficient_run_wins() -> None:
    snap = snapshot({"n1": 3, "n2": 0, "n3": 8, "n4": 8})
    assert layout("slurm-default", snap, workers(12)) == [("n3", 8), ("n4", 4)]
    assert layout("slurm-default", snap, workers(2)) == [("n1", 2)]   # run [n1] (3) is tighter
    assert layout("slurm-default", snap, workers(4)) == [("n3", 4)]   # [n1] is too small


def test_best_fit_is_within_the_chosen_run_not_the_whole_cluster() -> None:
    # runs [n1] (8 slots) and [n3, n4] (10): the tighter run holding 5 tasks is [n1], so the
    # job goes there although n3 would hold it exactly
    snap = snapshot({"n1": 8, "n2": 0, "n3": 5, "n4": 5})
    assert layout("slurm-default", snap, workers(5)) == [("n1", 5)]


def test_when_no_run_holds_the_job_the_biggest_goes_first_then_the_next() -> None:
    snap = snapshot({"n1": 4, "n2": 0, "n3": 3, "n4": 3})
    # [n3, n4] (6) first, then the rest (3) best-fits [n1]; tasks in node order
    assert layout("slurm-default", snap, workers(9)) == [("n1", 3), ("n3", 3), ("n4", 3)]


def test_multi_node_jobs_take_the_lowest_numbered_nodes_with_room() -> None:
    # the testbed's second kind of disagreement with the old rule: 1 + 2 + 3 on n1..n3
    snap = snapshot({"n1": 1, "n2": 2, "n3": 3, "n4": 4})
    assert layout("slurm-default", snap, workers(6)) == [("n1", 1), ("n2", 2), ("n3", 3)]


def test_no_room_means_no_placement() -> None:
    snap = snapshot({"n1": 1, "n2": 2})
    assert layout("slurm-default", snap, workers(4)) is None


def test_a_node_cap_is_met_by_dropping_small_nodes_and_retrying() -> None:
    snap = snapshot({"n1": 1, "n2": 8, "n3": 8})
    assert layout("slurm-default", snap, workers(9), max_nodes=2) == [("n1", 1), ("n2", 8)]
    # n1 + one more node cannot hold 10: choose_nodes drops n1 and finds n2 + n3
    assert layout("slurm-default", snap, workers(10), max_nodes=2) == [("n2", 8), ("n3", 2)]
    assert layout("slurm-default", snap, workers(17), max_nodes=2) is None
    assert layout("slurm-default", snap, workers(10)) == [("n1", 1), ("n2", 8), ("n3", 1)]


def test_a_ps_job_gets_its_ps_tasks_first_in_block_order() -> None:
    snap = snapshot({"n1": 8, "n2": 8})
    job = workers(10, num_ps=2)
    p = make_policy("slurm-default").place(snap, job)
    assert [t.role.value for t in p.tasks] == ["ps"] * 2 + ["worker"] * 10
    assert [t.node for t in p.tasks[:2]] == ["n1", "n1"]
    assert snap.fits(job, p)


SWITCHED = {"n1": "s1", "n2": "s1", "n3": "s1", "n4": "s2", "n5": "s2"}


def test_topo_keeps_a_job_under_the_leaf_with_the_fewest_usable_nodes() -> None:
    # _eval_nodes_topo: s2 has 2 usable nodes, s1 has 3, so s2 is the tighter fit
    snap = snapshot({"n1": 8, "n2": 2, "n3": 1, "n4": 8, "n5": 8}, SWITCHED)
    assert layout("slurm-topo", snap, workers(12)) == [("n4", 8), ("n5", 4)]
    # without topology the job runs over n1..n4 in node order, across both switches
    assert layout("slurm-default", snap, workers(12)) == [("n1", 8), ("n2", 2), ("n3", 1), ("n4", 1)]


def test_topo_has_no_best_fit_single_node_in_22_05() -> None:
    # s1's first usable node gives what it has, even though n2 alone would hold the job
    switches = {"n1": "s1", "n2": "s1", "n3": "s2", "n4": "s2", "n5": "s2"}
    snap = snapshot({"n1": 1, "n2": 8, "n3": 8, "n4": 8, "n5": 8}, switches)
    assert layout("slurm-topo", snap, workers(4)) == [("n1", 1), ("n2", 3)]
    assert layout("slurm-default", snap, workers(4)) == [("n2", 4)]


def test_topo_spills_to_the_next_leaf_when_one_is_not_enough() -> None:
    switches = {"n1": "s1", "n2": "s1", "n3": "s2", "n4": "s2", "n5": "s2"}
    snap = snapshot({"n1": 8, "n2": 8, "n3": 8, "n4": 8, "n5": 8}, switches)
    assert layout("slurm-topo", snap, workers(20)) == [("n1", 8), ("n2", 8), ("n3", 4)]


def test_with_one_node_allowed_a_node_that_cannot_hold_the_job_counts_for_nothing() -> None:
    # _select_cores, details max_nodes == 1: min = max tasks = num_tasks, so n2 (2 slots) is
    # out; the runs are [n1] (6) and [n4] (7), not [n1, n2] (8) and [n4] (7)
    snap = snapshot({"n1": 6, "n2": 2, "n3": 0, "n4": 7})
    assert layout("slurm-default", snap, workers(5), max_nodes=1) == [("n1", 5)]
    assert layout("slurm-default", snap, workers(5)) == [("n4", 5)]


# -- jobs with GPUs (--gpus-per-task) ---------------------------------------------------------

def on_testbed(free: dict[str, tuple[int, int, int]]) -> ClusterSnapshot:
    nodes = tuple(Node(n, 8, 4, 32_000) for n in free)
    return ClusterSnapshot(nodes, {n: Resources(*r) for n, r in free.items()})


def job_like_testbed(tasks: int, cpus: int, mem_per_cpu: int) -> Job:
    return Job("j", "test", 0, tasks, Resources(), Resources(cpus, 1, cpus * mem_per_cpu), 1.0)


def test_a_gpu_job_takes_the_nodes_with_the_most_free_gpus_first() -> None:
    # can_job_run_on_node: sched_weight's low byte = 0xff - free GPUs (up to the job's), and
    # _eval_nodes takes the lowest weight first, before any best fit. Testbed job 10
    # (-n1 -c1 --gpus-per-task=1): n1 (4 GPUs) rather than the tighter n4 (2 GPUs)
    snap = on_testbed({"n1": (8, 4, 32_000), "n2": (2, 0, 17_000), "n3": (4, 0, 28_000), "n4": (2, 2, 8_000)})
    assert layout("slurm-default", snap, job_like_testbed(1, 1, 500)) == [("n1", 1)]
    # the same without GPUs best-fits n2 (2 CPUs, first of the tightest)
    cpu_job = Job("j", "test", 0, 1, Resources(), Resources(1, 0, 500), 1.0)
    assert layout("slurm-default", snap, cpu_job) == [("n2", 1)]


def test_a_gpu_job_counts_its_gpus_up_to_what_it_asks_for() -> None:
    # near_gpu_cnt is capped by max_node_gres = gres_per_job: for 2 GPUs n1 (2) is as good as
    # n2 (8), so the plain best fit holds; for 12 the 8-GPU nodes go first, n2 then n4
    snap = snapshot({"n1": 2, "n2": 8, "n3": 4, "n4": 8})
    assert layout("slurm-default", snap, gpu_workers(2)) == [("n1", 2)]
    assert layout("slurm-default", snap, gpu_workers(4)) == [("n3", 4)]
    assert layout("slurm-default", snap, gpu_workers(12)) == [("n2", 8), ("n4", 4)]


def test_a_one_task_gpu_job_counts_one_slot_on_every_node() -> None:
    # gres_select_filter_sock_core: avail_cpus = max_tasks_this_node (1 for -n1) * cpus_per_task,
    # so runs count nodes: [n1, n2] (2 slots) against [n4] (1): the tighter run is [n4].
    # Testbed job 23 (-n1 -c2 --gpus-per-task=1)
    snap = on_testbed({"n1": (2, 1, 20_000), "n2": (4, 4, 24_000), "n3": (0, 0, 0), "n4": (8, 4, 32_000)})
    assert layout("slurm-default", snap, job_like_testbed(1, 2, 2_000)) == [("n4", 1)]


def test_gpu_weights_split_runs_and_the_lightest_goes_first_even_if_too_small() -> None:
    # testbed job 16 (-n6 -c1 --gpus-per-task=1): n3 (4 GPUs) first although it holds only 4
    # tasks, then the next lightest, n2 (3 GPUs), gives the last 2 (best fit, _cpus_to_use)
    snap = on_testbed({"n1": (0, 1, 18_000), "n2": (3, 3, 18_000), "n3": (7, 4, 31_000), "n4": (1, 2, 7_500)})
    assert layout("slurm-default", snap, job_like_testbed(6, 1, 2_000)) == [("n2", 2), ("n3", 4)]


def test_topo_takes_lighter_weights_whole_then_their_leaves() -> None:
    # _eval_nodes_topo: weights are added lightest first until they hold the job; n4 (8 GPUs)
    # does not, so it is taken whole and the 2-GPU nodes complete the job; n5 (1 GPU, heavier)
    # is never looked at. Without GPUs s2 (2 usable nodes) is the tighter leaf.
    switches = {"n1": "s1", "n2": "s1", "n3": "s1", "n4": "s2", "n5": "s2"}
    snap = snapshot({"n1": 2, "n2": 2, "n3": 2, "n4": 8, "n5": 1}, switches)
    assert layout("slurm-topo", snap, gpu_workers(10)) == [("n1", 2), ("n4", 8)]
    assert layout("slurm-topo", snap, workers(10)) == [("n1", 1), ("n4", 8), ("n5", 1)]


def test_both_are_baselines() -> None:
    assert {"slurm-default", "slurm-topo"} <= set(BASELINES)


def test_cost_is_a_few_vector_passes_at_10000_nodes() -> None:
    import time
    nodes = tuple(Node(f"n{i:05d}", 48, 8, 256_000, f"s{i // 32}") for i in range(10_000))
    rng = np.random.default_rng(1)
    gpus = rng.integers(0, 9, size=10_000)
    snap = ClusterSnapshot(nodes, {n.name: Resources(6 * g, int(g), 32_000 * g) for n, g in zip(nodes, gpus)})
    for policy in ("slurm-default", "slurm-topo"):
        p = make_policy(policy)
        t0 = time.process_time()
        for n in (1, 4, 16, 64):
            assert p.place(snap, workers(n)) is not None
            assert p.place(snap, gpu_workers(n)) is not None
        assert (time.process_time() - t0) / 8 < 0.02, policy


# -- the closed forms against the step-by-step rules they replace -------------------------------
def test_a_nodes_split_of_tasks_is_the_task_by_task_count() -> None:
    """``_split`` counts in one step what handing out tasks one at a time gives: PS first, each
    while it fits (a need of 0 fits while the room is not negative)."""
    from slurm_advisor.slurm.cons_tres import _split

    def one_at_a_time(room, job, ps_left, w_left, count):
        room = Resources(*room)
        ps = 0
        while ps < min(ps_left, count) and job.ps_demand.fits_in(room):
            room, ps = room - job.ps_demand, ps + 1
        w = 0
        while w < min(w_left, count - ps) and job.worker_demand.fits_in(room):
            room, w = room - job.worker_demand, w + 1
        return ps, w

    rng = np.random.default_rng(3)
    for _ in range(3000):
        ps_d, w_d = (Resources(*(int(x) for x in rng.integers(0, 5, 3))) for _ in range(2))
        job = Job("j", "resnet50", int(rng.integers(0, 4)), int(rng.integers(1, 9)), ps_d, w_d, 1.0)
        room = tuple(int(x) for x in rng.integers(-2, 20, 3))
        ps_left, w_left = int(rng.integers(0, job.num_ps + 1)), int(rng.integers(0, job.num_workers + 1))
        count = int(rng.integers(0, ps_left + w_left + 2))
        assert _split(np.array(room), job, ps_left, w_left, count) == one_at_a_time(room, job, ps_left, w_left, count)


def test_the_lightest_sufficient_weight_is_found_without_sorting() -> None:
    """``_lightest_sufficient`` counts weights by offset; the same sets as Slurm's rule read
    over the sorted distinct weights."""
    from slurm_advisor.slurm.cons_tres import _lightest_sufficient

    def by_sorting(avail, weight, usable, tasks, min_nodes):
        weights = np.unique(weight[usable])
        if len(weights) <= 1:
            return usable, np.zeros_like(usable)
        for w in weights:
            upto = usable & (weight <= w)
            if avail[upto].sum() >= tasks and upto.sum() >= min_nodes:
                return usable & (weight == w), usable & (weight < w)
        return None, None

    rng = np.random.default_rng(4)
    for _ in range(2000):
        n = int(rng.integers(1, 40))
        avail = rng.integers(0, 5, n)
        weight = -np.minimum(rng.integers(0, 9, n), int(rng.integers(1, 9)))
        usable = avail > 0
        tasks, min_nodes = int(rng.integers(1, 30)), int(rng.integers(1, 6))
        got, want = (f(avail, weight, usable, tasks, min_nodes) for f in (_lightest_sufficient, by_sorting))
        if want[0] is None:
            assert got == (None, None)
        else:
            assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])


def test_slots_are_remembered_for_a_read_only_array_only() -> None:
    """A snapshot's free array is read-only: the answer for it is kept (and read-only too); a
    writable array (backfill's rooms) may change under the same identity and is asked afresh."""
    from slurm_advisor.slurm.cons_tres import fits_once, usable_slots

    demand = Resources(4, 1, 8_000)
    frozen = np.array([[8, 2, 16_000], [4, 0, 8_000]], dtype=np.int64)
    frozen.flags.writeable = False
    assert fits_once(frozen, demand) is fits_once(frozen, demand)
    assert usable_slots(frozen, demand).tolist() == [2, 0]
    assert not usable_slots(frozen, demand).flags.writeable
    room = frozen.copy()
    assert usable_slots(room, demand).tolist() == [2, 0] and fits_once(room, demand).tolist() == [True, False]
    room[1, 1] = 3
    assert usable_slots(room, demand).tolist() == [2, 1] and fits_once(room, demand).tolist() == [True, True]
    assert usable_slots(frozen, Resources(8, 0, 0)).tolist() == [1, 0]  # another demand, same array
    owner = frozen.copy()
    view = owner[:]
    view.flags.writeable = False  # read-only here, but its owner can still change it
    assert fits_once(view, demand).tolist() == [True, False]
    owner[1, 1] = 3
    assert fits_once(view, demand).tolist() == [True, True]


# -- Slurm 26.05: a one-task job on the first node that holds it ----------------------------------
def test_on_26_05_a_one_task_job_goes_to_the_first_node_that_holds_it() -> None:
    # the 26.05.5 testbed's four disagreements with the 22.05 rule (node choice test, seed 20261201)

    testbed = tuple(Node(f"n{i}", 8, 4, 32_000) for i in range(1, 5))
    cases = [  # (cpus, gpus, MB per CPU), free per node, Slurm 26.05's node, 22.05's node
        ((1, 0, 500), [(0, 1, 18000), (3, 3, 18000), (7, 4, 31000), (2, 2, 8000)], "n2", "n4"),
        ((2, 1, 2000), [(2, 1, 20000), (4, 4, 16000), (0, 0, 8000), (8, 4, 32000)], "n1", "n4"),
        ((2, 0, 2000), [(0, 0, 25000), (8, 4, 32000), (2, 3, 26000), (4, 4, 30000)], "n2", "n3"),
        ((1, 0, 4000), [(3, 4, 12000), (2, 4, 20000), (2, 4, 26000), (5, 4, 29000)], "n1", "n2"),
    ]
    for (cpus, gpus, mem), free, new, old in cases:
        snap = ClusterSnapshot(testbed, {n.name: Resources(*f) for n, f in zip(testbed, free)})
        job = Job("j", "test", 0, 1, Resources(), Resources(cpus, gpus, cpus * mem), 1.0)
        assert SlurmDefaultPolicy(Release(26, 5, 5)).place(snap, job).nodes() == (new,)
        assert SlurmDefaultPolicy(Release(24, 11, 5)).place(snap, job).nodes() == (old,)
        assert SlurmDefaultPolicy().place(snap, job).nodes() == (old,)
    full = ClusterSnapshot(testbed, {n.name: Resources(0, 4, 32_000) for n in testbed})
    assert SlurmDefaultPolicy(Release(26, 5, 5)).place(full, gpu_workers(1)) is None
