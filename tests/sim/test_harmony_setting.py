"""benchmarks/harmony_repro.py's setting: arrivals moved to interval starts (one batch per
interval), Harmony's cluster shape and its parameter-server jobs."""
import importlib.util
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from slurm_advisor.domain import Job, Resources

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "harmony_repro.py"


@pytest.fixture(scope="module")
def repro():
    sys.path.insert(0, str(SCRIPT.parent))  # as when it runs: its directory is on sys.path
    try:
        spec = importlib.util.spec_from_file_location("harmony_repro", SCRIPT)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(SCRIPT.parent))
    return module


def job(job_id: str, submit: float) -> Job:
    return Job(job_id, "resnet50", 1, 2, Resources(2, 0, 8000), Resources(2, 1, 12000), 100, submit)


def test_arrivals_move_back_to_their_interval_start(repro):
    jobs = [job("a", 0.0), job("b", 3599.9), job("c", 3600.0), job("d", 7300.5), job("e", 9000.0)]
    batched = repro.at_interval_starts(jobs, 3600.0)
    assert [j.submit_time for j in batched] == [0.0, 0.0, 3600.0, 7200.0, 7200.0]
    assert [j.id for j in batched] == ["a", "b", "c", "d", "e"]  # order kept, nothing else changed
    assert all(b == replace(a, submit_time=b.submit_time) for a, b in zip(jobs, batched))
    with pytest.raises(ValueError):
        repro.at_interval_starts(jobs, 0.0)


def test_harmony_jobs_are_ps_jobs_that_fit_one_cluster_and_repeat_for_a_seed(repro):
    nodes = repro.harmony_nodes(1)
    jobs = repro.harmony_jobs(200, seed=5)
    assert jobs == repro.harmony_jobs(200, seed=5)
    assert all(j.num_ps >= 1 and j.type in repro.STAND_INS for j in jobs)
    gpus, cpus = sum(n.gpus for n in nodes), sum(n.cpus for n in nodes)
    assert all(j.total_demand().gpus <= gpus and j.total_demand().cpus <= cpus for j in jobs)
    mixed = repro.harmony_jobs(200, seed=5, allreduce_share=0.5)
    assert 0 < sum(j.num_ps == 0 for j in mixed) < len(mixed)
    assert all(j.num_workers > 1 for j in mixed if j.num_ps == 0)


def test_cluster_has_six_servers_on_one_or_two_switches(repro):
    assert {n.switch for n in repro.harmony_nodes(1)} == {"s1"}
    two = repro.harmony_nodes(2)
    assert len(two) == 6 and [n.switch for n in two] == ["s1"] * 3 + ["s2"] * 3


def test_interval_holds_the_asked_mean_batch(repro):
    jobs = [job(str(i), 100.0 * i) for i in range(11)]  # one arrival every 100 s
    assert repro.interval_for(jobs, batch=3.0) == pytest.approx(300.0)
    batched = repro.at_interval_starts(jobs, repro.interval_for(jobs, batch=3.0))
    assert [j.submit_time for j in batched] == [0.0] * 3 + [300.0] * 3 + [600.0] * 3 + [900.0] * 2
