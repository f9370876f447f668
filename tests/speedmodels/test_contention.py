"""The contention ground truth: interference from neighbours, network from spreading."""
import statistics

import pytest

from slurm_advisor.domain import Job, Node, Placement, Resources, RunningJob
from slurm_advisor.domain.jobtypes import KNOWN_TYPES, profile_for, reference_speed
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


# -- orders of magnitude (published measurements; sources in the module docstring) ----------
PHILLY_MIX = ("resnet18", "ncf", "lstm", "resnet50", "yolov3", "bert", "deepspeech2")
KNOWN = sorted(KNOWN_TYPES)


def beside(job_type: str, neighbours: list[str], model: ContentionSpeedModel | None = None) -> float:
    """Slowdown of a 1-GPU job when each neighbour runs a 1-GPU job on another GPU of its node."""
    me = run("me", job_type, ["s1n1"])
    others = [run(f"o{i}", t, ["s1n1"]) for i, t in enumerate(neighbours)]
    return speed([me], "me", model) / speed([me, *others], "me", model)


@pytest.mark.parametrize("job_type", KNOWN)
def test_seven_neighbours_on_one_node_cost_about_a_tenth(job_type: str) -> None:
    """Sharing a server, not a GPU: ~10 % (Crux: +11 %), never multiples."""
    mix = beside(job_type, list(PHILLY_MIX))
    worst = max(beside(job_type, [other] * 7) for other in KNOWN)
    assert 1.0 < mix <= 1.2
    assert mix <= worst <= 1.25


def test_neighbour_slowdown_grows_with_their_number() -> None:
    slowdowns = [beside("resnet50", list(PHILLY_MIX[:k])) for k in (0, 1, 3, 7)]
    assert slowdowns[0] == pytest.approx(1.0)
    assert slowdowns == sorted(slowdowns) and slowdowns[1] < slowdowns[3]
    assert statistics.fmean(beside(t, list(PHILLY_MIX)) for t in PHILLY_MIX) == pytest.approx(1.1, abs=0.05)


def split(job_type: str, num_ps: int, num_workers: int) -> tuple[float, float]:
    """Slowdown vs consolidated of the job split over two nodes of one switch, and of two."""
    def layout(a: str, b: str) -> list[str]:
        ps = [a if i % 2 == 0 else b for i in range(num_ps)]
        return ps + [a] * (num_workers // 2) + [b] * (num_workers - num_workers // 2)

    packed = speed([run("j", job_type, ["s1n1"] * (num_ps + num_workers), num_ps)], "j")
    return (packed / speed([run("j", job_type, layout("s1n1", "s1n2"), num_ps)], "j"),
            packed / speed([run("j", job_type, layout("s1n1", "s2n1"), num_ps)], "j"))


@pytest.mark.parametrize("num_ps", [0, 2])
def test_comm_heavy_job_pays_for_leaving_the_node_and_more_for_leaving_the_switch(num_ps: int) -> None:
    # intra-node 80 vs NIC 25 Gbit/s (3.2x; nccl-tests on 2x8 A100: 2.7x), uplinks 2:1
    two_nodes, two_switches = split("vgg16", num_ps, 8)
    assert 1.2 <= two_nodes <= 3.0
    assert two_nodes * 1.2 <= two_switches <= 4.0


def test_compute_bound_job_hardly_cares_where_it_runs() -> None:
    two_nodes, two_switches = split("deepspeech2", 0, 8)
    heavy_nodes, heavy_switches = split("vgg16", 0, 8)
    assert 0.95 <= two_nodes <= 1.1 and two_nodes <= two_switches <= 1.25
    assert two_nodes < heavy_nodes and two_switches < heavy_switches


def test_switch_map_is_built_once_per_nodes_tuple() -> None:
    """The simulator passes all nodes on every call: they must not be re-read each time."""
    class CountingTuple(tuple):
        reads = 0

        def __iter__(self):
            CountingTuple.reads += 1
            return super().__iter__()

    nodes = CountingTuple(NODES)
    model = ContentionSpeedModel()
    running = [run("a", "vgg16", ["s1n1", "s2n1"]), run("b", "resnet50", ["s1n2"])]
    first = model.speeds(nodes, running)
    for _ in range(5):
        assert model.speeds(nodes, running, {"a"}) == {"a": first["a"]}
        assert model.speeds(nodes, running, {"b"}) == {"b": first["b"]}
    assert CountingTuple.reads == 1
