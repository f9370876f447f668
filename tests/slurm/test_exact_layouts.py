"""Exact layouts for jobs submitted with -m arbitrary (``slurm/expressible.py:exact``,
``slurm/request.py``, the marker's ``nodes=any``, ``Release.allocates_arbitrary``).

The testbed's nodes: 8 CPUs, 4 GPUs, 32000 MB. ``tests/integration/test_slurm_arbitrary.py`` holds
the same rule against real slurmctlds."""
import pytest

from slurm_advisor.domain import ClusterSnapshot, Job, Node, Placement, Resources
from slurm_advisor.slurm.expressible import arbitrary_nodes, exact, express
from slurm_advisor.slurm.marker import MarkerError, parse_marker
from slurm_advisor.slurm.release import DEFAULT, Release
from slurm_advisor.slurm.request import Mismatch, read

NODES = tuple(Node(f"n{i}", 8, 4, 32_000) for i in range(1, 5))
EMPTY = ClusterSnapshot.empty(NODES)
MODERN = Release(24, 11, 5)


def job(ps: int = 1, workers: int = 4, cpus: int = 1, gpus: int = 0, mem: int = 1000) -> Job:
    demand = Resources(cpus, gpus, mem * cpus)
    return Job("j", "resnet50", ps, workers, demand, demand, 1.0)


def busy(**taken: Resources) -> ClusterSnapshot:
    return ClusterSnapshot(NODES, {n.name: n.capacity - taken.get(n.name, Resources()) for n in NODES})


# -- the release ------------------------------------------------------------------------------------
@pytest.mark.parametrize(("release", "allocates"), [
    ("22.05.8", False), ("23.02.7", False), ("23.11.0", True), ("24.11.5", True), ("26.05.5", True)])
def test_arbitrary_layouts_are_allocated_from_23_11(release: str, allocates: bool) -> None:
    assert Release.parse(release).allocates_arbitrary is allocates


# -- the expression ---------------------------------------------------------------------------------
def test_the_policys_layout_is_kept_where_slurm_22_05_would_change_it() -> None:
    j = job(ps=1, workers=3)
    placement = Placement.of(j, ["n3", "n1", "n3", "n3"])  # 1 on n1, 3 on n3
    assert exact(EMPTY, j, placement, MODERN) is placement
    # the same pin as Slurm's own per-node counts: 3 on n1 (index order), 1 on n3
    counts = sorted((n, ps + w) for n, ps, w in express(EMPTY, j, placement).per_node())
    assert counts == [("n1", 3), ("n3", 1)]


def test_no_exact_layout_on_a_release_that_does_not_allocate_one() -> None:
    j = job(ps=1, workers=3)
    assert exact(EMPTY, j, Placement.of(j, ["n3", "n1", "n3", "n3"]), DEFAULT) is None


@pytest.mark.parametrize(("taken", "cpus", "gpus", "starts"), [
    ({}, 2, 1, True),                                   # 4 tasks x 2 CPUs, 4 GPUs on n1
    ({"n1": Resources(1, 0, 0)}, 2, 0, False),          # 7 CPUs: 3 tasks of 2
    ({"n1": Resources(0, 1, 0)}, 1, 1, False),          # 3 GPUs for 4 tasks
    ({"n1": Resources(0, 0, 25_000)}, 1, 0, False),     # 7000 MB: 3 tasks of 2000
    ({"n2": Resources(8, 4, 0)}, 1, 0, False),          # n2 full: its one task does not start
])
def test_every_node_needs_room_for_its_own_tasks(taken, cpus: int, gpus: int, starts: bool) -> None:
    j = job(ps=0, workers=5, cpus=cpus, gpus=gpus, mem=2000 // cpus)
    placement = Placement.of(j, ["n1"] * 4 + ["n2"])
    assert (exact(busy(**taken), j, placement, MODERN) is placement) is starts


def test_ps_tasks_must_have_the_workers_shape() -> None:
    j = Job("j", "x", 1, 2, Resources(1, 0, 100), Resources(1, 1, 100), 1.0)
    with pytest.raises(ValueError, match="same demand"):
        exact(EMPTY, j, Placement.of(j, ["n1", "n2", "n2"]), MODERN)


def test_the_list_names_each_tasks_node_in_task_order() -> None:
    j = job(ps=1, workers=3)
    assert arbitrary_nodes(Placement.of(j, ["n3", "n1", "n3", "n3"])) == "n3,n1,n3,n3"


# -- the request ------------------------------------------------------------------------------------
FIELDS = {"comment": "slurm-advisor: type=resnet50 ps=1 workers=3", "num_tasks": 4, "min_nodes": 2,
          "req_nodes": "n[1,3,3,3]", "arbitrary": True}


def test_an_arbitrary_jobs_list_is_a_requirement_by_default() -> None:
    sub = read(FIELDS)
    assert sub.arbitrary and sub.unpinnable is None
    assert sub.request.required == {"n1", "n3"} and sub.request.min_nodes == 2


def test_nodes_any_makes_the_list_a_fallback_only() -> None:
    sub = read({**FIELDS, "comment": FIELDS["comment"] + " nodes=any", "max_nodes": 2})
    assert sub.arbitrary and sub.request.required == frozenset()
    assert (sub.request.min_nodes, sub.request.max_nodes) == (1, None)


def test_nodes_any_without_arbitrary_distribution_keeps_the_list() -> None:
    sub = read({**FIELDS, "comment": FIELDS["comment"] + " nodes=any", "arbitrary": None})
    assert not sub.arbitrary and sub.request.required == {"n1", "n3"}


def test_tasks_per_node_with_an_arbitrary_list_is_not_pinned() -> None:
    sub = read({**FIELDS, "ntasks_per_node": 2})
    assert "-m arbitrary" in sub.unpinnable


@pytest.mark.parametrize("value", ["yes", 1, 0.0])
def test_a_bad_flag_is_refused_naming_it(value) -> None:
    with pytest.raises(Mismatch, match="job.arbitrary"):
        read({**FIELDS, "arbitrary": value})


def test_the_marker_takes_nodes_any_only() -> None:
    assert parse_marker("slurm-advisor: type=x ps=0 workers=1 nodes=any").nodes == "any"
    with pytest.raises(MarkerError, match="nodes='all'"):
        parse_marker("slurm-advisor: type=x ps=0 workers=1 nodes=all")
