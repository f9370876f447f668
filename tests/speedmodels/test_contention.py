"""The contention ground truth: interference from neighbours, network from spreading."""
import pytest

from slurm_advisor.domain import Job, Node, Placement, Resources, RunningJob
from slurm_advisor.domain.jobtypes import profile_for, reference_speed
from slurm_advisor.speedmodels.contention import ContentionParams, ContentionSpeedModel

NODES = [Node(f"s1n{i}", 48, 8, 384_000, "s1") for i in range(1, 5)] + \
        [Node(f"s2n{i}", 48, 8, 384_000, "s2") for i in range(1, 3)]
PS = Resources(4, 0, 16_000)
WORKER = Resources(4, 1, 24_000)
NO_INTERFERENCE = ContentionParams(k_cpu=0.0, k_membw=0.0, k_pcie=0.0)


def run(job_id: str, job_type: str, nodes: list[str], num_ps: int = 0, **kw) -> RunningJob:
    job = Job(job_id, job_type, num_ps, len(nodes) - num_ps, PS, WORKER, 1000.0, **kw)
    return RunningJob(job, Placement.of(job, nodes))


def speed(running: list[RunningJob], job_id: str, model: ContentionSpeedModel | None = None) -> float:
    return (model or ContentionSpeedModel()).speeds(NODES, running)[job_id]


@pytest.mark.parametrize("job_type, kw", [("resnet50", {}), ("vgg16", {}), ("bert", {}),
                                          ("resnet50", {"batch_size": 128}),
                                          ("mystery", {"model_size_mb": 800.0})])
def test_lone_single_worker_runs_at_reference_speed(job_type: str, kw: dict) -> None:
    expected = reference_speed(profile_for(job_type, kw.get("model_size_mb"), kw.get("batch_size")))
    assert speed([run("a", job_type, ["s1n1"], **kw)], "a") == pytest.approx(expected, rel=1e-12)


def test_cpu_heavy_neighbour_slows_a_job_down() -> None:
    alone = speed([run("a", "resnet50", ["s1n1"])], "a")
    with_neighbour = speed([run("a", "resnet50", ["s1n1"]), run("b", "a3c", ["s1n1"])], "a")
    with_light = speed([run("a", "resnet50", ["s1n1"]), run("b", "transformer", ["s1n1"])], "a")
    assert with_neighbour < with_light < alone


def test_more_neighbours_slow_more() -> None:
    one = speed([run("a", "resnet50", ["s1n1"]), run("b", "a3c", ["s1n1"])], "a")
    two = speed([run("a", "resnet50", ["s1n1"]), run("b", "a3c", ["s1n1"]), run("c", "a3c", ["s1n1"])], "a")
    assert two < one


def test_neighbour_on_another_node_changes_nothing() -> None:
    alone = speed([run("a", "resnet50", ["s1n1"])], "a")
    assert speed([run("a", "resnet50", ["s1n1"]), run("b", "a3c", ["s1n2"])], "a") == alone


def test_ps_job_spread_away_from_its_ps_is_slower_than_consolidated() -> None:
    consolidated = speed([run("v", "vgg16", ["s1n1"] * 3, num_ps=1)], "v")
    spread = speed([run("v", "vgg16", ["s1n1", "s1n2", "s1n3"], num_ps=1)], "v")
    assert spread < consolidated


def test_allreduce_spanning_nodes_pays_for_the_network() -> None:
    model = ContentionSpeedModel(NO_INTERFERENCE)
    one_node = speed([run("a", "vgg16", ["s1n1", "s1n1"])], "a", model)
    two_nodes = speed([run("a", "vgg16", ["s1n1", "s1n2"])], "a", model)
    assert two_nodes < one_node < speed([run("a", "vgg16", ["s1n1"])], "a", model)


@pytest.mark.parametrize("num_ps", [0, 1])
def test_sharing_a_nic_with_another_spanning_job_slows_comm(num_ps: int) -> None:
    model = ContentionSpeedModel(NO_INTERFERENCE)
    a = run("a", "vgg16", ["s1n1", "s1n2", "s1n2"] if num_ps else ["s1n1", "s1n2"], num_ps=num_ps)
    alone = speed([a], "a", model)
    nic_shared = speed([a, run("b", "transformer", ["s1n2", "s1n3"])], "a", model)
    on_one_node = speed([a, run("b", "transformer", ["s1n2", "s1n2"])], "a", model)  # no NIC traffic
    elsewhere = speed([a, run("b", "transformer", ["s1n3", "s1n4"])], "a", model)
    assert nic_shared < alone
    assert on_one_node == pytest.approx(alone)
    assert elsewhere == pytest.approx(alone)


def test_nic_sharing_matters_even_with_interference() -> None:
    # b on one node adds more interference than b spanning, yet spanning b hurts a more
    a = run("a", "vgg16", ["s1n1", "s1n2"])
    spanning = speed([a, run("b", "transformer", ["s1n2", "s1n3"])], "a")
    packed = speed([a, run("b", "transformer", ["s1n2", "s1n2"])], "a")
    assert spanning < packed


@pytest.mark.parametrize("num_ps, same, cross", [
    (0, ["s1n1", "s1n2"], ["s1n1", "s2n1"]),
    (1, ["s1n1", "s1n2", "s1n3"], ["s1n1", "s2n1", "s2n2"]),
])
def test_cross_switch_is_slower_than_same_switch(num_ps: int, same: list[str], cross: list[str]) -> None:
    assert speed([run("a", "vgg16", cross, num_ps)], "a") < speed([run("a", "vgg16", same, num_ps)], "a")


def test_nodes_without_switch_count_as_one_switch() -> None:
    bare = [Node(n.name, n.cpus, n.gpus, n.mem_mb) for n in NODES]
    rj = run("a", "vgg16", ["s1n1", "s2n1"])
    model = ContentionSpeedModel()
    same_switch = model.speeds(NODES, [run("a", "vgg16", ["s1n1", "s1n2"])])["a"]
    assert model.speeds(bare, [rj])["a"] == pytest.approx(same_switch)


def test_busy_ps_node_slows_the_ps_update() -> None:
    job = run("p", "vgg16", ["s1n1", "s1n2", "s1n3"], num_ps=1)
    busy = speed([job, run("x", "a3c", ["s1n1"]), run("y", "a3c", ["s1n1"])], "p")
    assert busy < speed([job], "p")


def test_only_filters_but_does_not_change_values() -> None:
    running = [run("a", "resnet50", ["s1n1"]), run("b", "a3c", ["s1n1"]),
               run("c", "vgg16", ["s1n2", "s1n3"], num_ps=1)]
    model = ContentionSpeedModel()
    full = model.speeds(NODES, running)
    assert set(full) == {"a", "b", "c"}
    assert model.speeds(NODES, running, only={"a", "c"}) == {"a": full["a"], "c": full["c"]}
    assert model.speeds(NODES, running, only=[]) == {}
    assert model.speeds(NODES, running, only={"zzz"}) == {}


def test_deterministic() -> None:
    running = [run("a", "resnet50", ["s1n1", "s1n2"]), run("b", "a3c", ["s1n1"]),
               run("c", "vgg16", ["s1n2", "s2n1", "s2n1"], num_ps=1)]
    first = ContentionSpeedModel().speeds(NODES, running)
    assert ContentionSpeedModel().speeds(NODES, running) == first
    assert ContentionSpeedModel().speeds(NODES, list(reversed(running))) == pytest.approx(first)
    assert all(v > 0 for v in first.values())


def test_is_a_local_model() -> None:
    model = ContentionSpeedModel()
    assert model.local is True and model.name == "contention"
