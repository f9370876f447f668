"""The frozen closed-loop truth (benchmarks/truths/power_cap.py): it loads as a plug-in and does
what its docstring says. These tests guard the freeze: a change to a constant that moves these
figures fails here."""
from pathlib import Path

import pytest
from test_site_holdout_truth import NODES, running

from slurm_advisor.domain import Resources
from slurm_advisor.speedmodels.plugin import PluginSpeedModel

TRUTH = Path(__file__).resolve().parents[2] / "benchmarks" / "truths" / "power_cap.py"


@pytest.fixture(scope="module")
def truth():
    return PluginSpeedModel(f"{TRUTH}:PowerCapSpeeds")


def test_a_job_alone_on_one_node_runs_at_its_compute_rate(truth):
    alone = truth.speeds(NODES, [running("a", "resnet50", ["n0"] * 4)])["a"]
    assert alone == pytest.approx(3.5 * 4 ** 0.9)


def test_a_busy_rack_slows_a_job_that_shares_no_node_with_the_others(truth):
    job = running("a", "resnet50", ["n0"] * 2)
    # the other jobs fill 6 of rack s0's other 7 nodes: 50 of its 64 GPUs busy (78 %)
    others = [running(f"o{i}", "vgg16", [f"n{i}"] * 8) for i in range(1, 7)]
    quiet = truth.speeds(NODES, [job])["a"]
    capped = truth.speeds(NODES, [job, *others])["a"]
    assert capped / quiet == pytest.approx(1 - 0.3 * (50 / 64 - 0.7) / 0.3)
    # the same load in the other rack leaves it alone
    elsewhere = [running(f"o{i}", "vgg16", [f"n{8 + i}"] * 8) for i in range(1, 7)]
    assert truth.speeds(NODES, [job, *elsewhere])["a"] == pytest.approx(quiet)


def test_a_communication_heavy_job_is_network_bound_across_nodes_and_more_across_switches(truth):
    one_node = truth.speeds(NODES, [running("a", "recommendation", ["n0"] * 4)])["a"]
    two_nodes = truth.speeds(NODES, [running("a", "recommendation", ["n0", "n0", "n1", "n1"])])["a"]
    two_racks = truth.speeds(NODES, [running("a", "recommendation", ["n0", "n0", "n8", "n8"])])["a"]
    assert one_node == pytest.approx(6.0 * 4 ** 0.9)
    assert two_nodes == pytest.approx(12.5 / 2.0 * 2)  # the lesser of compute (20.9) and network
    assert two_racks == pytest.approx(two_nodes / 2)
    # a light model stays compute-bound across nodes
    light = truth.speeds(NODES, [running("a", "resnet18", ["n0", "n0", "n1", "n1"])])["a"]
    assert light == pytest.approx(7.0 * 4 ** 0.9)


def test_a_node_with_its_cpus_taken_stalls_input_pipelines(truth):
    heavy = running("b", "ncf", ["n0"] * 2, worker=Resources(20, 0, 1000))
    job = running("a", "resnet50", ["n0"])
    assert truth.speeds(NODES, [job, heavy])["a"] == pytest.approx(0.8 * truth.speeds(NODES, [job])["a"])
