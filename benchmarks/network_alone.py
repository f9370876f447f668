"""Each trained model's network placing alone: greedy, no holding, no search (issue 12 item 3:
the network against its teacher, without the search that the gate usually deploys).

Runs over the models ``load_sweep.py --models M`` keeps (``M/<truth>-large/seed<S>/<variant>``,
ablations included) on the same test traces and loads, under the same truth, beside
slurm-default; jobs the network finds no placement for go to slurm-default, as in the daemon.

    python benchmarks/network_alone.py --models M [--truths contention,site-holdout]
                                       [--test-seeds 601,602,603] [--loads 0.5,0.7]

Prints, per truth, load and model, avg JCT over the traces against slurm-default's, with the
per-trace range, and writes JSON. A variant trained without a network (``no-network``) has an
untrained one: it is left out.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before numpy loads BLAS

import numpy as np  # after the thread settings

sys.path.insert(0, str(Path(__file__).resolve().parent))
import load_sweep  # the sweep's truths, traces and cluster

from slurm_advisor.advisor import Advisor
from slurm_advisor.policies.learned.agent import LearnedPolicy
from slurm_advisor.policies.slurm_default import SlurmDefaultPolicy
from slurm_advisor.sim.clusterfile import read_cluster
from slurm_advisor.sim.engine import Simulation
from slurm_advisor.sim.workload import at_offered_load
from slurm_advisor.speedmodels import load_speed_model
from slurm_advisor.training import checkpoint

UNTRAINED = ("no-network",)  # variants whose network was never trained


def avg_jct(nodes, jobs, truth, advisor: Advisor) -> float:
    return Simulation(nodes, jobs, advisor, truth, seed=0).run().summary()["avg_jct"]


def network_advisor(model: Path) -> Advisor:
    ckpt = checkpoint.load(model)
    return Advisor(LearnedPolicy(ckpt.policy, ckpt.schema, mode="greedy"), fallback=SlurmDefaultPolicy())


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", type=Path, required=True, help="load_sweep.py's --models directory")
    ap.add_argument("--truths", default="contention,site-holdout")
    ap.add_argument("--test-seeds", default="601,602,603")
    ap.add_argument("--loads", default="0.5,0.7")
    ap.add_argument("--jobs", type=int, default=300, help="jobs per trace (as the sweep's)")
    ap.add_argument("--out", type=Path, default=load_sweep.REPO / "benchmarks" / "results" / "network_alone.json")
    args = ap.parse_args(argv)
    nodes = read_cluster(load_sweep.REPO / "examples" / "clusters" / "16x8.toml")
    seeds = [int(s) for s in args.test_seeds.split(",") if s]
    out: dict = {}
    for name in (t for t in args.truths.split(",") if t):
        if name not in load_sweep.TRUTHS:
            ap.error(f"--truths: unknown {name!r} (known: {', '.join(load_sweep.TRUTHS)})")
        spec, types = load_sweep.TRUTHS[name]
        truth = load_speed_model(spec)
        _, _, raws = load_sweep.traces("large", types, args.jobs, seeds)
        models = sorted(p for p in (args.models / f"{name}-large").glob("seed*/*")
                        if (p / "meta.json").exists() and p.name not in UNTRAINED)
        if not models:
            ap.error(f"--models: no trained model under {args.models / f'{name}-large'}")
        for load in (float(x) for x in args.loads.split(",") if x):
            traces = [at_offered_load(raw, nodes, truth, load) for raw in raws]
            ref = [avg_jct(nodes, jobs, truth, Advisor(SlurmDefaultPolicy())) for jobs in traces]
            for model in models:
                jct = [avg_jct(nodes, jobs, truth, network_advisor(model)) for jobs in traces]
                per_trace = [a / b for a, b in zip(jct, ref)]
                key = f"{model.parent.name}/{model.name}"
                ratio = float(np.mean(jct) / np.mean(ref))
                out.setdefault(name, {}).setdefault(key, {})[str(load)] = {
                    "vs_slurm": ratio, "range": [min(per_trace), max(per_trace)]}
                print(f"{name:13s} load {load:<4} {key:24s} network alone / slurm-default {ratio:.3f} "
                      f"({min(per_trace):.2f}-{max(per_trace):.2f})", flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
