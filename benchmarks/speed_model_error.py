"""Speed-model error: MAPE of the learned speed model on placements it never saw.

For each ground truth: record samples while four policies run a training trace, fit the speed
model on them, then measure the error on samples recorded from a *different* test trace under
two policies (slurm-default and random), i.e. other jobs and other placements.

    python benchmarks/speed_model_error.py --out benchmarks/results/speed_model.json
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import replace
from pathlib import Path

# Run as a script, this folder is on sys.path: the benchmarks share their settings.
from placement_quality import REPO, truths

from slurm_advisor.learned.experiment import RECORD_POLICIES, record
from slurm_advisor.learned.features import FeatureSchema
from slurm_advisor.learned.hyper import Hyper
from slurm_advisor.learned.speed_model import LearnedSpeedModel, fit_speed_model
from slurm_advisor.sim.clusterfile import read_cluster
from slurm_advisor.sim.converters.synthetic import synthetic_jobs


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "speed_model.json")
    ap.add_argument("--jobs", type=int, default=200)
    ap.add_argument("--epochs", type=int, default=60)
    args = ap.parse_args(argv)
    nodes = read_cluster(REPO / "examples" / "clusters" / "16x8.toml")
    train_jobs = synthetic_jobs(args.jobs, seed=21, mix="large", arrival_rate_per_h=2.5)
    test_jobs = synthetic_jobs(args.jobs, seed=22, mix="large", arrival_rate_per_h=2.5)
    hp = replace(Hyper(), speed_epochs=args.epochs)
    rows = {}
    print(f"{'truth':<12}{'train samples':>14}{'held-out jobs MAPE':>20}{'unseen trace MAPE':>19}{'fit s':>8}")
    for name, truth in truths().items():
        samples = record(nodes, train_jobs, truth, RECORD_POLICIES, seed=0)
        unseen = record(nodes, test_jobs, truth, ("slurm-default", "random"), seed=100)
        started = time.process_time()
        net, metrics = fit_speed_model(samples, FeatureSchema(), hp)
        fit_s = time.process_time() - started
        mape = LearnedSpeedModel(net, FeatureSchema()).mape(unseen)
        rows[name] = {"train_samples": len(samples), "holdout_jobs_mape": metrics["holdout_mape"],
                      "unseen_trace_mape": mape, "unseen_samples": len(unseen), "fit_cpu_s": fit_s}
        print(f"{name:<12}{len(samples):>14}{metrics['holdout_mape']:>20.3f}{mape:>19.3f}{fit_s:>8.1f}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
