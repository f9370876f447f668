"""Golden schedules: the exact record of every job (start, end, state) of a few short congested
traces, under slurm-default and under the default learned model, pinned as the simulator gave
them before its speed-ups (tests/sim/golden/schedules.json). Any change that moves one start
or end fails here; a deliberate change of behaviour rewrites the file:

    python tests/sim/test_golden_schedules.py --write
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from slurm_advisor.sim.clusterfile import read_cluster
from slurm_advisor.sim.engine import Simulation
from slurm_advisor.sim.runner import build_advisor
from slurm_advisor.sim.scheduler import SchedulerConfig
from slurm_advisor.sim.workload import at_offered_load
from slurm_advisor.speedmodels import load_speed_model
from slurm_advisor.traces.synthetic import synthetic_jobs

REPO = Path(__file__).resolve().parents[2]
GOLDEN = Path(__file__).with_name("golden") / "schedules.json"
POLICIES = ("slurm-default", "learned")
# name: (nodes of 16x8.toml, mix, jobs, trace seed, offered load, truth, scheduler settings)
CASES = {
    "large-16": (16, "large", 150, 4, 0.9, "contention", {}),
    "philly-16": (16, "philly", 500, 3, 1.6, "contention", {}),
    "large-4-instant": (4, "large", 80, 5, 1.0, "contention", {"bf_interval_s": 0.0}),
    "large-8-short-test": (8, "large", 100, 6, 1.0, "contention",
                           {"bf_interval_s": 10.0, "bf_max_job_test": 6, "limit_factor": 1.5}),
}


def schedule(case: str, policy: str) -> dict:
    size, mix, count, seed, load, truth_spec, config = CASES[case]
    nodes = read_cluster(REPO / "examples" / "clusters" / "16x8.toml")[:size]
    truth = load_speed_model(truth_spec)
    jobs = at_offered_load(synthetic_jobs(count, seed=seed, mix=mix), nodes, truth, load)
    result = Simulation(nodes, jobs, build_advisor(policy, truth), truth, seed=0,
                        scheduler=SchedulerConfig(**config)).run()
    return {"records": [[r.job_id, r.submit, r.start, r.end, r.state, r.num_nodes] for r in result.records],
            "holds": result.holds, "fallbacks": result.fallbacks, "skipped": list(result.skipped)}


# The learned policy over the 500-job Philly trace takes about 15 s: the whole suite runs it, the
# fast subset keeps the other seven.
_SLOW = {("philly-16", "learned")}


@pytest.mark.parametrize("case, policy", [
    pytest.param(c, p, marks=[pytest.mark.slow] if (c, p) in _SLOW else [], id=f"{c}-{p}")
    for c in sorted(CASES) for p in POLICIES])
def test_the_schedule_is_exactly_the_pinned_one(case: str, policy: str) -> None:
    expected = json.loads(GOLDEN.read_text())[case][policy]
    got = schedule(case, policy)
    assert got["records"] == expected["records"]
    assert (got["holds"], got["fallbacks"], got["skipped"]) == \
        (expected["holds"], expected["fallbacks"], expected["skipped"])


def test_the_pinned_traces_are_congested() -> None:
    # jobs must wait, and backfill must start some of them out of order, or little is pinned
    golden = json.loads(GOLDEN.read_text())
    for case in CASES:
        for policy in POLICIES:
            records = sorted(golden[case][policy]["records"], key=lambda r: r[1])
            waited = sum(start > submit for _, submit, start, *_ in records)
            latest, overtaken = -1.0, 0
            for _, _, start, *_ in records:
                overtaken += start < latest
                latest = max(latest, start)
            assert waited > len(records) // 2 and overtaken > 0, (case, policy)


if __name__ == "__main__" and sys.argv[1:] == ["--write"]:
    GOLDEN.write_text(json.dumps({c: {p: schedule(c, p) for p in POLICIES} for c in CASES}, indent=0) + "\n")
