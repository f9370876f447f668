"""GavelSpeedModel against the real Gavel throughput table."""
from pathlib import Path

import pytest

from slurm_advisor.domain import Job, Node, Placement, Resources, RunningJob
from slurm_advisor.errors import InputError
from slurm_advisor.speedmodels.gavel import GavelSpeedModel, scaled

NODES = [Node(f"n{i}", 32, 8, 256_000) for i in range(4)]
WORKER = Resources(4, 1, 16_000)


@pytest.fixture(scope="module")
def gavel_path(shared_data: Path) -> Path:
    return shared_data / "gavel" / "simulation_throughputs.json"


@pytest.fixture(scope="module")
def model(gavel_path: Path) -> GavelSpeedModel:
    return GavelSpeedModel(gavel_path)


def run(job_id: str, job_type: str, nodes: list[str], batch: int | None = None,
        num_ps: int = 0) -> RunningJob:
    job = Job(job_id, job_type, num_ps, len(nodes) - num_ps, Resources(2, 0, 8_000), WORKER,
              1000.0, batch_size=batch)
    return RunningJob(job, Placement.of(job, nodes))


def test_resnet50_alone_matches_measured_null(model: GavelSpeedModel) -> None:
    speeds = model.speeds(NODES, [run("a", "resnet50", ["n0"], batch=64)])
    assert speeds["a"] == pytest.approx(4.394774823323071)


def test_batch_size_snaps_to_nearest_measured(model: GavelSpeedModel) -> None:
    assert model.key_for(run("a", "resnet50", ["n0"], batch=60).job) == ("ResNet-50", 64)
    assert model.key_for(run("a", "resnet50", ["n0"], batch=1000).job) == ("ResNet-50", 128)
    assert model.key_for(run("a", "a3c", ["n0"]).job) == ("A3C", None)


def test_colocation_slower_than_alone_but_gentler_than_gpu_sharing(model: GavelSpeedModel) -> None:
    alone = 4.394774823323071
    gpu_shared = 2.55026372359856  # Gavel: ResNet-50 bs64 packed on one GPU with Transformer bs64
    both = [run("a", "resnet50", ["n0"], batch=64), run("b", "transformer", ["n0"], batch=64)]
    speed = model.speeds(NODES, both)["a"]
    assert gpu_shared < speed < alone
    assert speed == pytest.approx(alone * (1 - 0.5 * (1 - gpu_shared / alone)))


def test_neighbours_on_other_nodes_do_not_matter(model: GavelSpeedModel) -> None:
    jobs = [run("a", "resnet50", ["n0"], batch=64), run("b", "transformer", ["n1"], batch=64)]
    assert model.speeds(NODES, jobs)["a"] == pytest.approx(4.394774823323071)


def test_spread_job_uses_unconsolidated_table(model: GavelSpeedModel) -> None:
    packed = model.speeds(NODES, [run("a", "resnet50", ["n0", "n0"], batch=64)])["a"]
    spread = model.speeds(NODES, [run("a", "resnet50", ["n0", "n1"], batch=64)])["a"]
    assert packed == pytest.approx(7.922054367597505)
    assert spread == pytest.approx(6.865936825179568)


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
