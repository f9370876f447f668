"""What Slurm 24.05+ allocates to a pinned GPU job: the job's GPUs counted out node by node.

Cases from slurm-24-11-5-1 (``topology/common/gres_filter.c:_set_max_gres``,
``topology/common/eval_nodes.c:eval_nodes_gres``; see ``slurm_advisor/slurm/expressible.py``);
those marked "testbed" were observed on the 24.11.5 testbed (``.ci/slurm-chroot.sh start trixie``).
Jobs without GPUs are placed as on 22.05.
"""
from slurm_advisor.domain import ClusterSnapshot, Node, Resources
from slurm_advisor.slurm.expressible import slurm_counts, spread_job_gpus
from slurm_advisor.slurm.release import DEFAULT, Release

NODES = tuple(Node(f"n{i}", 8, 4, 32_000) for i in range(1, 5))
EMPTY = ClusterSnapshot.empty(NODES)
R2411 = Release(24, 11, 5)


def task(cpus: int = 1, gpus: int = 0, mem_per_cpu: int = 1000) -> Resources:
    return Resources(cpus, gpus, cpus * mem_per_cpu)


def counts(names: list[str], n: int, demand: Resources, release: Release = R2411,
           snap: ClusterSnapshot = EMPTY) -> list[int] | None:
    return slurm_counts(snap.layout, snap.free_array(), [snap.index(x) for x in names], n, demand,
                        release=release)


def test_the_job_gpus_are_counted_out_keeping_one_per_later_node() -> None:
    # testbed (24.11.5): -n 8 -c 2 --gpus-per-task=1 -w n[1-4] -> 4,2,1,1 (22.05: 3,3,1,1).
    # _set_max_gres: n1 min(4, 8-0-3) = 4, n2 min(4, 8-4-2) = 2, n3 8-6-1 = 1, n4 8-7-0 = 1
    demand = task(cpus=2, gpus=1)
    assert counts(["n1", "n2", "n3", "n4"], 8, demand) == [4, 2, 1, 1]
    assert counts(["n1", "n2", "n3", "n4"], 8, demand, DEFAULT) == [3, 3, 1, 1]
    assert spread_job_gpus(EMPTY.free_array(), 8, demand) == ([8, 4, 2, 2], [4, 2, 1, 1])


def test_jobs_without_gpus_are_placed_as_on_22_05() -> None:
    for n, demand in ((7, task(cpus=2)), (8, task(cpus=2)), (5, task())):
        assert counts(["n1", "n2", "n3", "n4"], n, demand) == counts(["n1", "n2", "n3", "n4"], n, demand, DEFAULT)


def test_a_node_short_of_gpus_leaves_them_to_the_later_nodes() -> None:
    # n1 has one GPU free: it takes 1; n2 then may take 5-1-0 = 4
    snap = ClusterSnapshot(NODES, {**{n.name: n.capacity for n in NODES}, "n1": Resources(8, 1, 32_000)})
    assert counts(["n1", "n2"], 5, task(gpus=1), snap=snap) == [1, 4]


def test_too_few_gpus_on_the_pinned_nodes_stays_pending() -> None:
    assert counts(["n1", "n2"], 9, task(gpus=1)) is None
    assert counts(["n1", "n2"], 4, task(gpus=2)) == [2, 2]
