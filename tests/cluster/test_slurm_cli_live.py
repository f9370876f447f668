"""SlurmCliSource against the real testbed: its free capacity must be what Slurm says jobs hold.

Run with the testbed up: SLURM_CONF=... SLURM_ADVISOR_TEST_SLURM=1 pytest -m slurm tests/cluster
(skipped otherwise; see tests/integration/conftest.py).
"""
from __future__ import annotations

import subprocess

import pytest
from slurmctl import Slurm

from slurm_advisor.cluster.slurm_cli import SlurmCliSource
from slurm_advisor.domain import Resources, Role

pytestmark = pytest.mark.slurm

MARKED = ["--nodes=2", "--ntasks=3", "--cpus-per-task=2", "--mem-per-cpu=1000", "--gpus-per-task=1",
          "--comment=slurm-advisor: type=resnet50 ps=1 workers=2 iters=100"]
FOREIGN = ["--nodes=1", "--ntasks=1", "--cpus-per-task=4", "--gres=gpu:2", "--mem=8000"]


def running(slurm: Slurm, *options: list[str]) -> dict[str, dict[str, Resources]]:
    """Submit each job, wait until all run; job id -> node -> what scontrol show job -d says it holds."""
    ids = [slurm.submit(opts, sleep_s=300) for opts in options]
    return {j: slurm.wait(j, lambda v: v.state == "RUNNING", what="RUNNING").allocation for j in ids}


def test_free_capacity_and_marked_jobs_match_slurm(slurm):
    jobs = running(slurm, MARKED, FOREIGN)
    snap = SlurmCliSource().snapshot()
    held: dict[str, Resources] = {}
    for allocation in jobs.values():
        for node, res in allocation.items():
            held[node] = held.get(node, Resources()) + res
    for node in snap.nodes:
        assert snap.free[node.name] == node.capacity - held.get(node.name, Resources()), node.name
    marked, foreign = jobs
    assert snap.running_job(foreign) is None  # no marker: its capacity is in free, nothing more
    rj = snap.running_job(marked)
    assert rj.job.worker_demand == Resources(2, 1, 2000) and rj.placement.tasks[0].role is Role.PS
    assert {n: rj.placement.count(n) for n in rj.placement.nodes()} == \
        {n: res.cpus // 2 for n, res in jobs[marked].items()}


def test_drained_idle_node_offers_nothing(slurm):
    subprocess.run(["scontrol", "update", "NodeName=n4", "State=DRAIN", "Reason=slurm-advisor-test"],
                   check=True, capture_output=True, timeout=30)
    try:
        snap = SlurmCliSource().snapshot()
        assert snap.free["n4"] == Resources() and snap.node("n4").capacity == Resources(8, 4, 32000)
        assert snap.free["n3"] == Resources(8, 4, 32000)
    finally:
        subprocess.run(["scontrol", "update", "NodeName=n4", "State=RESUME"], check=True,
                       capture_output=True, timeout=30)
