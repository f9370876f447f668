"""The avg-JCT floor: no wait, alone, on the fastest of the baselines' placements."""
from pathlib import Path

import pytest

from slurm_advisor.domain import Job, Node, Resources
from slurm_advisor.policies.isolated import IsolatedSpeeds
from slurm_advisor.sim.clusterfile import read_cluster
from slurm_advisor.sim.floor import floor_avg_jct, solo_runtime
from slurm_advisor.sim.runner import compare
from slurm_advisor.speedmodels import load_speed_model
from slurm_advisor.speedmodels.constant import ConstantSpeed
from slurm_advisor.traces.synthetic import synthetic_jobs

REPO = Path(__file__).resolve().parents[2]
NODES = (Node("n1", 8, 4, 64_000, "s1"), Node("n2", 8, 4, 64_000, "s1"),
         Node("n3", 8, 4, 64_000, "s2"), Node("n4", 8, 4, 64_000, "s2"))


def job(job_id: str, workers: int, iterations: float, gpus: int = 1) -> Job:
    return Job(job_id, "resnet50", 0, workers, Resources(1, 0, 1000), Resources(2, gpus, 4000), iterations, 0.0)


class FasterSpread:
    """1 iteration/s on one node, 1.5 on two or more: spreading pays, which consolidating misses."""
    name = "faster-spread"
    local = True

    def speeds(self, nodes, running, only=None):
        return {rj.job.id: 1.5 if len(rj.placement.nodes()) > 1 else 1.0
                for rj in running if only is None or rj.job.id in only}


def test_under_a_constant_speed_the_floor_is_the_mean_run_time():
    jobs = [job("a", 2, 100.0), job("b", 4, 300.0), job("c", 1, 50.0)]
    assert floor_avg_jct(NODES, jobs, ConstantSpeed(2.0)) == pytest.approx((50 + 150 + 25) / 3)


def test_the_floor_takes_the_fastest_placement_not_the_consolidated_one():
    j = job("a", 2, 150.0)
    consolidated = j.iterations / IsolatedSpeeds(FasterSpread(), NODES)(j)
    assert consolidated == pytest.approx(150.0)  # Slurm's rule puts both workers on one node
    assert solo_runtime(NODES, j, FasterSpread()) == pytest.approx(100.0)  # spread: 1.5 it/s


def test_jobs_that_never_fit_are_left_out_as_the_simulator_skips_them():
    jobs = [job("a", 2, 100.0), job("huge", 5, 100.0, gpus=4)]  # 20 GPUs on a 16-GPU cluster
    assert floor_avg_jct(NODES, jobs, ConstantSpeed()) == pytest.approx(100.0)
    with pytest.raises(ValueError, match="huge"):
        solo_runtime(NODES, jobs[1], ConstantSpeed())


def test_no_policy_beats_the_floor_on_a_real_truth():
    nodes = read_cluster(REPO / "examples" / "clusters" / "16x8.toml")
    truth = load_speed_model("contention")
    jobs = synthetic_jobs(40, seed=3, mix="large")
    floor = floor_avg_jct(nodes, jobs, truth)
    for name, result in compare(nodes, jobs, truth, ["slurm-default", "pack", "spread", "tetris"]).items():
        avg = sum(r.jct for r in result.records) / len(result.records)
        assert avg >= floor * 0.999, name
