"""The frozen closed-loop truth written before the speed model saw rack-level load
(benchmarks/truths/fabric.py): it loads as a plug-in and does what its docstring says. These
tests guard the freeze: a change to a constant that moves these figures fails here."""
from pathlib import Path

import pytest
from test_site_holdout_truth import NODES, running

from slurm_advisor.domain import Resources
from slurm_advisor.speedmodels.plugin import PluginSpeedModel

TRUTH = Path(__file__).resolve().parents[2] / "benchmarks" / "truths" / "fabric.py"


@pytest.fixture(scope="module")
def truth():
    return PluginSpeedModel(f"{TRUTH}:FabricSpeeds")


def speed(truth, jobs, job_id="a"):
    return truth.speeds(NODES, jobs)[job_id]


def test_a_one_worker_job_runs_at_its_step_time_on_a_current_node_and_slower_on_an_old_one(truth):
    assert speed(truth, [running("a", "resnet50", ["n0"])]) == pytest.approx(1 / 0.30)
    # n0-n3 are rack s0's current generation, n4-n7 its older one
    assert speed(truth, [running("a", "resnet50", ["n4"])]) == pytest.approx(0.6 / 0.30)


def test_a_job_runs_at_its_slowest_workers_pace(truth):
    mixed = speed(truth, [running("a", "resnet18", ["n3", "n4"])])
    both_old = speed(truth, [running("a", "resnet18", ["n4", "n5"])])
    assert mixed == pytest.approx(both_old)


def test_more_than_four_gpus_of_a_job_on_a_node_leave_nvlink_for_pcie(truth):
    four = speed(truth, [running("a", "bert", ["n0"] * 4)])
    five = speed(truth, [running("a", "bert", ["n0"] * 5)])
    comm4, comm5 = 1 / four - 0.85, 1 / five - 0.85
    assert comm4 == pytest.approx(2 * 3 / 4 * 1.3 / 150)
    assert comm5 == pytest.approx(2 * 4 / 5 * 1.3 / 37.5)


def test_memory_bandwidth_beyond_the_node_slows_every_task_there(truth):
    job = running("a", "resnet50", ["n0"])
    heavy = running("b", "recommendation", ["n0"] * 4, worker=Resources(4, 1, 24_000))  # draws 0.96
    assert speed(truth, [job, heavy]) == pytest.approx(speed(truth, [job]) / (0.96 + 0.14))


def test_jobs_that_share_no_node_share_a_rack_uplink(truth):
    # rack s1's current generation is n10-n13: its names sort as n10 ... n15, n8, n9
    job = running("a", "transformer", ["n0", "n10"])
    alone = speed(truth, [job])
    crossing = [running(f"o{i}", "resnet18", [f"n{i}", f"n{10 + i}"]) for i in (1, 2, 3)]
    shared = speed(truth, [job, *crossing])
    assert 1 / shared - 0.65 == pytest.approx(2 * 1 / 2 * 1.0 / (25 * 0.5 / 4))
    assert 1 / alone - 0.65 == pytest.approx(2 * 1 / 2 * 1.0 / (25 * 0.5))
    # the same jobs inside one rack each leave the uplink alone
    inside = [running(f"o{i}", "resnet18", [f"n{i}", f"n{i + 4}"]) for i in (1, 2, 3)]
    assert speed(truth, [job, *inside]) == pytest.approx(alone)


def test_a_ps_job_pays_for_its_busiest_shard(truth):
    one_ps = speed(truth, [running("a", "vgg16", ["n0", "n1"], ps_nodes=["n2"])])
    two_ps = speed(truth, [running("a", "vgg16", ["n0", "n1"], ps_nodes=["n2", "n3"])])
    assert 1 / one_ps - 0.40 == pytest.approx(2 * 0.55 * 2 / 1 / 25.0)
    assert 1 / two_ps - 0.40 == pytest.approx(2 * 0.55 * 2 / 2 / 25.0)
