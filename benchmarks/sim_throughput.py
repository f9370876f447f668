"""Simulator throughput: simulated job completions per CPU-minute (target >= 100k).

Measures CPU time (time.process_time) of whole simulations, so a busy machine does not
inflate the figure; repeats each run and reports the median and spread.

    python benchmarks/sim_throughput.py --out benchmarks/results/throughput.json
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

from slurm_advisor.advisor import Advisor
from slurm_advisor.policies import make_policy
from slurm_advisor.sim.clusterfile import read_cluster
from slurm_advisor.sim.converters.synthetic import synthetic_jobs
from slurm_advisor.sim.engine import Simulation
from slurm_advisor.sim.workload import at_offered_load
from slurm_advisor.speedmodels import load_speed_model

REPO = Path(__file__).resolve().parents[1]


def measure(nodes, jobs, policy: str, truth, repeats: int) -> dict:
    rates = []
    for _ in range(repeats):
        started = time.process_time()
        result = Simulation(nodes, jobs, Advisor(make_policy(policy)), truth, seed=0).run()
        cpu = time.process_time() - started
        rates.append(len(result.records) / cpu * 60.0)
    return {"policy": policy, "jobs": len(jobs), "completions_per_cpu_minute": statistics.median(rates),
            "min": min(rates), "max": max(rates), "repeats": repeats}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "throughput.json")
    ap.add_argument("--jobs", type=int, default=20000)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args(argv)
    nodes = read_cluster(REPO / "examples" / "clusters" / "16x8.toml")
    truth = load_speed_model("contention")
    # Both at the quality benchmark's offered load (0.6): loaded, with a queue at times.
    cases = {
        "philly-mix": at_offered_load(synthetic_jobs(args.jobs, seed=3, mix="philly"), nodes, truth, 0.6),
        "large-mix": at_offered_load(synthetic_jobs(args.jobs // 10, seed=4, mix="large"), nodes, truth, 0.6),
    }
    rows = {}
    print(f"{'case':<12}{'policy':<15}{'jobs':>7}{'completions/CPU-min':>21}{'min':>10}{'max':>10}")
    for name, jobs in cases.items():
        for policy in ("slurm-default", "pack"):
            row = measure(nodes, jobs, policy, truth, args.repeats)
            rows[f"{name}/{policy}"] = row
            print(f"{name:<12}{policy:<15}{row['jobs']:>7}{row['completions_per_cpu_minute']:>21.0f}"
                  f"{row['min']:>10.0f}{row['max']:>10.0f}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
