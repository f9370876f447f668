"""Placement: every task of one job on a node, in the job's task order."""
from collections import Counter

import pytest

from slurm_advisor.domain import Job, Placement, Resources, Role, TaskAssignment

PS = Resources(2, 0, 1000)
WORKER = Resources(4, 1, 3000)
JOB = Job("j1", "vgg16", 1, 3, PS, WORKER, 10.0)


def test_of_assigns_roles_in_job_order() -> None:
    p = Placement.of(JOB, ["a", "b", "b", "c"])
    assert p.job_id == "j1"
    assert p.tasks == (TaskAssignment(Role.PS, "a"), TaskAssignment(Role.WORKER, "b"),
                       TaskAssignment(Role.WORKER, "b"), TaskAssignment(Role.WORKER, "c"))


@pytest.mark.parametrize("nodes", [["a", "b", "c"], ["a", "b", "c", "d", "e"], []])
def test_of_refuses_wrong_task_count(nodes: list[str]) -> None:
    with pytest.raises(ValueError, match="j1: 4 tasks"):
        Placement.of(JOB, nodes)


def test_nodes_are_distinct_in_first_use_order() -> None:
    p = Placement.of(JOB, ["c", "a", "c", "b"])
    assert p.nodes() == ("c", "a", "b")
    assert p.node_list() == "c,a,b"


def test_count_by_node_and_role() -> None:
    p = Placement.of(JOB, ["a", "a", "b", "a"])
    assert p.count("a") == 3
    assert p.count("a", Role.PS) == 1
    assert p.count("a", Role.WORKER) == 2
    assert p.count("b", Role.PS) == 0
    assert p.count("zzz") == 0
    assert p.role_counts() == {"a": Counter({Role.PS: 1, Role.WORKER: 2}),
                               "b": Counter({Role.WORKER: 1})}


def test_demand_per_node_sums_the_tasks_there() -> None:
    p = Placement.of(JOB, ["a", "a", "b", "a"])
    assert p.demand_per_node(JOB) == {"a": Resources(10, 2, 7000), "b": Resources(4, 1, 3000)}


def test_placements_are_values() -> None:
    assert Placement.of(JOB, ["a", "b", "b", "c"]) == Placement.of(JOB, ["a", "b", "b", "c"])
    assert Placement.of(JOB, ["a", "b", "b", "c"]) != Placement.of(JOB, ["a", "b", "c", "b"])
    assert len({Placement.of(JOB, ["a"] * 4), Placement.of(JOB, ["a"] * 4)}) == 1
