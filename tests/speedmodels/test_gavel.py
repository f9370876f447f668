"""GavelSpeedModel against the real Gavel throughput table (read here, not copied)."""
import json
import statistics
from pathlib import Path

import pytest

from slurm_advisor.domain import Job, Node, Placement, Resources, RunningJob
from slurm_advisor.domain.jobtypes import KNOWN_TYPES
from slurm_advisor.errors import InputError
from slurm_advisor.speedmodels.gavel import COLOCATION_WEIGHT, GavelSpeedModel, scaled

NODES = [Node(f"n{i}", 32, 8, 256_000) for i in range(4)]
# two switches of two nodes each
SWITCHED = tuple(Node(f"n{i}", 32, 8, 256_000, f"s{i // 2}") for i in range(4))
WORKER = Resources(4, 1, 16_000)
RESNET50 = "('ResNet-50 (batch size 64)', {})"
TRANSFORMER = "('Transformer (batch size 64)', {})"
PHILLY_MIX = ("resnet18", "ncf", "lstm", "resnet50", "yolov3", "bert", "deepspeech2")


@pytest.fixture(scope="module")
def gavel_path(shared_data: Path) -> Path:
    return shared_data / "gavel" / "simulation_throughputs.json"


@pytest.fixture(scope="module")
def model(gavel_path: Path) -> GavelSpeedModel:
    return GavelSpeedModel(gavel_path)


@pytest.fixture(scope="module")
def table(gavel_path: Path) -> dict:
    with open(gavel_path, encoding="utf-8") as fh:
        return json.load(fh)


def run(job_id: str, job_type: str, nodes: list[str], batch: int | None = None,
        num_ps: int = 0) -> RunningJob:
    job = Job(job_id, job_type, num_ps, len(nodes) - num_ps, Resources(2, 0, 8_000), WORKER,
              1000.0, batch_size=batch)
    return RunningJob(job, Placement.of(job, nodes))


def test_resnet50_alone_matches_measured_null(model: GavelSpeedModel, table: dict) -> None:
    speeds = model.speeds(NODES, [run("a", "resnet50", ["n0"], batch=64)])
    assert speeds["a"] == pytest.approx(table["v100"][RESNET50.format(1)]["null"], rel=1e-12)


def test_batch_size_snaps_to_nearest_measured(model: GavelSpeedModel) -> None:
    assert model.key_for(run("a", "resnet50", ["n0"], batch=60).job) == ("ResNet-50", 64)
    assert model.key_for(run("a", "resnet50", ["n0"], batch=1000).job) == ("ResNet-50", 128)
    assert model.key_for(run("a", "a3c", ["n0"]).job) == ("A3C", None)


def test_colocation_slower_than_alone_but_far_gentler_than_gpu_sharing(model: GavelSpeedModel,
                                                                        table: dict) -> None:
    entry = table["v100"][RESNET50.format(1)]
    alone, gpu_shared = entry["null"], entry[TRANSFORMER.format(1)][0]
    both = [run("a", "resnet50", ["n0"], batch=64), run("b", "transformer", ["n0"], batch=64)]
    speed = model.speeds(NODES, both)["a"]
    assert gpu_shared < speed < alone
    assert alone / speed == pytest.approx(1 + COLOCATION_WEIGHT * (1 - gpu_shared / alone))
    assert alone / speed - 1 < 0.1 * (alone / gpu_shared - 1)  # a tenth of sharing the GPU, or less


def test_spread_job_uses_unconsolidated_table(model: GavelSpeedModel, table: dict) -> None:
    packed = model.speeds(NODES, [run("a", "resnet50", ["n0", "n0"], batch=64)])["a"]
    spread = model.speeds(NODES, [run("a", "resnet50", ["n0", "n1"], batch=64)])["a"]
    assert packed == pytest.approx(table["v100"][RESNET50.format(2)]["null"], rel=1e-12)
    assert spread == pytest.approx(table["v100_unconsolidated"][RESNET50.format(2)]["null"], rel=1e-12)
    assert spread < packed


@pytest.mark.parametrize("workers", [2, 3, 4, 6, 8, 16])
def test_spread_never_beats_consolidated(model: GavelSpeedModel, table: dict, workers: int) -> None:
    """Measured spread-faster entries (noise) are capped at the consolidated speed."""
    noisy = [k for k, e in table["v100_unconsolidated"].items()
             if e["null"] > table["v100"].get(k, {}).get("null", float("inf"))]
    assert noisy  # the table has such entries: the cap is exercised
    for job_type in sorted(KNOWN_TYPES):
        packed = model.speeds(NODES, [run("a", job_type, ["n0"] * workers)])["a"]
        nodes = [f"n{i % 2}" for i in range(workers)]
        assert model.speeds(NODES, [run("a", job_type, nodes)])["a"] <= packed


def test_scale_factor_interpolation_and_extrapolation() -> None:
    by_sf = {1: 1.0, 2: 2.0, 4: 3.0, 8: 8.0}
    assert scaled(by_sf, 3) == pytest.approx(2.5)
    assert scaled(by_sf, 6) == pytest.approx(5.5)
    assert scaled(by_sf, 16) == pytest.approx(16.0 * 0.86)
    assert scaled({1: 2.0}, 4) == pytest.approx(8.0 * 0.86 ** 2)


def test_single_gpu_model_scales_with_workers(model: GavelSpeedModel) -> None:
    one = model.speeds(NODES, [run("a", "cyclegan", ["n0"])])["a"]
    two = model.speeds(NODES, [run("a", "cyclegan", ["n0", "n0"])])["a"]
    assert one < two < 2 * one


def test_slowest_node_decides(model: GavelSpeedModel) -> None:
    """A 2-node job with a neighbour on one node pays that node's slowdown once."""
    job = run("a", "resnet50", ["n0", "n1"], batch=64)
    alone = model.speeds(NODES, [job])["a"]
    hit = model.speeds(NODES, [job, run("b", "transformer", ["n1"], batch=64)])["a"]
    twice = model.speeds(NODES, [job, run("b", "transformer", ["n1"], batch=64),
                                 run("c", "transformer", ["n0"], batch=64)])["a"]
    assert hit < alone
    assert twice == pytest.approx(hit)


def test_only_restricts_ids(model: GavelSpeedModel) -> None:
    jobs = [run("a", "resnet50", ["n0"]), run("b", "lstm", ["n0"]), run("c", "bert", ["n1"])]
    assert set(model.speeds(NODES, jobs, only=["b"])) == {"b"}
    assert set(model.speeds(NODES, jobs)) == {"a", "b", "c"}


def test_unknown_type_and_ps_job_get_a_speed(model: GavelSpeedModel) -> None:
    jobs = [run("x", "my-new-net", ["n0"]), run("p", "resnet50", ["n2", "n2", "n3"], num_ps=1)]
    speeds = model.speeds(NODES, jobs)
    assert speeds["x"] > 0 and speeds["p"] > 0


def test_unknown_worker_type_lists_valid(gavel_path: Path) -> None:
    with pytest.raises(InputError, match="k80, p100, v100"):
        GavelSpeedModel(gavel_path, worker_type="a100")


def test_missing_or_malformed_file_names_it(tmp_path: Path) -> None:
    missing = tmp_path / "nope.json"
    with pytest.raises(InputError, match="nope.json"):
        GavelSpeedModel(missing)
    bad = tmp_path / "bad.json"
    bad.write_text('{"v100": {"not a key": {"null": 1.0}}}')
    with pytest.raises(InputError, match="bad.json"):
        GavelSpeedModel(bad)


# -- orders of magnitude (published measurements; sources in the module docstring) ----------
def beside(model: GavelSpeedModel, job_type: str, neighbours: list[str]) -> float:
    """Slowdown of a 1-GPU job when each neighbour runs a 1-GPU job on another GPU of its node."""
    me = run("me", job_type, ["n0"])
    others = [run(f"o{i}", t, ["n0"]) for i, t in enumerate(neighbours)]
    return model.speeds(NODES, [me])["me"] / model.speeds(NODES, [me, *others], {"me"})["me"]


@pytest.mark.parametrize("job_type", sorted(KNOWN_TYPES))
def test_seven_neighbours_on_one_node_cost_about_a_tenth(model: GavelSpeedModel, job_type: str) -> None:
    """Sharing a server, not a GPU: ~10 % (Crux: +11 %), never multiples."""
    assert 1.0 <= beside(model, job_type, list(PHILLY_MIX)) <= 1.2
    assert max(beside(model, job_type, [other] * 7) for other in sorted(KNOWN_TYPES)) <= 1.25


def test_neighbour_slowdown_adds_up(model: GavelSpeedModel) -> None:
    slowdowns = [beside(model, "resnet50", list(PHILLY_MIX[:k])) for k in (0, 1, 3, 7)]
    assert slowdowns[0] == pytest.approx(1.0)
    assert slowdowns == sorted(slowdowns) and slowdowns[1] < slowdowns[3]
    one = beside(model, "resnet50", ["lstm"]) - 1
    assert beside(model, "resnet50", ["lstm"] * 7) - 1 == pytest.approx(7 * one)  # not compounded
    assert statistics.fmean(beside(model, t, list(PHILLY_MIX)) for t in PHILLY_MIX) == pytest.approx(1.1, abs=0.05)


def split(model: GavelSpeedModel, job_type: str, workers: int) -> tuple[float, float]:
    """Slowdown vs consolidated over two nodes of one switch (n0, n1), and of two (n0, n2)."""
    half = workers // 2
    packed = model.speeds(SWITCHED, [run("j", job_type, ["n0"] * workers)])["j"]
    same = model.speeds(SWITCHED, [run("j", job_type, ["n0"] * half + ["n1"] * (workers - half))])["j"]
    cross = model.speeds(SWITCHED, [run("j", job_type, ["n0"] * half + ["n2"] * (workers - half))])["j"]
    return packed / same, packed / cross


@pytest.mark.parametrize("workers", [2, 8])
def test_comm_heavy_job_pays_for_leaving_the_node_and_more_for_leaving_the_switch(
        model: GavelSpeedModel, table: dict, workers: int) -> None:
    two_nodes, two_switches = split(model, "transformer", workers)
    key = TRANSFORMER.format(workers)
    measured = table["v100"][key]["null"] / table["v100_unconsolidated"][key]["null"]
    assert two_nodes == pytest.approx(measured, rel=1e-9)
    assert 1.3 <= two_nodes <= 3.0
    assert two_switches > two_nodes * 1.3


def test_compute_bound_job_hardly_cares_where_it_runs(model: GavelSpeedModel) -> None:
    for workers in (2, 4, 8):
        two_nodes, two_switches = split(model, "resnet50", workers)
        heavy_nodes, heavy_switches = split(model, "transformer", workers)
        assert 1.0 <= two_nodes <= 1.2 and two_nodes <= two_switches <= 1.35
        assert two_nodes < heavy_nodes and two_switches < heavy_switches


def test_nodes_without_switch_count_as_one_switch(model: GavelSpeedModel) -> None:
    rj = run("a", "transformer", ["n0", "n2"])
    assert model.speeds(NODES, [rj])["a"] == pytest.approx(
        model.speeds(SWITCHED, [run("a", "transformer", ["n0", "n1"])])["a"])
