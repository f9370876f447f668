"""Whether a model's network fills the node it chooses, and how many network steps runs save.

For each model directory (the shipped default model unless ``--model`` names others): the run
probe's verdict (``policies/learned/fast/runs.py``: of its multi-task jobs, how many place the same task by
task and run by run), and on the clusters of ``decision_time.py`` (16, 1,000 and 10,000 nodes,
loaded by slurm-default's placements of the benchmarks' mixes) how many of its placements are
the same both ways, and the network steps per job task by task (one per task) and run by run
(one per run of a role's tasks on a node): mean and 99th percentile.

    python benchmarks/network_runs.py [--sizes 16,1000,10000] [--decisions 200] [--model DIR ...]
"""
from __future__ import annotations

import argparse
import itertools
import json
import os
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before numpy loads BLAS (see decision_time.py)

import numpy as np
from decision_time import job_stream, loaded_snapshot, make_cluster  # benchmarks/ is the script directory

from slurm_advisor.policies.learned.fast import runs
from slurm_advisor.training import checkpoint

REPO = Path(__file__).resolve().parents[1]


def on_cluster(ckpt: checkpoint.Checkpoint, n: int, decisions: int) -> dict:
    """Both ways on the decision-time cluster of ``n`` nodes (the large-cluster path forced)."""
    base = loaded_snapshot(make_cluster(n))
    by_task, by_run = runs.by_task_and_by_run(ckpt.policy, ckpt.schema)
    same, tasks, steps = 0, [], []
    for i, job in enumerate(job_stream(decisions, 7_000 + n)):
        snap, rng = base.at(float(i)), np.random.default_rng(0)
        placed = by_task.place(snap, job, rng)
        same += placed == by_run.place(snap, job, rng)
        if placed is not None:
            seq = placed.tasks
            tasks.append(len(seq))
            steps.append(1 + sum(a != b for a, b in itertools.pairwise(seq)))  # runs of (role, node)
    return {"nodes": n, "decisions": decisions, "same": same, "placed": len(tasks),
            "steps_by_task_mean": float(np.mean(tasks)), "steps_by_task_p99": float(np.percentile(tasks, 99)),
            "steps_by_run_mean": float(np.mean(steps)), "steps_by_run_p99": float(np.percentile(steps, 99))}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--sizes", default="16,1000,10000")
    ap.add_argument("--decisions", type=int, default=200)
    ap.add_argument("--model", type=Path, action="append", help="a model directory (default: the shipped one)")
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "network_runs.json")
    args = ap.parse_args(argv)
    rows = []
    print(f"{'model':<36} {'probe':>7} {'nodes':>6} {'same':>9} {'steps/job by task':>18} {'by run':>13}")
    for model in args.model or [None]:
        ckpt = checkpoint.load(model)
        agree, probed = runs.probe_agreement(ckpt.policy, ckpt.schema)
        for n in (int(s) for s in args.sizes.split(",")):
            row = {"model": str(model or "shipped"), "probe_same": agree, "probe_jobs": probed,
                   **on_cluster(ckpt, n, args.decisions)}
            rows.append(row)
            print(f"{row['model'][-36:]:<36} {agree:>3}/{probed:<3} {n:>6} {row['same']:>4}/{row['decisions']:<4} "
                  f"{row['steps_by_task_mean']:>8.1f} p99 {row['steps_by_task_p99']:>3.0f}  "
                  f"{row['steps_by_run_mean']:>4.1f} p99 {row['steps_by_run_p99']:>3.0f}", flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(rows, indent=2))
    print(f"results: {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
