"""What Slurm 22.05 allocates to a pinned job (``-w nodes -N k -n N``), case by case from its source.

Each case names the function of slurm-22-05-9-1 it pins down (see the module docstring of
``slurm_advisor/slurm/expressible.py``). The testbed's nodes: 8 CPUs, 4 GPUs, 32000 MB. The
cases marked "testbed" were observed on the real slurmctld (22.05.8).
"""
import numpy as np
import pytest

from slurm_advisor.domain import ClusterSnapshot, Job, Node, Placement, Resources
from slurm_advisor.slurm.cons_tres import usable_slots
from slurm_advisor.slurm.expressible import compute_c_b, express, required_node_cpus, slurm_counts
from slurm_advisor.slurm.release import DEFAULT, Release

NODES = tuple(Node(f"n{i}", 8, 4, 32_000) for i in range(1, 5))
EMPTY = ClusterSnapshot.empty(NODES)


def task(cpus: int = 1, gpus: int = 0, mem_per_cpu: int = 1000) -> Resources:
    return Resources(cpus, gpus, cpus * mem_per_cpu)


def counts(names: list[str], n: int, demand: Resources, snap: ClusterSnapshot = EMPTY) -> list[int] | None:
    return slurm_counts(snap.layout, snap.free_array(), [snap.index(x) for x in names], n, demand)


def busy(**taken: Resources) -> ClusterSnapshot:
    """The testbed with ``taken`` (node -> Resources) allocated."""
    free = {n.name: n.capacity - taken.get(n.name, Resources()) for n in NODES}
    return ClusterSnapshot(NODES, free)


# -- the testbed's observations -------------------------------------------------------------------
def test_every_node_gets_one_task_and_the_rest_go_in_node_index_order() -> None:
    # testbed: -n 4 -w n1,n2 -> 3 on n1, 1 on n2, whatever order -w names them in
    # (_eval_nodes walks req_node_bitmap in index order; _cpus_to_use keeps one CPU for n2)
    assert counts(["n1", "n2"], 4, task()) == [3, 1]
    assert counts(["n2", "n1"], 4, task()) == [1, 3]  # aligned with the indices as given


def test_a_busy_first_node_gives_what_it_has() -> None:
    # testbed: -n 5 -N 2 -w n1,n2 with 6 of n1's CPUs busy -> 2 on n1, 3 on n2
    assert counts(["n1", "n2"], 5, task(), busy(n1=Resources(6, 0, 6000))) == [2, 3]


def test_gpus_per_task_cut_a_node_to_its_gpus() -> None:
    # testbed: -n 5 -N 2 -w n3,n4 --gpus-per-task=1 -> 4 on n3, 1 on n4
    # (gres_select_filter_sock_core: max_tasks_this_node = free GPUs / gpus per task)
    assert counts(["n3", "n4"], 5, task(gpus=1)) == [4, 1]
    assert counts(["n3", "n4"], 4, task(gpus=2)) == [2, 2]


def test_with_cpus_per_task_the_reserve_is_one_cpu_and_the_surplus_goes_round_robin() -> None:
    # testbed: -n 8 -c 2 -N 4 -w n[1-4] -> CPU_IDs 0-5,0-5,0-1,0-1: 3,3,1,1 (not 4,2,1,1).
    # _cpus_to_use gives n1 8, n2 16-8-2 = 6 CPUs, n3 and n4 pn_min_cpus = 2;
    # dist_tasks_compute_c_b: one each, then one per node per round: n1, n2, n1, n2
    demand = task(cpus=2)
    assert required_node_cpus(np.array([8, 8, 8, 8]), 8, 2) == [8, 6, 2, 2]
    assert counts(["n1", "n2", "n3", "n4"], 8, demand) == [3, 3, 1, 1]
    # testbed: -n 7 -c 2 -N 4 -> 3,2,1,1 (n1 8 CPUs, n2 14-8-2 = 4, then 2 and 2)
    assert counts(["n1", "n2", "n3", "n4"], 7, demand) == [3, 2, 1, 1]


# -- the rules, from the source -------------------------------------------------------------------
def test_cpus_to_use_in_cpus() -> None:
    # rem_max_cpus - (rem_nodes - 1), at least pn_min_cpus; a node that fits keeps all it has
    assert required_node_cpus(np.array([8, 8]), 4, 1) == [3, 1]
    assert required_node_cpus(np.array([6, 6, 6]), 5, 3) == [6, 6, 3]
    assert required_node_cpus(np.array([2, 8]), 5, 1) == [2, 3]
    assert required_node_cpus(np.array([8, 0]), 2, 1) is None  # required node lacks resources
    assert required_node_cpus(np.array([4, 4]), 9, 1) is None  # rem_cpus > 0, max_nodes spent


def test_compute_c_b_rounds() -> None:
    assert compute_c_b([8, 6, 2, 2], 8, 2) == [3, 3, 1, 1]
    assert compute_c_b([8, 8], 5, 1, np.array([4, 1])) == [4, 1]  # gres_task_limit
    assert compute_c_b([5, 8], 6, 2) == [2, 4]  # 5 CPUs hold 2 tasks of 2


def test_as_many_tasks_as_nodes_is_one_each() -> None:
    assert counts(["n1", "n3", "n4"], 3, task(cpus=2)) == [1, 1, 1]
    assert counts(["n2", "n4"], 2, task(gpus=3)) == [1, 1]


def test_memory_per_cpu_limits_a_node() -> None:
    # can_job_run_on_node: CPUs cut until mem_per_cpu * cpus fits, then to whole tasks
    assert counts(["n1", "n2"], 8, task(mem_per_cpu=8000)) == [4, 4]
    assert counts(["n1", "n2"], 8, task(mem_per_cpu=5000)) == [6, 2]  # 32000 MB hold 6 CPUs
    # 3 tasks of 2 CPUs x 5000 MB per node: n1 6 CPUs, n2 10-6 = 4
    assert counts(["n1", "n2"], 5, task(cpus=2, mem_per_cpu=5000)) == [3, 2]
    assert counts(["n1"], 6, task(mem_per_cpu=6000)) is None  # 32000 MB hold 5 CPUs


def test_what_the_pinned_nodes_cannot_hold_stays_pending() -> None:
    assert counts(["n1"], 9, task()) is None
    assert counts(["n1", "n2"], 17, task()) is None
    assert counts(["n1", "n2"], 9, task(gpus=1)) is None  # 8 GPUs
    # one node full: the job does not start even though n2 alone could hold it
    assert counts(["n1", "n2"], 2, task(), busy(n1=Resources(8, 0, 8000))) is None
    # a node without free GPUs fails a GPU job
    assert counts(["n1", "n2"], 3, task(gpus=1), busy(n1=Resources(1, 4, 1000))) is None
    # more nodes than tasks: refused
    assert counts(["n1", "n2", "n3"], 2, task()) is None


def test_bad_arguments() -> None:
    free = EMPTY.free_array()
    with pytest.raises(ValueError):
        slurm_counts(EMPTY.layout, free, [0, 0], 2, task())
    with pytest.raises(ValueError):
        slurm_counts(EMPTY.layout, free, [7], 2, task())
    with pytest.raises(ValueError):
        slurm_counts(EMPTY.layout, free, [], 2, task())
    with pytest.raises(ValueError):
        slurm_counts(EMPTY.layout, free, [0], 2, Resources(0, 1, 0))


def test_with_one_cpu_per_task_it_is_block_with_one_task_kept_per_later_node() -> None:
    # Derived from the source for cpus_per_task = 1: _cpus_to_use hands out exactly N, so the
    # rounds of dist_tasks_compute_c_b change nothing. Random states against that closed form.
    rng = np.random.default_rng(7)
    for _ in range(300):
        free = np.array([[rng.integers(0, 9), rng.integers(0, 5), rng.integers(0, 32_001)] for _ in NODES])
        k = int(rng.integers(1, 5))
        nodes = sorted(rng.choice(4, size=k, replace=False).tolist())
        n = int(rng.integers(k, 14))
        demand = task(gpus=int(rng.integers(0, 2)), mem_per_cpu=int(rng.choice([500, 2000, 6000])))
        slots = np.minimum(usable_slots(free[nodes], demand), n).tolist()
        expected, left = [], n
        for j, s in enumerate(slots):
            give = min(s, left - (k - j - 1))
            expected.append(give)
            left -= give
        if demand.gpus and n == k:
            expected = [min(s, 1) for s in slots]
            left = n - sum(expected)
        ok = left <= 0 and min(expected) >= 1
        assert slurm_counts(EMPTY.layout, free, nodes, n, demand) == (expected if ok else None)


@pytest.mark.parametrize("release", [DEFAULT, Release(24, 11, 5)], ids=str)
def test_counts_always_fit_and_cover_every_node(release: Release) -> None:
    rng = np.random.default_rng(11)
    started = 0
    for _ in range(500):
        free = np.array([[rng.integers(1, 9), rng.integers(1, 5), rng.integers(4_000, 32_001)] for _ in NODES])
        k = int(rng.integers(1, 5))
        nodes = rng.choice(4, size=k, replace=False).tolist()
        n = int(rng.integers(k, 3 * k + 1))
        demand = task(int(rng.choice([1, 2, 3, 4])), int(rng.integers(0, 2)), int(rng.choice([500, 1000, 4000])))
        got = slurm_counts(EMPTY.layout, free, nodes, n, demand, release=release)
        if got is None:
            continue
        started += 1
        assert sum(got) == n and min(got) >= 1
        assert all(c <= s for c, s in zip(got, usable_slots(free[nodes], demand).tolist()))
    assert started > 120, started


# -- express --------------------------------------------------------------------------------------
def ps_job(num_ps: int, num_workers: int, demand: Resources | None = None,
           ps_demand: Resources | None = None) -> Job:
    demand = demand or task()
    return Job("j", "resnet50", num_ps, num_workers, ps_demand or demand, demand, 100.0)


def layout_of(p: Placement) -> tuple[list[str], list[str]]:
    ps = [t.node for t in p.tasks if t.role.value == "ps"]
    return ps, [t.node for t in p.tasks if t.role.value == "worker"]


def test_express_keeps_the_node_set_and_takes_slurms_counts() -> None:
    job = ps_job(0, 4)
    advised = Placement.of(job, ["n2", "n2", "n1", "n1"])
    got = express(EMPTY, job, advised)
    assert got is not None and got.nodes() == ("n1", "n2")
    assert layout_of(got) == ([], ["n1", "n1", "n1", "n2"])


def test_express_keeps_ps_where_the_advisor_put_them() -> None:
    job = ps_job(1, 3)
    advised = Placement.of(job, ["n2", "n1", "n1", "n2"])  # PS on n2; Slurm gives n1 3, n2 1
    assert layout_of(express(EMPTY, job, advised)) == (["n2"], ["n1", "n1", "n1"])


def test_express_moves_the_ps_that_do_not_fit_to_the_first_free_slots() -> None:
    job = ps_job(2, 2)
    advised = Placement.of(job, ["n2", "n2", "n1", "n1"])  # both PS on n2, which gets one task
    assert layout_of(express(EMPTY, job, advised)) == (["n1", "n2"], ["n1", "n1"])
    job = ps_job(2, 6, task(cpus=2))  # -n 8 -c 2 -N 4: 3,3,1,1
    advised = Placement.of(job, ["n3", "n4", "n1", "n1", "n2", "n2", "n3", "n4"])
    assert layout_of(express(EMPTY, job, advised)) == (["n3", "n4"], ["n1", "n1", "n1", "n2", "n2", "n2"])


def test_express_none_when_slurm_would_not_start_it() -> None:
    job = ps_job(0, 9)
    assert express(EMPTY, job, Placement.of(job, ["n1"] * 9)) is None
    job = ps_job(1, 1)
    full = busy(n2=Resources(8, 0, 8000))
    assert express(full, job, Placement.of(job, ["n1", "n2"])) is None


def test_express_refuses_two_task_shapes() -> None:
    job = ps_job(1, 2, task(), ps_demand=task(cpus=2))
    with pytest.raises(ValueError, match="same demand"):
        express(EMPTY, job, Placement.of(job, ["n1", "n1", "n2"]))
    allreduce = Job("a", "resnet50", 0, 2, Resources(), task(), 100.0)  # no PS: ps_demand unused
    assert express(EMPTY, allreduce, Placement.of(allreduce, ["n1", "n2"])) is not None


def test_express_refuses_unknown_nodes() -> None:
    job = ps_job(0, 2)
    with pytest.raises(ValueError, match="not in the cluster"):
        express(EMPTY, job, Placement.of(job, ["n1", "x9"]))


# -- --ntasks-per-node: exact on every pinned node ---------------------------------------------------
def per_node(names: list[str], n: int, demand: Resources, t: int, snap: ClusterSnapshot = EMPTY) -> list[int] | None:
    return slurm_counts(snap.layout, snap.free_array(), [snap.index(x) for x in names], n, demand, t)


def test_tasks_per_node_are_exact_on_every_pinned_node() -> None:
    # testbed (differential test): -n 4 --ntasks-per-node=2 pinned to n2-n4 ran 2, 2, 2 (six tasks'
    # CPUs and GPUs for a job of four), and -n 4 --ntasks-per-node=4 pinned to n3, n4 ran 4, 4: a pin
    # keeps the job's own tasks only on n / t nodes
    assert per_node(["n2", "n3", "n4"], 4, task(gpus=2), 2) is None
    assert per_node(["n3", "n4"], 4, task(gpus=1), 4) is None
    assert per_node(["n2", "n3"], 4, task(gpus=2), 2) == [2, 2]
    assert per_node(["n1", "n2"], 8, task(), 4) == [4, 4]


def test_a_node_without_room_for_its_t_tasks_refuses_the_pin() -> None:
    assert per_node(["n1", "n2"], 8, task(), 4, busy(n1=Resources(5, 0, 5000))) is None
    assert per_node(["n1", "n2"], 4, task(gpus=2), 2, busy(n2=Resources(0, 3, 0))) is None
