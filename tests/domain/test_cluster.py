"""ClusterSnapshot: free capacity and running placements, never mutated in place."""
import pytest

from slurm_advisor.domain import ClusterSnapshot, Job, Node, Placement, Resources, RunningJob

NODES = (Node("n1", 16, 4, 64_000, "s1"), Node("n2", 16, 4, 64_000, "s1"),
         Node("n3", 8, 2, 32_000, "s2", frozenset({"v100"})))
WORKER = Resources(4, 1, 8_000)
PS = Resources(2, 0, 4_000)


def job(job_id: str, num_ps: int, num_workers: int) -> Job:
    return Job(job_id, "resnet50", num_ps, num_workers, PS, WORKER, 100.0)


def test_node_capacity() -> None:
    assert NODES[2].capacity == Resources(8, 2, 32_000)
    assert NODES[2].features == frozenset({"v100"})
    assert NODES[0].features == frozenset()


def test_empty_snapshot_has_every_node_free() -> None:
    snap = ClusterSnapshot.empty(list(NODES), time=5.0)
    assert snap.nodes == NODES
    assert dict(snap.free) == {"n1": Resources(16, 4, 64_000), "n2": Resources(16, 4, 64_000),
                               "n3": Resources(8, 2, 32_000)}
    assert snap.running == ()
    assert snap.time == 5.0
    assert snap.node("n3") is NODES[2]
    assert snap.total_capacity() == Resources(40, 10, 160_000)


def test_with_job_subtracts_the_demand_of_each_node() -> None:
    snap = ClusterSnapshot.empty(NODES)
    j = job("a", 1, 3)
    after = snap.with_job(j, Placement.of(j, ["n1", "n1", "n2", "n3"]), time=7.0)
    assert dict(after.free) == {"n1": Resources(10, 3, 52_000), "n2": Resources(12, 3, 56_000),
                                "n3": Resources(4, 1, 24_000)}
    assert after.running == (RunningJob(j, Placement.of(j, ["n1", "n1", "n2", "n3"]), 7.0),)
    assert after.time == 7.0
    # the original is untouched
    assert snap.free["n1"] == Resources(16, 4, 64_000) and snap.running == ()


def test_with_job_keeps_time_unless_given() -> None:
    snap = ClusterSnapshot.empty(NODES, time=3.0)
    j = job("a", 0, 1)
    after = snap.with_job(j, Placement.of(j, ["n1"]))
    assert after.time == 3.0 and after.running[0].start_time == 3.0


def test_with_job_refuses_an_over_commit() -> None:
    snap = ClusterSnapshot.empty(NODES)
    j = job("big", 0, 3)  # 3 GPUs onto n3 which has 2
    with pytest.raises(ValueError, match="big does not fit on n3"):
        snap.with_job(j, Placement.of(j, ["n3", "n3", "n3"]))
    assert snap.free["n3"] == Resources(8, 2, 32_000)


def test_with_job_refuses_once_earlier_jobs_used_the_room() -> None:
    j1, j2 = job("a", 0, 2), job("b", 0, 1)
    snap = ClusterSnapshot.empty(NODES).with_job(j1, Placement.of(j1, ["n3", "n3"]))
    assert not snap.fits(j2, Placement.of(j2, ["n3"]))
    with pytest.raises(ValueError):
        snap.with_job(j2, Placement.of(j2, ["n3"]))
    assert snap.fits(j2, Placement.of(j2, ["n2"]))


def test_fits_is_false_on_an_unknown_node() -> None:
    j = job("a", 0, 1)
    assert not ClusterSnapshot.empty(NODES).fits(j, Placement.of(j, ["nope"]))


def test_without_job_frees_exactly_what_the_job_held() -> None:
    empty = ClusterSnapshot.empty(NODES)
    a, b = job("a", 1, 2), job("b", 0, 2)
    pa, pb = Placement.of(a, ["n1", "n2", "n3"]), Placement.of(b, ["n2", "n2"])
    both = empty.with_job(a, pa).with_job(b, pb)
    only_b = both.without_job("a", time=9.0)
    assert dict(only_b.free) == dict(empty.with_job(b, pb).free)
    assert [r.job.id for r in only_b.running] == ["b"]
    assert only_b.time == 9.0
    assert dict(only_b.without_job("b").free) == dict(empty.free)
    assert both.running[0].job.id == "a"  # untouched


def test_without_job_of_an_unknown_id_raises_key_error() -> None:
    with pytest.raises(KeyError, match="nope"):
        ClusterSnapshot.empty(NODES).without_job("nope")


def test_free_is_immutable_and_a_copy() -> None:
    given = {n.name: n.capacity for n in NODES}
    snap = ClusterSnapshot(NODES, given)
    with pytest.raises(TypeError):
        snap.free["n1"] = Resources()  # type: ignore[index]
    given["n1"] = Resources()
    assert snap.free["n1"] == Resources(16, 4, 64_000)


def test_free_may_differ_from_running_for_foreign_allocations() -> None:
    free = {"n1": Resources(4, 1, 8_000), "n2": Resources(16, 4, 64_000), "n3": Resources()}
    snap = ClusterSnapshot(NODES, free)
    j = job("a", 0, 1)
    assert snap.fits(j, Placement.of(j, ["n1"]))
    assert not snap.fits(j, Placement.of(j, ["n3"]))


def test_at_changes_only_the_time() -> None:
    j = job("a", 0, 1)
    snap = ClusterSnapshot.empty(NODES).with_job(j, Placement.of(j, ["n1"]))
    later = snap.at(42.0)
    assert later.time == 42.0
    assert dict(later.free) == dict(snap.free) and later.running == snap.running


def test_snapshots_that_share_running_jobs_share_what_is_derived_from_them() -> None:
    """The daemon derives a snapshot per request (claims subtracted): the running tuple and the
    jobs per node are built once for all of them, so the load index sees the same tuple and
    syncs nothing. A snapshot with other running jobs builds its own."""
    a, b = job("a", 0, 1), job("b", 1, 1)
    snap = ClusterSnapshot.empty(NODES).with_job(a, Placement.of(a, ["n1"]))
    derived = snap.with_free(snap.free_array()).at(5.0)
    assert derived.running is snap.running and derived.jobs_on("n1") is snap.jobs_on("n1")
    later = derived.with_job(b, Placement.of(b, ["n2", "n2"]))
    assert [rj.job.id for rj in later.running] == ["a", "b"] and [rj.job.id for rj in snap.running] == ["a"]
    assert later.jobs_on("n2")[0].job.id == "b" and snap.jobs_on("n2") == ()
    assert [rj.job.id for rj in later.without_job("a").running] == ["b"]


def test_jobs_per_node_patched_from_the_last_index_equal_a_full_build() -> None:
    """A snapshot's jobs per node are patched from the last index its cluster built (the jobs
    that started or ended since), in start order as a build over every running job gives them:
    through starts, ends, a job replaced under its id, branches from older snapshots and more
    churn than the patch takes."""
    import random

    rnd = random.Random(3)
    nodes = tuple(Node(f"n{i}", 64, 8, 512_000, f"s{i // 4}") for i in range(12))
    snaps = [ClusterSnapshot.empty(nodes)]
    for step in range(400):
        snap = rnd.choice(snaps[-3:]) if step % 7 == 0 else snaps[-1]  # sometimes branch from an older one
        if snap.running and (rnd.random() < 0.45 or len(snap.running) > 150):
            snap = snap.without_job(rnd.choice(snap.running).job.id)
        elif step % 50 == 0 and snap.running:  # the same id again: a dict keeps its place
            old = snap.running[0]
            snap = ClusterSnapshot(nodes, dict(snap.free), (*snap.running, RunningJob(old.job, old.placement, 9.0)))
        else:
            j = job(f"j{step}", rnd.randint(0, 1), rnd.randint(1, 3))
            placement = Placement.of(j, [rnd.choice(nodes).name for _ in range(j.num_tasks)])
            if snap.fits(j, placement):
                snap = snap.with_job(j, placement)
        snaps.append(snap)
        expected: dict[str, list[RunningJob]] = {}
        for rj in snap.running:
            for n in rj.placement.nodes():
                expected.setdefault(n, []).append(rj)
        for n in nodes:
            got = snap.jobs_on(n.name)
            assert len(got) == len(expected.get(n.name, [])) and all(
                a is b for a, b in zip(got, expected.get(n.name, []))), (step, n.name)
