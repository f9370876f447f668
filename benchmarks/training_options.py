"""Training options on validation traces: how the learned policy and the search over it fare
against slurm-default when training runs with or without distillation and the RL options.

The figures of the README's Training section (2026-12-02) come from this script: seeds 221 and
222 (validation traces, never test traces), loads 0.5 and 0.7, contention (or site-holdout),
one training seed; training on the load sweep's training and judge traces (211, 212) at its
training load. A model already trained into ``--models`` is evaluated, not retrained.

    python benchmarks/training_options.py distill [--truth contention] [--seed 0] [--models DIR]
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import replace
from pathlib import Path

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS"):  # tiny matrix products: threads only cost
    os.environ.setdefault(_var, "1")

import load_sweep as L  # after the thread settings

from slurm_advisor.experiments.experiment import evaluate, run_experiment
from slurm_advisor.learned.hyper import Hyper
from slurm_advisor.sim.clusterfile import read_cluster
from slurm_advisor.sim.runner import compare
from slurm_advisor.sim.workload import at_offered_load
from slurm_advisor.speedmodels import load_speed_model
from slurm_advisor.traces.synthetic import synthetic_jobs

CONFIGS = {  # Hyper overrides
    "before": {"dagger_rounds": 0},
    "distill": {"dagger_rounds": 4},
    "all-options": {"dagger_rounds": 4, "advantage": "teacher", "reward": "jobs-in-system", "episode_rates": (1.0, 1.5)},
    "options-only": {"dagger_rounds": 0, "advantage": "teacher", "reward": "jobs-in-system", "episode_rates": (1.0, 1.5)},
}
VALIDATION_SEEDS, LOADS = (221, 222), (0.5, 0.7)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("config", choices=sorted(CONFIGS))
    ap.add_argument("--truth", choices=sorted(L.TRUTHS), default="contention")
    ap.add_argument("--seed", type=int, default=0, help="training seed")
    ap.add_argument("--models", type=Path, default=L.REPO / "benchmarks" / "results" / "training_options")
    args = ap.parse_args(argv)
    spec, types = L.TRUTHS[args.truth]
    nodes = read_cluster(L.REPO / "examples" / "clusters" / "16x8.toml")
    truth = load_speed_model(spec)
    make = lambda s: synthetic_jobs(300, seed=s, mix="large", types=types)
    train_jobs = at_offered_load(make(L.TRAIN_SEED), nodes, truth, L.TRAIN_LOAD)
    judge_jobs = at_offered_load(make(L.JUDGE_SEED), nodes, truth, L.TRAIN_LOAD)
    work = args.models / f"{args.truth}-{args.config}-seed{args.seed}"
    if not (work / "learned" / "meta.json").exists():
        started = time.process_time()
        res = run_experiment(nodes, train_jobs, train_jobs[:50], truth, work,
                             replace(Hyper(seed=args.seed), **CONFIGS[args.config]), judge_jobs=judge_jobs,
                             baselines=[], seed=args.seed, log=lambda m: print(m, file=sys.stderr))
        print(f"deployed {res.deployed}, trained in {time.process_time() - started:.0f} CPU-s", flush=True)
    out = {}
    for load in LOADS:
        for seed in VALIDATION_SEEDS:
            jobs = at_offered_load(make(seed), nodes, truth, load)
            runs = compare(nodes, jobs, truth, ["slurm-default", "slurm-topo"], seed=0)
            runs.update(evaluate(nodes, jobs, truth, [], {"learned": work / "learned"}, 0))
            runs["search"] = compare(nodes, jobs, truth, ["search"], seed=0, model_dir=work / "learned")["search"]
            row = {k: v.summary()["avg_jct"] / 3600 for k, v in runs.items()}
            out[f"{load}/{seed}"] = row
            print(f"{args.config} load {load} trace {seed}: " + " ".join(f"{k}={v:.1f}h" for k, v in row.items())
                  + f"  learned/sd={row['learned'] / row['slurm-default']:.3f}"
                  f" search/sd={row['search'] / row['slurm-default']:.3f}", flush=True)
    (work / "validation.json").write_text(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
