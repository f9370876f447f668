"""Switch loads: what a speed sample logs of the racks its job's nodes hang off."""
from slurm_advisor.domain import ClusterSnapshot, Job, Node, Placement, Resources, SwitchLoad, switch_loads

NODES = (Node("a1", 16, 4, 64_000, "s1"), Node("a2", 16, 4, 64_000, "s1"),
         Node("b1", 16, 4, 64_000, "s2"), Node("b2", 16, 4, 64_000, "s2"), Node("c1", 16, 4, 64_000))


def job(job_id: str, workers: int) -> Job:
    return Job(job_id, "resnet50", 0, workers, Resources(), Resources(1, 1, 1000), 100.0)


def test_gpu_share_counts_every_allocation_and_crossing_counts_jobs_spanning_switches() -> None:
    snap = ClusterSnapshot.empty(NODES)
    across = job("x", 3)
    snap = snap.with_job(across, Placement.of(across, ["a1", "a1", "b1"]))
    inside = job("y", 2)
    snap = snap.with_job(inside, Placement.of(inside, ["a1", "a2"]))
    # a node taken by a job the advisor does not know: free capacity only
    free = snap.free_array().copy()
    free[snap.index("b2"), 1] = 0
    snap = snap.with_free(free)
    assert switch_loads(snap) == {"s1": SwitchLoad("s1", 4 / 8, 1), "s2": SwitchLoad("s2", 5 / 8, 1)}
    assert switch_loads(snap, {"s2"}) == {"s2": SwitchLoad("s2", 5 / 8, 1)}  # nodes on no switch: none


def test_an_idle_cluster_has_idle_racks() -> None:
    assert switch_loads(ClusterSnapshot.empty(NODES)) == {"s1": SwitchLoad("s1", 0.0, 0), "s2": SwitchLoad("s2", 0.0, 0)}
