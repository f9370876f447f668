"""JobRequest: the nodes a placement may use (``eligible``) and what a placement breaks (``violations``).

One literal cluster: four nodes in Slurm's order on two leaf switches, two partitions (n4 in
none), features per node, n2 partly busy, n4 with nothing but memory in use.
"""
import dataclasses

import numpy as np
import pytest

from slurm_advisor.domain import ClusterSnapshot, Job, JobRequest, Node, Placement, Resources

NODES = (
    Node("n1", 8, 4, 32_000, "s1", frozenset({"a100"}), frozenset({"batch"})),
    Node("n2", 8, 4, 32_000, "s1", frozenset({"a100", "ib"}), frozenset({"batch", "gpu"})),
    Node("n3", 8, 0, 16_000, "s2", frozenset(), frozenset({"gpu"})),
    Node("n4", 16, 8, 64_000, "s2", frozenset({"ib"}), frozenset()),
)
EMPTY = ClusterSnapshot.empty(NODES)
#: n2: 6 CPUs, 3 GPUs, 24 GB in use; n4: only 1 GB of memory in use
BUSY = ClusterSnapshot(NODES, {"n1": Resources(8, 4, 32_000), "n2": Resources(2, 1, 8_000),
                               "n3": Resources(8, 0, 16_000), "n4": Resources(16, 8, 63_000)})
JOB = Job("j", "resnet50", 1, 3, Resources(1, 0, 1000), Resources(1, 0, 1000), 10.0)


def on(*nodes: str) -> Placement:
    """JOB's four tasks (the PS first) on ``nodes``, in task order."""
    return Placement.of(JOB, list(nodes))


def mask(request: JobRequest, snapshot: ClusterSnapshot = EMPTY) -> list[bool] | None:
    out = request.eligible(snapshot)
    return None if out is None else out.tolist()


# -- construction --------------------------------------------------------------------------------
@pytest.mark.parametrize("kw, message", [
    ({"min_nodes": 0}, "node count range 0-None is empty"),
    ({"min_nodes": 3, "max_nodes": 2}, "node count range 3-2 is empty"),
    ({"max_tasks_per_node": 0}, "max_tasks_per_node"),
    ({"required": frozenset({"n1", "n2"}), "excluded": frozenset({"n2"})}, r"both required and excluded: \['n2'\]"),
])
def test_an_empty_or_contradictory_request_is_refused(kw, message) -> None:
    with pytest.raises(ValueError, match=message):
        JobRequest(**kw)


def test_a_request_is_a_frozen_value() -> None:
    request = JobRequest(min_nodes=2, max_nodes=2)
    assert request == JobRequest(min_nodes=2, max_nodes=2)
    assert hash(request) == hash(JobRequest(min_nodes=2, max_nodes=2))
    with pytest.raises(dataclasses.FrozenInstanceError):
        request.min_nodes = 3


# -- eligible ------------------------------------------------------------------------------------
@pytest.mark.parametrize("request_", [
    JobRequest(), JobRequest(min_nodes=2, max_nodes=4, max_tasks_per_node=2),
    JobRequest(required=frozenset({"n1"})), JobRequest(contiguous=True, max_switches=1),
])
def test_what_does_not_rule_a_node_out_by_itself_leaves_every_node(request_) -> None:
    assert request_.eligible(EMPTY) is None
    assert request_.eligible(BUSY) is None


def test_a_partition_keeps_its_nodes_only() -> None:
    assert mask(JobRequest(partition="batch")) == [True, True, False, False]
    assert mask(JobRequest(partition="gpu")) == [False, True, True, False]
    assert mask(JobRequest(partition="debug")) == [False, False, False, False]


def test_a_first_node_in_no_partition_does_not_hide_the_others_partitions() -> None:
    # n4 first: it is in no partition, and so in none the job may use
    first = ClusterSnapshot.empty((NODES[3], *NODES[:3]))
    assert mask(JobRequest(partition="gpu"), first) == [False, False, True, True]
    assert mask(JobRequest(partition="batch"), first) == [False, True, True, False]


def test_a_partition_on_a_cluster_without_partitions_rules_nothing_out() -> None:
    plain = ClusterSnapshot.empty(tuple(Node(f"m{i}", 8, 4, 32_000) for i in range(3)))
    assert JobRequest(partition="batch").eligible(plain) is None


def test_features_are_all_required() -> None:
    assert mask(JobRequest(features=frozenset({"a100"}))) == [True, True, False, False]
    assert mask(JobRequest(features=frozenset({"a100", "ib"}))) == [False, True, False, False]
    assert mask(JobRequest(features=frozenset({"nvlink"}))) == [False, False, False, False]


def test_excluded_nodes_are_ruled_out_and_unknown_names_ignored() -> None:
    assert mask(JobRequest(excluded=frozenset({"n2", "n9"}))) == [True, False, True, True]


def test_excluding_does_not_change_the_cached_partition_mask() -> None:
    batch = JobRequest(partition="batch")
    assert mask(dataclasses.replace(batch, excluded=frozenset({"n1"}))) == [False, True, False, False]
    assert mask(batch) == [True, True, False, False]
    assert not EMPTY.layout.mask(("partition", "batch"), list).flags.writeable  # the cached one


def test_exclusive_takes_only_idle_nodes() -> None:
    assert mask(JobRequest(exclusive=True), EMPTY) == [True, True, True, True]
    # n2 runs something; n4 has only memory in use, which still makes it not idle
    assert mask(JobRequest(exclusive=True), BUSY) == [True, False, True, False]


def test_gpus_per_node_count_free_gpus() -> None:
    assert mask(JobRequest(gpus_per_node=1), BUSY) == [True, True, False, True]
    assert mask(JobRequest(gpus_per_node=2), BUSY) == [True, False, False, True]
    assert mask(JobRequest(gpus_per_node=8), BUSY) == [False, False, False, True]
    assert mask(JobRequest(gpus_per_node=9), BUSY) == [False, False, False, False]


def test_memory_per_node_counts_free_memory() -> None:
    assert mask(JobRequest(mem_per_node_mb=8_000), BUSY) == [True, True, True, True]
    assert mask(JobRequest(mem_per_node_mb=8_001), BUSY) == [True, False, True, True]
    assert mask(JobRequest(mem_per_node_mb=32_000), BUSY) == [True, False, False, True]


def test_the_masks_combine_and_follow_the_snapshots_free_capacity() -> None:
    request = JobRequest(partition="batch", features=frozenset({"a100"}), gpus_per_node=2)
    assert mask(request, EMPTY) == [True, True, False, False]
    assert mask(request, BUSY) == [True, False, False, False]
    assert mask(dataclasses.replace(request, excluded=frozenset({"n1"})), BUSY) == [False, False, False, False]


def test_eligible_is_one_bool_per_node() -> None:
    out = JobRequest(partition="batch", exclusive=True).eligible(BUSY)
    assert isinstance(out, np.ndarray) and out.dtype == bool and out.shape == (4,)


# -- violations ----------------------------------------------------------------------------------
def test_no_request_beyond_the_default_is_broken_by_any_placement() -> None:
    for placement in (on("n1", "n1", "n1", "n1"), on("n4", "n1", "n3", "n2")):
        assert JobRequest().violations(BUSY, placement) == []


@pytest.mark.parametrize("min_nodes, max_nodes, nodes, broken", [
    (2, None, ("n1", "n1", "n1", "n1"), ["1 nodes, outside the requested 2-"]),
    (2, 2, ("n1", "n1", "n2", "n2"), []),
    (2, 3, ("n1", "n2", "n3", "n3"), []),
    (1, 2, ("n1", "n2", "n3", "n3"), ["3 nodes, outside the requested 1-2"]),
    (4, 4, ("n1", "n2", "n3", "n3"), ["3 nodes, outside the requested 4-4"]),
])
def test_the_node_count_stays_in_the_range(min_nodes, max_nodes, nodes, broken) -> None:
    assert JobRequest(min_nodes=min_nodes, max_nodes=max_nodes).violations(EMPTY, on(*nodes)) == broken


def test_every_required_node_is_used() -> None:
    request = JobRequest(required=frozenset({"n3", "n1"}))
    assert request.violations(EMPTY, on("n3", "n1", "n1", "n2")) == []
    assert request.violations(EMPTY, on("n2", "n2", "n2", "n2")) == ["leaves out required nodes n1,n3"]


def test_tasks_per_node_count_ps_and_workers_alike() -> None:
    request = JobRequest(max_tasks_per_node=2)
    assert request.violations(EMPTY, on("n1", "n1", "n2", "n2")) == []
    # n1: the PS and two workers
    assert request.violations(EMPTY, on("n1", "n1", "n1", "n2")) == ["more than 2 tasks on n1"]
    assert JobRequest(max_tasks_per_node=1).violations(EMPTY, on("n1", "n1", "n2", "n2")) == \
        ["more than 1 tasks on n1,n2"]


def test_nodes_the_mask_rules_out_are_named() -> None:
    assert JobRequest(excluded=frozenset({"n2"})).violations(EMPTY, on("n1", "n2", "n2", "n3")) == \
        ["nodes the request rules out now: n2"]
    assert JobRequest(partition="gpu").violations(EMPTY, on("n4", "n1", "n2", "n3")) == \
        ["nodes the request rules out now: n4,n1"]
    assert JobRequest(exclusive=True).violations(BUSY, on("n1", "n1", "n2", "n3")) == \
        ["nodes the request rules out now: n2"]
    assert JobRequest(gpus_per_node=2, mem_per_node_mb=20_000).violations(BUSY, on("n1", "n2", "n3", "n4")) == \
        ["nodes the request rules out now: n2,n3"]


def test_contiguous_nodes_are_consecutive_in_slurms_order_whatever_the_task_order() -> None:
    request = JobRequest(contiguous=True)
    assert request.violations(EMPTY, on("n3", "n2", "n2", "n3")) == []
    assert request.violations(EMPTY, on("n4", "n4", "n4", "n4")) == []
    assert request.violations(EMPTY, on("n1", "n3", "n3", "n3")) == ["nodes not contiguous"]
    assert request.violations(EMPTY, on("n1", "n2", "n4", "n4")) == ["nodes not contiguous"]


def test_the_switch_count_is_bounded() -> None:
    assert JobRequest(max_switches=1).violations(EMPTY, on("n1", "n2", "n2", "n2")) == []
    assert JobRequest(max_switches=1).violations(EMPTY, on("n2", "n3", "n3", "n3")) == \
        ["spans 2 switches, more than 1"]
    assert JobRequest(max_switches=2).violations(EMPTY, on("n1", "n2", "n3", "n4")) == []


def test_on_a_cluster_without_switches_every_node_is_under_one() -> None:
    plain = ClusterSnapshot.empty(tuple(Node(f"m{i}", 8, 4, 32_000) for i in range(3)))
    assert JobRequest(max_switches=1).violations(plain, Placement.of(JOB, ["m0", "m1", "m2", "m2"])) == []


def test_unknown_nodes_are_named_after_what_needs_no_cluster() -> None:
    request = JobRequest(min_nodes=3, excluded=frozenset({"n1"}), contiguous=True)
    assert request.violations(EMPTY, on("zz", "zz", "n1", "n1")) == \
        ["2 nodes, outside the requested 3-", "nodes unknown to the cluster: zz"]


def test_every_broken_constraint_is_listed() -> None:
    request = JobRequest(min_nodes=1, max_nodes=1, max_tasks_per_node=2, required=frozenset({"n4"}),
                         features=frozenset({"a100"}), contiguous=True, max_switches=1)
    assert request.violations(EMPTY, on("n1", "n1", "n1", "n3")) == [
        "2 nodes, outside the requested 1-1", "leaves out required nodes n4", "more than 2 tasks on n1",
        "nodes the request rules out now: n3", "nodes not contiguous", "spans 2 switches, more than 1"]


# -- narrows -------------------------------------------------------------------------------------
@pytest.mark.parametrize("kw", [
    {}, {"min_nodes": 2, "max_nodes": 3}, {"partition": "batch"}, {"features": frozenset({"ib"})},
    {"excluded": frozenset({"n1"})},
])
def test_what_slurm_places_as_it_would_anyway_does_not_narrow(kw) -> None:
    assert not JobRequest(**kw).narrows()


@pytest.mark.parametrize("kw", [
    {"max_tasks_per_node": 2}, {"mem_per_node_mb": 1000}, {"gpus_per_node": 1},
    {"required": frozenset({"n1"})}, {"exclusive": True}, {"contiguous": True}, {"max_switches": 1},
])
def test_each_per_node_or_placement_constraint_narrows(kw) -> None:
    assert JobRequest(**kw).narrows()
