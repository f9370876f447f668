"""Placement quality: avg JCT of every policy under three ground truths and two workloads.

For each setting: speed samples are recorded on a training trace, the learned policy is
trained on them (the promotion gate's judge on samples recorded apart, on a judge trace), and
every policy then runs *different* test traces under the ground truth. One 300-job trace is a
noisy judge (a few big jobs decide its average), so each setting has TEST_TRACES of them: the
table gives the first trace in full and each policy's avg JCT over all of them, with the spread
of the learned policy's ratio. Prints a table and writes JSON.

The traces (``workloads``; none shares a job with another):

- ``large`` (synthetic): training seed 11, judge seed 41, test seeds 31, 32, 33.
- ``philly``: training = Philly days 20-40 (jobs sampled evenly to 300), judge = days 40-60
  (days 0-20 hold only 71 jobs), test = days 80-88, 88-96, 96-104 (each sampled evenly to 300).

``lif`` places by a pairwise interference profile fitted on the same training samples as the
learned policy's speed model (saved beside that model, ``lif_profile.json``), never on a test trace.

The test traces are looked at once, for the figures of the README (first run 2026-12-01). A
design change made after a loss on a test trace turns it into a validation trace: the next
figures must then come from new test traces (as seeds 12-14 and Philly days 20-80, the test
traces until 2026-12-01, became validation traces). Nothing is tuned on them.

    python benchmarks/placement_quality.py --out benchmarks/results/quality.json [--quick]
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
from report import over_traces
from shared_data import SHARED  # benchmarks/ is the script directory: on sys.path

from slurm_advisor.domain import ClusterSnapshot
from slurm_advisor.experiments.experiment import evaluate, run_experiment
from slurm_advisor.learned.hyper import Hyper
from slurm_advisor.policies.slurm_default import SlurmDefaultPolicy
from slurm_advisor.sim.clusterfile import read_cluster
from slurm_advisor.sim.floor import floor_avg_jct
from slurm_advisor.sim.tables import plot_jct_cdf
from slurm_advisor.sim.workload import at_offered_load
from slurm_advisor.speedmodels import load_speed_model
from slurm_advisor.traces.philly import philly_jobs
from slurm_advisor.traces.synthetic import synthetic_jobs
from slurm_advisor.training.train import Ablation

REPO = Path(__file__).resolve().parents[1]
BASELINES = ["slurm-default", "slurm-topo", "pack", "spread", "random", "tetris", "lif", "oracle"]


# Offered load (GPU time asked for, jobs alone, over GPU time available): loaded, not overloaded.
OFFERED_LOAD = 0.6
# Test traces per workload: one 300-job trace is too noisy a judge on its own.
TEST_TRACES = 3


def workloads(quick: bool, nodes) -> dict:
    """Raw (train, judge, [test, ...]) traces; arrival times are scaled to OFFERED_LOAD per ground truth.
    Philly jobs that could not run even on the empty cluster (the simulator would skip them) are
    left out before sampling, so that every trace has its n jobs."""
    n = 120 if quick else 300
    tests = 2 if quick else TEST_TRACES
    day = 86400
    philly = SHARED / "philly" / "philly_jobs.csv.gz"

    def philly_window(first_day: int, days: int) -> list:
        jobs = philly_jobs(philly, start_s=first_day * day, duration_s=days * day, seed=1)
        return _evenly([j for j in jobs if fits_cluster(j)], n)

    empty = ClusterSnapshot.empty(tuple(nodes))
    fits = {}

    def fits_cluster(job) -> bool:
        key = (job.num_ps, job.num_workers, job.ps_demand, job.worker_demand)
        if key not in fits:
            fits[key] = SlurmDefaultPolicy().place(empty, job) is not None
        return fits[key]

    return {
        # Philly arrivals and sizes (mostly 1-GPU jobs; the data span 108.9 days).
        "philly": (philly_window(20, 20), philly_window(40, 20), [philly_window(d, 8) for d in (80, 88, 96)][:tests]),
        # Larger jobs that must span nodes (4-16 workers, PS and all-reduce).
        "large": (synthetic_jobs(n, seed=11, mix="large"), synthetic_jobs(n, seed=41, mix="large"),
                  [synthetic_jobs(n, seed=31 + i, mix="large") for i in range(tests)]),
    }


TRACES = {"philly": {"train": "Philly days 20-40", "judge": "Philly days 40-60",
                     "test": ["Philly days 80-88", "days 88-96", "days 96-104"]},
          "large": {"train": "synthetic seed 11", "judge": "synthetic seed 41", "test": ["seeds 31", "32", "33"]}}


def _evenly(jobs: list, n: int) -> list:
    """n jobs spread over the whole window (Philly arrives in bursts of one user's sweeps)."""
    return jobs[:: max(1, len(jobs) // n)][:n]


def truths() -> dict:
    return {"contention": load_speed_model("contention"),
            "gavel": load_speed_model(f"gavel:{SHARED / 'gavel' / 'simulation_throughputs.json'}"),
            "pollux": load_speed_model(f"pollux:{SHARED / 'pollux' / 'models'}")}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "quality.json")
    ap.add_argument("--quick", action="store_true", help="small traces and budget (a smoke run)")
    ap.add_argument("--only", default="", help="comma-separated truth:workload settings to run")
    ap.add_argument("--ablations", nargs="?", const="all", default="",
                    help="also train ablated variants on contention:large (all, or a comma-separated list)")
    ap.add_argument("--episodes", type=int, default=None)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--offered-load", type=float, default=OFFERED_LOAD)
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="override a hyperparameter (learned/hyper.py), e.g. --set reward=jobs-in-system")
    args = ap.parse_args(argv)
    hp = Hyper(seed=args.seed)
    for item in args.set:
        key, _, value = item.partition("=")
        hp = replace(hp, **{key: type(getattr(hp, key))(value)})
    if args.quick:
        hp = replace(hp, rl_episodes=3, episode_jobs=60, speed_epochs=20, warm_episodes=1, warm_epochs=10)
    if args.episodes:
        hp = replace(hp, rl_episodes=args.episodes)
    nodes = read_cluster(REPO / "examples" / "clusters" / "16x8.toml")
    only = {s for s in args.only.split(",") if s}
    ablations = {"no-replay": Ablation(replay=False), "no-exploration": Ablation(exploration=False),
                 "no-warm-start": Ablation(warm_start=False),
                 # where the win comes from: the network without holding, holding without the network
                 "no-holding": Ablation(holding=False), "holding-only": Ablation(network=False),
                 } if args.ablations else None
    if ablations and args.ablations != "all":
        wanted = args.ablations.split(",")
        unknown = set(wanted) - set(ablations)
        if unknown:
            ap.error(f"--ablations: unknown {', '.join(sorted(unknown))}; choose from {', '.join(ablations)}")
        ablations = {k: ablations[k] for k in wanted}
    out: dict = {"hyper": hp.to_dict(), "cluster": "16x8", "offered_load": args.offered_load, "settings": {}}
    if only and args.out.exists():  # a partial run updates the settings it ran
        out["settings"] = json.loads(args.out.read_text()).get("settings", {})
    args.out.parent.mkdir(parents=True, exist_ok=True)
    for wname, (raw_train, raw_judge, raw_tests) in workloads(args.quick, nodes).items():
        for tname, truth in truths().items():
            key = f"{tname}:{wname}"
            if only and key not in only:
                continue
            started = time.time()
            train_jobs = at_offered_load(raw_train, nodes, truth, args.offered_load)
            judge_jobs = at_offered_load(raw_judge, nodes, truth, args.offered_load)
            test_traces = [at_offered_load(t, nodes, truth, args.offered_load) for t in raw_tests]
            with tempfile.TemporaryDirectory() as work:
                res = run_experiment(nodes, train_jobs, test_traces[0], truth, Path(work), hp,
                                     judge_jobs=judge_jobs, baselines=BASELINES,
                                     ablations=ablations if key == "contention:large" else None,
                                     seed=args.seed, log=_logger(key))
                by_trace = [res.results] + [evaluate(nodes, jobs, truth, BASELINES, res.models, args.seed)
                                            for jobs in test_traces[1:]]
            row = {name: r.summary() for name, r in res.results.items()}
            out["settings"][key] = {"policies": row, "speed_mape_unseen": res.speed_mape_unseen,
                                    "traces": TRACES[wname],
                                    "avg_jct_by_test_trace": {name: [r[name].summary()["avg_jct"] for r in by_trace]
                                                              for name in res.results},
                                    # a job killed at its limit ends early and shortens the avg JCT
                                    "timeouts_by_test_trace": {name: [r[name].summary()["timeouts"] for r in by_trace]
                                                               for name in res.results},
                                    # sim/floor.py: no wait, alone, the fastest baseline placement
                                    "floor_by_test_trace": [floor_avg_jct(nodes, jobs, truth) for jobs in test_traces],
                                    "train_seconds": res.train_seconds, "samples": res.samples,
                                    "teacher": res.teacher, "deployed": res.deployed,
                                    "validation": res.validation,
                                    "seconds": round(time.time() - started, 1)}
            # Baselines and the learned policy only: the ablations are in the table.
            curves = {k: v for k, v in res.results.items() if k not in (ablations or {})}
            plot_jct_cdf(curves, args.out.with_name(f"{args.out.stem}-cdf-{tname}-{wname}.png"), title=key)
            print_setting(key, out["settings"][key])
            args.out.write_text(json.dumps(out, indent=2))
    return 0


def _logger(key: str):
    return lambda message: print(f"  [{key}] {message}", file=sys.stderr)


def print_setting(key: str, s: dict) -> None:
    rows = s["policies"]
    ref = rows["slurm-default"]["avg_jct"]
    trained = set(s.get("deployed", {}))  # the learned policy and its ablations
    best_other = min(v["avg_jct"] for k, v in rows.items() if k != "oracle" and k not in trained)
    print(f"\n== {key}  (speed-model MAPE on unseen placements {s['speed_mape_unseen']:.3f}, "
          f"teacher {s['teacher']}, {s['seconds']} s)")
    print(f"{'policy':<16}{'avg_jct_h':>10}{'p95_jct_h':>10}{'slowdown':>10}{'util':>7}{'vs slurm':>10}"
          f"{'vs best bl':>11}{'timeouts':>10}")
    for name, v in rows.items():
        print(f"{name:<16}{v['avg_jct'] / 3600:>10.2f}{v['p95_jct'] / 3600:>10.2f}{v['mean_slowdown']:>10.3f}"
              f"{v['utilization']:>7.2f}{v['avg_jct'] / ref:>10.3f}{v['avg_jct'] / best_other:>11.3f}"
              f"{v.get('timeouts', 0):>10}")
    traces = s.get("avg_jct_by_test_trace", {})
    floors = s.get("floor_by_test_trace")
    if floors:  # the lowest ratio any policy can reach on these traces, about
        print(f"floor (no wait, alone): {floors[0] / 3600:.2f} h on the first test trace = "
              f"{floors[0] / ref:.3f} x slurm-default; over all of them "
              f"{np.mean(floors) / np.mean(traces['slurm-default']):.3f} x slurm-default")
    if traces and len(next(iter(traces.values()))) > 1:
        print(f"over {len(traces['slurm-default'])} test traces (mean avg JCT; the trained policy's ratio per trace):")
        for name in trained:
            mean, per_trace = over_traces(traces, name)
            killed = s.get("timeouts_by_test_trace", {})
            note = (f"; timeouts per trace {killed[name]} ({mean['best']}: {killed[mean['best']]})"
                    if killed else "")
            print(f"  {name}: {mean['vs slurm']:.3f} x slurm-default, {mean['vs best']:.3f} x the best baseline "
                  f"({mean['best']}); per trace vs best {per_trace}{note}")


if __name__ == "__main__":
    np.seterr(all="ignore")
    sys.exit(main())
