"""PolluxSpeedModel against the real Pollux placement profiles."""
from pathlib import Path

import pytest

from slurm_advisor.domain import Job, Node, Placement, Resources, RunningJob
from slurm_advisor.errors import InputError
from slurm_advisor.speedmodels.pollux import PolluxSpeedModel, canonical

NODES = [Node(f"n{i}", 32, 8, 256_000) for i in range(6)]
WORKER = Resources(4, 1, 16_000)


@pytest.fixture(scope="module")
def model(shared_data: Path) -> PolluxSpeedModel:
    return PolluxSpeedModel(shared_data / "pollux" / "models")


def run(job_id: str, nodes: list[str], job_type: str = "resnet50", batch: int | None = 20,
        num_ps: int = 0) -> RunningJob:
    job = Job(job_id, job_type, num_ps, len(nodes) - num_ps, Resources(2, 0, 8_000), WORKER,
              1000.0, batch_size=batch)
    return RunningJob(job, Placement.of(job, nodes))


def speed(model: PolluxSpeedModel, rj: RunningJob) -> float:
    return model.speeds(NODES, [rj])[rj.job.id]


def test_canonical_rotation() -> None:
    assert canonical([2, 0, 1]) == (1, 2)
    assert canonical([3, 1, 2]) == (1, 2, 3)
    assert canonical([1, 3, 2]) == (1, 3, 2)


def test_consolidated_beats_spread(model: PolluxSpeedModel) -> None:
    packed = speed(model, run("a", ["n0"] * 4))
    two_by_two = speed(model, run("a", ["n0", "n0", "n1", "n1"]))
    four_by_one = speed(model, run("a", ["n0", "n1", "n2", "n3"]))
    assert packed == pytest.approx(1 / 0.161, rel=0.01)
    assert two_by_two == pytest.approx(1 / 0.383, rel=0.01)
    assert four_by_one == pytest.approx(1 / 0.334, rel=0.01)
    assert packed > four_by_one > two_by_two


def test_batch_interpolated_and_clamped(model: PolluxSpeedModel) -> None:
    small = speed(model, run("a", ["n0"], batch=20))
    mid = speed(model, run("a", ["n0"], batch=24))
    big = speed(model, run("a", ["n0"], batch=28))
    assert small == pytest.approx(1 / 0.14740917682647706)
    assert big < mid < small
    assert speed(model, run("a", ["n0"], batch=1)) == pytest.approx(small)


def test_eight_workers_on_one_node_use_fallback(model: PolluxSpeedModel) -> None:
    eight = speed(model, run("a", ["n0"] * 8))
    four = speed(model, run("a", ["n0"] * 4))
    assert 0 < eight <= four
    assert eight > speed(model, run("a", ["n0"] * 4 + ["n1"] * 4))


def test_large_spread_job_gets_a_speed(model: PolluxSpeedModel) -> None:
    big = run("a", [f"n{i % 6}" for i in range(20)])
    assert 0 < speed(model, big) < speed(model, run("b", ["n0"]))


def test_neighbours_do_not_change_speed(model: PolluxSpeedModel) -> None:
    a = run("a", ["n0", "n0"])
    crowded = model.speeds(NODES, [a, run("b", ["n0", "n0"]), run("c", ["n0"], job_type="bert")])
    assert crowded["a"] == pytest.approx(speed(model, a))


def test_only_and_unknown_type(model: PolluxSpeedModel) -> None:
    jobs = [run("a", ["n0"]), run("x", ["n1"], job_type="my-new-net", batch=None)]
    assert set(model.speeds(NODES, jobs, only={"x"})) == {"x"}
    assert model.speeds(NODES, jobs)["x"] > 0


def test_ps_only_node_counts_as_extra_node(model: PolluxSpeedModel) -> None:
    plain = speed(model, run("a", ["n0", "n0"]))
    with_ps = speed(model, run("a", ["n1", "n0", "n0"], num_ps=1))
    ps_alongside = speed(model, run("a", ["n0", "n0", "n0"], num_ps=1))
    assert with_ps < plain
    assert ps_alongside == pytest.approx(plain)


def test_bad_path_names_it(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="nowhere"):
        PolluxSpeedModel(tmp_path / "nowhere")
    (tmp_path / "m" / "imagenet").mkdir(parents=True)
    with pytest.raises(InputError, match="placements.csv"):
        PolluxSpeedModel(tmp_path / "m")


# -- orders of magnitude: Pollux measured placements, not neighbours or switches ----------
def test_seven_neighbours_on_one_node_change_nothing(model: PolluxSpeedModel) -> None:
    me = run("me", ["n0"], batch=None)
    mix = ("resnet18", "ncf", "deepspeech2", "resnet50", "yolov3", "bert", "vgg16")
    others = [run(f"o{i}", ["n0"], job_type=t, batch=None) for i, t in enumerate(mix)]
    assert model.speeds(NODES, [me, *others], {"me"})["me"] == speed(model, me)


@pytest.mark.parametrize("job_type", ["resnet18", "resnet50", "vgg16", "bert", "deepspeech2", "yolov3", "ncf"])
def test_spreading_costs_what_pollux_measured_and_switches_add_nothing(model: PolluxSpeedModel,
                                                                      job_type: str) -> None:
    switched = [Node(f"n{i}", 32, 8, 256_000, f"s{i // 2}") for i in range(4)]
    packed, same, cross = (model.speeds(switched, [run("a", nodes, job_type=job_type, batch=None)])["a"]
                           for nodes in (["n0"] * 4, ["n0", "n0", "n1", "n1"], ["n0", "n0", "n2", "n2"]))
    assert 1.2 <= packed / same <= 3.0  # Pollux's testbed: 1.3-2.5x for 2+2 against 4 on one node
    assert cross == same
