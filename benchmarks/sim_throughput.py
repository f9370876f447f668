"""Simulator throughput: simulated job completions per CPU-minute, at 16, 1,000 and 10,000 nodes.

Clusters are built as in ``decision_time.py`` (the node shape of examples/clusters/16x8.toml;
16 nodes is exactly that file). Traces are synthetic (``convert synthetic``): the Philly-like
mix at every size, the large mix at the smaller ones, with arrival times scaled so that the
offered load is 0.6 under the contention truth; the number of jobs grows with the cluster
(``JOBS``) so that a run reaches the loaded steady state. Policies: slurm-default, ``learned``
(the registry's policy with the default model as it deploys: its network, greedy, holding at
patience 0.7) and ``network`` (the default model's network itself, greedy, never holding, with
slurm-default as fallback).

Measures CPU time (time.process_time) of whole simulations, so a busy machine does not
inflate the figure; repeats each run and reports the median and spread. ``--profile`` runs
each case once more under cProfile and reports the share of time spent in each part of the
code (engine, slurm-default, domain, learned policy, speed models), to say who can act.

    python benchmarks/sim_throughput.py --out benchmarks/results/throughput.json
    python benchmarks/sim_throughput.py --sizes 10000 --repeats 1 --policies slurm-default,learned
"""
from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before numpy loads BLAS (see decision_time.py)

import numpy.ma  # noqa: F401  np.unique imports it on its first call (~0.2 s): not inside a timed run
from decision_time import make_cluster  # benchmarks/ is the script directory: on sys.path

from slurm_advisor.advisor import Advisor
from slurm_advisor.policies.learned.agent import LearnedPolicy
from slurm_advisor.policies.slurm_default import SlurmDefaultPolicy
from slurm_advisor.sim.engine import Simulation
from slurm_advisor.sim.runner import build_advisor
from slurm_advisor.sim.workload import at_offered_load
from slurm_advisor.speedmodels import load_speed_model
from slurm_advisor.traces.synthetic import synthetic_jobs
from slurm_advisor.training import checkpoint

REPO = Path(__file__).resolve().parents[1]
# (mix, jobs) per cluster size
JOBS = {16: (("philly-mix", 20_000), ("large-mix", 2_000)),
        1000: (("philly-mix", 40_000), ("large-mix", 8_000)),
        10000: (("philly-mix", 100_000),)}
TARGET = {16: 100_000, 1000: 100_000, 10000: 50_000}
# Which part of the code a profiled function belongs to (first match on its file path).
PARTS = (("sim/", "engine (sim/*)"), ("policies/slurm_default", "slurm-default"),
         ("slurm/cons_tres", "slurm-default"), ("domain/", "domain"),
         ("learned/", "learned (this work)"), ("speedmodels/", "speed models"),
         ("advisor.py", "advisor"), ("numpy", "numpy (callers above)"))


def advisor_for(policy: str, truth) -> Advisor:
    if policy == "network":
        ckpt = checkpoint.load(None)
        return Advisor(LearnedPolicy(ckpt.policy, ckpt.schema), fallback=SlurmDefaultPolicy())
    return build_advisor(policy, truth)


def run(nodes, jobs, policy: str, truth):
    return Simulation(nodes, jobs, advisor_for(policy, truth), truth, seed=0).run()


def measure(nodes, jobs, policy: str, truth, repeats: int) -> dict:
    rates = []
    for _ in range(repeats):
        started = time.process_time()
        result = run(nodes, jobs, policy, truth)
        cpu = time.process_time() - started
        rates.append(len(result.records) / cpu * 60.0)
    return {"policy": policy, "jobs": len(jobs), "completed": len(result.records),
            "completions_per_cpu_minute": statistics.median(rates),
            "min": min(rates), "max": max(rates), "repeats": repeats, "cpu_s_last": cpu}


def profile(nodes, jobs, policy: str, truth, top: int = 12) -> dict:
    """Share of the run's time (own time of each function) per part of the code, and the top
    functions by own time."""
    prof = cProfile.Profile()
    prof.enable()
    run(nodes, jobs, policy, truth)
    prof.disable()
    stats = pstats.Stats(prof).stats
    total = sum(s[2] for s in stats.values()) or 1.0
    parts: dict[str, float] = {}
    rows = []
    for (path, line, name), (_, _, tottime, cumtime, _) in stats.items():
        part = next((label for key, label in PARTS if key in path), "other (Python, builtins)")
        parts[part] = parts.get(part, 0.0) + tottime / total
        rows.append((tottime / total, cumtime, f"{_short(path)}:{line}({name})", part))
    rows.sort(reverse=True)
    return {"parts": dict(sorted(parts.items(), key=lambda kv: -kv[1])),
            "top": [{"share": round(s, 4), "cum_s": round(c, 3), "function": f, "part": p}
                    for s, c, f, p in rows[:top]]}


def _short(path: str) -> str:
    for marker in ("slurm_advisor/", "site-packages/"):
        if marker in path:
            return path.split(marker, 1)[1]
    return path


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "throughput.json")
    ap.add_argument("--sizes", default="16,1000,10000")
    ap.add_argument("--policies", default="slurm-default,learned,network")
    ap.add_argument("--mixes", default="philly-mix,large-mix")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--scale", type=float, default=1.0, help="multiply the number of jobs (quick runs)")
    ap.add_argument("--profile", action="store_true", help="also profile each case once")
    args = ap.parse_args(argv)
    truth = load_speed_model("contention")
    rows = json.loads(args.out.read_text()) if args.out.exists() else {}
    print(f"{'nodes':>6} {'case':<11}{'policy':<15}{'jobs':>7}{'completions/CPU-min':>21}{'min':>10}{'max':>10}"
          f"{'target':>9}")
    for n in (int(s) for s in args.sizes.split(",")):
        nodes = make_cluster(n)
        for mix, count in JOBS[n]:
            if mix not in args.mixes.split(","):
                continue
            seed = 3 if mix == "philly-mix" else 4
            raw = synthetic_jobs(max(100, int(count * args.scale)), seed=seed, mix=mix.split("-")[0])
            jobs = at_offered_load(raw, nodes, truth, 0.6)
            for policy in args.policies.split(","):
                row = measure(nodes, jobs, policy, truth, args.repeats)
                row["nodes"] = n
                if args.profile:
                    row["profile"] = profile(nodes, jobs, policy, truth)
                rows[f"{n}/{mix}/{policy}"] = row
                print(f"{n:>6} {mix:<11}{policy:<15}{row['jobs']:>7}{row['completions_per_cpu_minute']:>21.0f}"
                      f"{row['min']:>10.0f}{row['max']:>10.0f}{'>=' + str(TARGET[n]):>9}", flush=True)
                if args.profile:
                    print("        " + ", ".join(f"{k} {v:.0%}" for k, v in row["profile"]["parts"].items()))
                args.out.parent.mkdir(parents=True, exist_ok=True)
                args.out.write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
