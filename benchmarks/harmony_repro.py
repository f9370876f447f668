"""Harmony's own evaluation as a reproduction table (issue 12 item 5), then our extensions as ablations.

Harmony (Bao, Peng, Wu, INFOCOM'19) claims -25 % average JCT against load balancing, Tetris and
least-interference-first (LIF) on 6 GPU servers running MXNet parameter-server jobs, with the
newly arrived jobs placed as a batch at the start of each scheduling interval. This script
rebuilds that setting in the simulator and measures our learned policy against the same three
baselines (``spread``, ``tetris``, ``lif``), with slurm-default, slurm-topo and pack for reference.

**Setting** (``harmony_nodes``, ``harmony_jobs``):

- 6 servers on one switch, each 2 GPUs, 8 CPUs, 64 GB: the slots of the same group's public DL2
  testbed configuration (``pengyanghua/DL2`` parameters.py: 6 nodes, 8 slots per resource type,
  a worker takes 2 CPU slots and one GPU of 4 slots, a PS 2 CPU slots). Harmony's paper gives
  no shape we can check; this one makes CPUs bind as well as GPUs (Tetris' multi-resource case)
  and makes most jobs span servers, where PS placement decides the speed.
- Parameter-server jobs only: 1, 2, 4, 6 or 8 workers (P = 0.1/0.3/0.3/0.2/0.1), 1 to
  max(1, workers // 2) PS; a worker asks 2 CPUs + 1 GPU + 12 GB, a PS 2 CPUs + 8 GB.
- Job types: DL2's MXNet models as the nearest types ``jobtypes`` knows (``STAND_INS``):
  ResNet-50 -> resnet50, VGG-16 -> vgg16, ResNeXt-110 (CIFAR) -> resnet18, Inception-BN ->
  inception3, Seq2Seq -> transformer, WLM (word language model) -> lstm, DSSM ->
  recommendation; DL2's CNN text classifier has no stand-in and is left out.
- Run lengths alone log-normal, median 20 min (longer under a truth that slows them); arrivals
  Poisson, scaled to offered load 0.6, then **moved to the start of their scheduling interval**
  (``at_interval_starts``): each interval's new jobs arrive as one batch. The interval holds
  ``BATCH`` = 3 arrivals on average (DL2's testbed trace: up to 5 new jobs per slot), so its
  length follows each truth's arrival rate (``interval_for``, from the training trace); the
  tables give it and the mean size of a non-empty batch.

How this differs from Harmony: a batch enters Slurm's FIFO + backfill queue, which places its
jobs one whole job at a time (gang placement), in arrival order, and may start a queued job in
mid-interval when another job ends; Harmony places the batch task by task with one network
decision per task, and only at interval starts. Jobs are never migrated in either.

**Protocol** (as ``placement_quality.py`` and ``load_sweep.py``): speeds are logged while the
site's current policies run the training trace (seed 311) and apart on a judge trace (seed 312);
the learned policy is trained on them once (figures before 2026-12-08 had a second, in-process
round; the loop is ``closed_loop.py``'s) and every policy runs
five fresh test traces (seeds 301-305; no other benchmark uses these seeds; first looked at
2026-12-01) under each ground truth: ``contention``, ``gavel``, ``pollux`` and the frozen
held-out ``benchmarks/truths/site_holdout.py`` (there, the types get parameters derived from a
hash of their names). Nothing is tuned on the held-out truth. One training seed: the
per-trace spread below is the test noise only; the training noise of one seed is larger
(README: two seeds of contention:large gave 0.68x and 0.46x).

**Ablations** (contention only): the same jobs on 6 servers under two switches (topology), with
half the multi-worker jobs all-reduce (no PS), the learned policy without holding
(``Ablation(holding=False)``), and the shipped default model, trained on another cluster and
other jobs, run here untouched (one network for any cluster size).

    python benchmarks/harmony_repro.py [--quick] [--only contention,gavel] [--no-ablations] \\
        [--out benchmarks/results/harmony_repro.json]
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
from shared_data import SHARED  # benchmarks/ is the script directory: on sys.path

from slurm_advisor.domain import Job, Node, Resources
from slurm_advisor.domain.jobtypes import profile_for, reference_speed
from slurm_advisor.errors import InputError
from slurm_advisor.experiments.experiment import evaluate, run_experiment
from slurm_advisor.learned.hyper import Hyper
from slurm_advisor.models.meta import DEFAULT_MODEL_DIR
from slurm_advisor.policies import POLICIES
from slurm_advisor.sim.runner import compare
from slurm_advisor.sim.workload import at_offered_load
from slurm_advisor.speedmodels import load_speed_model
from slurm_advisor.training.train import Ablation

REPO = Path(__file__).resolve().parents[1]
HOLDOUT = f"{REPO / 'benchmarks' / 'truths' / 'site_holdout.py'}:SiteHoldoutSpeeds"

BATCH = 3.0  # mean arrivals per scheduling interval
OFFERED_LOAD = 0.6
MEDIAN_RUN_S = 1200.0
TRAIN_SEED, JUDGE_SEED, TEST_SEEDS = 311, 312, (301, 302, 303, 304, 305)
PAPER_HEADLINE = 0.75  # Harmony: -25 % avg JCT against LB, Tetris and LIF
HARMONY_BASELINES = ("spread", "tetris", "lif")  # load balancing, Tetris, LIF
REFERENCE = ("slurm-default", "slurm-topo", "pack")
# ours -> the DL2/Harmony MXNet model it stands for
STAND_INS = {"resnet50": "ResNet-50", "vgg16": "VGG-16", "resnet18": "ResNeXt-110", "inception3": "Inception-BN",
             "transformer": "Seq2Seq", "lstm": "WLM", "recommendation": "DSSM"}
WORKERS, WORKER_PROBS = (1, 2, 4, 6, 8), (0.1, 0.3, 0.3, 0.2, 0.1)
WORKER = Resources(cpus=2, gpus=1, mem_mb=12000)
PS = Resources(cpus=2, gpus=0, mem_mb=8000)


def harmony_nodes(switches: int = 1) -> tuple[Node, ...]:
    """6 servers x (2 GPUs, 8 CPUs, 64 GB), split evenly over ``switches`` switches."""
    return tuple(Node(f"h{i + 1}", cpus=8, gpus=2, mem_mb=64000, switch=f"s{i * switches // 6 + 1}")
                 for i in range(6))


def harmony_jobs(n: int, seed: int, allreduce_share: float = 0.0) -> list[Job]:
    """``n`` PS jobs of DL2's model types with Poisson arrivals (rate rescaled later); a share
    ``allreduce_share`` of the multi-worker jobs drops its PS (all-reduce). Same seed, same jobs."""
    rng = np.random.default_rng(seed)
    types = sorted(STAND_INS)
    arrivals = np.cumsum(rng.exponential(1800.0, size=n))
    jobs = []
    for i in range(n):
        job_type = types[int(rng.integers(len(types)))]
        workers = int(rng.choice(WORKERS, p=WORKER_PROBS))
        num_ps = int(rng.integers(1, max(1, workers // 2) + 1))
        if workers > 1 and rng.random() < allreduce_share:
            num_ps = 0
        run_s = float(np.clip(MEDIAN_RUN_S * np.exp(rng.standard_normal()), 120.0, 24 * 3600.0))
        jobs.append(Job(id=f"h-{i:03d}", type=job_type, num_ps=num_ps, num_workers=workers,
                        ps_demand=PS if num_ps else Resources(), worker_demand=WORKER,
                        iterations=max(1, round(run_s * reference_speed(profile_for(job_type)))),
                        submit_time=float(arrivals[i] - arrivals[0])))
    return jobs


def interval_for(jobs: list[Job], batch: float = BATCH) -> float:
    """The interval length (s) in which ``batch`` of these jobs arrive on average."""
    times = sorted(j.submit_time for j in jobs)
    return batch * (times[-1] - times[0]) / max(1, len(times) - 1)


def at_interval_starts(jobs: list[Job], interval_s: float) -> list[Job]:
    """Every job's arrival moved back to the start of its scheduling interval: the jobs that
    arrive within one interval are submitted together, as one batch, at its start."""
    if not interval_s > 0:
        raise ValueError("interval_s must be positive")
    return [replace(j, submit_time=math.floor(j.submit_time / interval_s) * interval_s) for j in jobs]


def truths(only: set[str]) -> dict:
    specs = {"contention": "contention",
             "gavel": f"gavel:{SHARED / 'gavel' / 'simulation_throughputs.json'}",
             "pollux": f"pollux:{SHARED / 'pollux' / 'models'}",
             "site-holdout": HOLDOUT}
    return {k: load_speed_model(v) for k, v in specs.items() if not only or k in only}


def baselines() -> list[str]:
    """lif only once it is registered (another engineer adds it); asked at run time."""
    return [b for b in REFERENCE + HARMONY_BASELINES if b in POLICIES]


def run_setting(nodes, truth, raw: tuple, hp: Hyper, ablations: dict | None, log) -> dict:
    """Train on the training trace, then every baseline and trained variant on each test trace."""
    interval = interval_for(at_offered_load(raw[0], nodes, truth, OFFERED_LOAD))
    prepare = lambda jobs: at_interval_starts(at_offered_load(jobs, nodes, truth, OFFERED_LOAD), interval)
    train_jobs, judge_jobs = prepare(raw[0]), prepare(raw[1])
    tests = [prepare(t) for t in raw[2]]
    started, cpu = time.time(), time.process_time()
    with tempfile.TemporaryDirectory() as work:
        res = run_experiment(nodes, train_jobs, tests[0], truth, Path(work), hp, judge_jobs=judge_jobs,
                             baselines=baselines(), ablations=ablations, seed=hp.seed, log=log)
        by_trace = [res.results] + [evaluate(nodes, jobs, truth, baselines(), res.models, hp.seed)
                                    for jobs in tests[1:]]
    return {"avg_jct_by_test_trace": {k: [r[k].summary()["avg_jct"] for r in by_trace] for k in res.results},
            "timeouts_by_test_trace": {k: [r[k].summary()["timeouts"] for r in by_trace] for k in res.results},
            "holds_by_test_trace": {k: [r[k].summary()["holds"] for r in by_trace] for k in res.results},
            "deployed": res.deployed, "speed_mape_unseen": res.speed_mape_unseen,
            "train_seconds": res.train_seconds, "interval_h": interval / 3600, "batch_sizes": batch_sizes(tests),
            "seconds": round(time.time() - started, 1), "cpu_seconds": round(time.process_time() - cpu, 1)}


def batch_sizes(traces: list[list[Job]]) -> dict:
    """Mean and largest number of jobs submitted at one interval start, over the test traces."""
    counts = [c for t in traces for c in np.unique([j.submit_time for j in t], return_counts=True)[1]]
    return {"mean": round(float(np.mean(counts)), 2), "max": int(max(counts))}


def ratios(setting: dict, name: str = "learned") -> dict:
    """``name``'s mean avg JCT over the test traces against the best of Harmony's baselines (by
    mean) and the best of every baseline, with the per-trace ratio to each."""
    traces = setting["avg_jct_by_test_trace"]
    mean = {k: float(np.mean(v)) for k, v in traces.items()}
    out = {}
    for label, pool in (("harmony", HARMONY_BASELINES), ("all", REFERENCE + HARMONY_BASELINES)):
        best = min((b for b in pool if b in traces), key=mean.get)
        out[label] = {"best": best, "ratio": mean[name] / mean[best],
                      "per_trace": [a / b for a, b in zip(traces[name], traces[best])]}
    out["vs_slurm"] = mean[name] / mean["slurm-default"]
    return out


def print_main(results: dict) -> None:
    """One markdown row per setting (README-ready)."""
    cols = [c for c in REFERENCE + HARMONY_BASELINES if any(c in s["avg_jct_by_test_trace"] for s in results.values())]
    n_traces = len(next(iter(results.values()))["avg_jct_by_test_trace"]["slurm-default"])
    print(f"\n== Harmony's setting: avg JCT (h), mean over {n_traces} test traces; learned vs the best of "
          f"LB/Tetris/LIF (paper: {PAPER_HEADLINE:.2f}x)")
    print("| setting | interval h (batch) | " + " | ".join(cols) + " | learned | vs best LB/Tetris/LIF "
          "| per trace | vs best of all | timeouts learned/best | deployed |")
    print("|---" * (len(cols) + 8) + "|")
    for key, s in results.items():
        t, killed = s["avg_jct_by_test_trace"], s["timeouts_by_test_trace"]
        h, a = ratios(s)["harmony"], ratios(s)["all"]
        cells = " | ".join(f"{np.mean(t[c]) / 3600:.2f}" if c in t else "-" for c in cols + ["learned"])
        print(f"| {key} | {s['interval_h']:.1f} ({s['batch_sizes']['mean']:.1f}) | {cells} "
              f"| {h['ratio']:.3f} ({h['best']}) | {' '.join(f'{x:.2f}' for x in h['per_trace'])} "
              f"| {a['ratio']:.3f} ({a['best']}) | {sum(killed['learned'])}/{sum(killed[h['best']])} "
              f"| {s['deployed'].get('learned', '?')} |")


def print_ablations(rows: dict) -> None:
    print("\n== Ablations on contention: learned vs the best of LB/Tetris/LIF and of all baselines")
    print("| variant | learned h | vs best LB/Tetris/LIF | per trace | vs best of all | holds | deployed |")
    print("|---" * 7 + "|")
    for name, row in rows.items():
        h, a = row["ratios"]["harmony"], row["ratios"]["all"]
        print(f"| {name} | {row['learned_h']:.2f} | {h['ratio']:.3f} ({h['best']}) "
              f"| {' '.join(f'{x:.2f}' for x in h['per_trace'])} | {a['ratio']:.3f} ({a['best']}) "
              f"| {row['holds']} | {row['deployed']} |")


def ablation_row(setting: dict, name: str) -> dict:
    t = setting["avg_jct_by_test_trace"]
    return {"learned_h": float(np.mean(t[name])) / 3600, "ratios": ratios(setting, name),
            "holds": sum(setting["holds_by_test_trace"].get(name, [0])),
            "deployed": setting["deployed"].get(name, "as shipped")}


def any_size(nodes, truth, raw_train, raw_tests, seed: int) -> dict:
    """The shipped default model (trained on another cluster and other jobs) run here as is."""
    interval = interval_for(at_offered_load(raw_train, nodes, truth, OFFERED_LOAD))
    tests = [at_interval_starts(at_offered_load(t, nodes, truth, OFFERED_LOAD), interval) for t in raw_tests]
    try:
        return {"avg_jct": [compare(nodes, jobs, truth, ["learned"], seed=seed, model_dir=DEFAULT_MODEL_DIR)
                            ["learned"].summary()["avg_jct"] for jobs in tests]}
    except InputError as e:  # a model of an older format: say so in the table, do not fail the run
        return {"error": f"{type(e).__name__}: {e}"}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "harmony_repro.json")
    ap.add_argument("--quick", action="store_true", help="small traces and training budget (a smoke run)")
    ap.add_argument("--only", default="", help="comma-separated truths (contention, gavel, pollux, site-holdout)")
    ap.add_argument("--no-ablations", action="store_true", help="skip the contention ablations")
    ap.add_argument("--jobs", type=int, default=120, help="jobs per trace")
    ap.add_argument("--seed", type=int, default=0, help="training seed")
    args = ap.parse_args(argv)
    hp, n, tests = Hyper(seed=args.seed), args.jobs, len(TEST_SEEDS)
    if args.quick:
        hp = replace(hp, rl_episodes=2, episode_jobs=30, speed_epochs=10, warm_episodes=1, warm_epochs=5,
                     validate_every=2)
        n, tests = 24, 2
    only = {s for s in args.only.split(",") if s}
    log = lambda key: (lambda m: print(f"  [{key}] {m}", file=sys.stderr))
    raw = lambda share=0.0: (harmony_jobs(n, TRAIN_SEED, share), harmony_jobs(n, JUDGE_SEED, share),
                             [harmony_jobs(n, s, share) for s in TEST_SEEDS[:tests]])
    one_switch = harmony_nodes(1)
    out: dict = {"cluster": "6 x (2 GPU, 8 CPU, 64 GB)", "batch": BATCH, "offered_load": OFFERED_LOAD,
                 "jobs_per_trace": n, "stand_ins": STAND_INS, "baselines": baselines(), "hyper": hp.to_dict(),
                 "settings": {}, "ablations": {}}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    for key, truth in truths(only).items():
        no_holding = {"no-holding": Ablation(holding=False)} if key == "contention" and not args.no_ablations else None
        out["settings"][key] = run_setting(one_switch, truth, raw(), hp, no_holding, log(key))
        print_main({key: out["settings"][key]})
        args.out.write_text(json.dumps(out, indent=2))
    base = out["settings"].get("contention")
    if base and not args.no_ablations:
        truth = load_speed_model("contention")
        variants = {"harmony (6 servers, 1 switch)": base,
                    "2 switches (3 + 3)": run_setting(harmony_nodes(2), truth, raw(), hp, None, log("2 switches")),
                    "half all-reduce": run_setting(one_switch, truth, raw(0.5), hp, None, log("all-reduce"))}
        rows = {name: ablation_row(s, "learned") for name, s in variants.items()}
        rows["no holding"] = ablation_row(base, "no-holding")
        shipped = any_size(one_switch, truth, raw()[0], raw()[2], hp.seed)
        if "avg_jct" in shipped:
            setting = {**base, "avg_jct_by_test_trace": {**base["avg_jct_by_test_trace"], "shipped": shipped["avg_jct"]},
                       "holds_by_test_trace": {}}
            rows["shipped model (8x8-trained)"] = ablation_row(setting, "shipped")
        out["ablations"] = {"rows": rows, "settings": {k: v for k, v in variants.items() if v is not base},
                            "shipped_model": shipped}
        print_main({k: v for k, v in variants.items() if v is not base})
        print_ablations(rows)
        if "error" in shipped:
            print(f"shipped model not run: {shipped['error']}")
        args.out.write_text(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    np.seterr(all="ignore")
    sys.exit(main())
