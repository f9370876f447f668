"""Load sweep: avg JCT of every policy at offered loads 0.3 to 1.1, and the highest load each
sustains, under a project truth and the frozen held-out one (issue 12's protocol).

One offered load on the edge of congestion says more about the queue than about placement, so
every policy runs every test trace at every load of ``LOADS``. For each truth and workload:

1. speeds are logged while the site's current policies run the training trace, and apart on a
   judge trace (``learned.experiment``: what the store holds after some weeks);
2. the learned policy is trained on them, once per training seed (``--train-seeds``), at
   ``TRAIN_LOAD``, within the retraining cron's budget;
3. every baseline of the registry (``policies.BASELINES``: slurm-default, slurm-topo and the
   rules), each trained model (``learned``: as training deployed it) and the search over each
   trained model (``search``: ``policies/search.py``, the model's speed ensemble weighing every
   proposer's placement and "hold"), and ``learned-fast`` over each (the gate's pick without the
   search, for the daemon's time budget) run the test traces at each load under the ground truth.

Truths: ``contention`` (the project's) and ``site-holdout`` (``benchmarks/truths/site_holdout.py``,
frozen before it was first used here; its traces carry the site's own type names, none of them
known to ``jobtypes``). Nothing is tuned on the held-out truth's results.

Traces (synthetic, none shares a job with another): training seed 211, judge seed 212, test seeds
401, 402, 403 by default (no other benchmark uses them), first used on 2026-12-02 for the distilled
network and teacher-relative RL, then for the ablations. A design change made after looking at a
loss here turns them into validation traces and the next figures need new seeds
(``--test-seeds``): 501-503 were first used on 2026-12-03 for the figures after the rack inputs,
601-603 on 2026-12-07 for the figures of that day.
Seeds 201-203 were the test traces until then (first used on 2026-12-01, then for the search):
validation traces now, beside 221 and 222, on which the training changes of 2026-12-02 were
chosen. Workloads: ``large`` (4-16 workers: placement matters) and ``philly`` (mostly 1-GPU jobs:
it barely does).

A policy *sustains* a load when its queue does not grow over the arrivals
(``SimResult.queue_growth`` below ``GROWTH_LIMIT`` on the mean over test traces); the table gives
the highest swept load it sustains. Figures are means over the test traces and, for the learned
policy, over training seeds, with the per-trace spread of its ratio to slurm-default.

The ``floor`` row (``sim/floor.py``) is what no policy gets much below on these traces: every job
started on arrival, alone, on the fastest of the baselines' placements of it on the empty
cluster. ``floor / slurm-default`` at a load is the headroom a ratio target there can use.

    python benchmarks/load_sweep.py [--quick] [--only site-holdout:large] [--out benchmarks/results/load_sweep.json]
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS"):  # tiny matrix products: threads only cost (cli.main)
    os.environ.setdefault(_var, "1")

import numpy as np  # after the thread settings

from slurm_advisor.experiments.experiment import evaluate, run_experiment
from slurm_advisor.learned.hyper import Hyper
from slurm_advisor.policies import BASELINES
from slurm_advisor.sim.clusterfile import read_cluster
from slurm_advisor.sim.floor import floor_avg_jct
from slurm_advisor.sim.runner import compare
from slurm_advisor.sim.workload import at_offered_load
from slurm_advisor.speedmodels import load_speed_model
from slurm_advisor.traces.synthetic import synthetic_jobs
from slurm_advisor.training.train import Ablation

REPO = Path(__file__).resolve().parents[1]
LOADS = (0.3, 0.5, 0.7, 0.9, 1.1)
TRAIN_LOAD = 0.6
GROWTH_LIMIT = 0.05
FLOOR = "floor"  # the row of sim/floor.py: no wait, alone, the fastest baseline placement
TRAIN_SEED, JUDGE_SEED, TEST_SEEDS = 211, 212, (401, 402, 403)
SITE_TYPES = ("ctr-ranker-v3", "asr-conformer-l", "vit-h-pretrain", "seg-unet-3d", "gnn-sage-prod",
              "lm-lora-13b", "diffusion-xl", "tabular-sweep")  # as the held-out site names its jobs
# --ablations: each trained beside `learned`, on the same samples, per training seed (issue 12 item 3).
ABLATIONS = {"no-distill": Ablation(distill=False), "no-rl": Ablation(rl=False),
             "no-network": Ablation(network=False), "no-holding": Ablation(holding=False),
             "no-replay": Ablation(replay=False), "no-exploration": Ablation(exploration=False),
             "no-warm-start": Ablation(warm_start=False)}
TRUTHS = {"contention": ("contention", None),
          "site-holdout": (f"{REPO / 'benchmarks' / 'truths' / 'site_holdout.py'}:SiteHoldoutSpeeds", SITE_TYPES)}


def traces(mix: str, types, n: int, test_seeds: Sequence[int]) -> tuple[list, list, list[list]]:
    make = lambda seed: synthetic_jobs(n, seed=seed, mix=mix, types=types)
    return make(TRAIN_SEED), make(JUDGE_SEED), [make(s) for s in test_seeds]


def sweep_setting(nodes, truth, raw, hp: Hyper, train_seeds, loads, log, models: Path | None = None,
                  ablations: Sequence[str] = ()) -> dict:
    """``models``: where the trained models are kept (``seed<S>/learned``, ``seed<S>/<ablation>``);
    models already there are evaluated again rather than retrained (same traces, same
    hyper-parameters: a new policy over the same models, e.g. ``search``, costs no training)."""
    raw_train, raw_judge, raw_tests = raw
    train_jobs = at_offered_load(raw_train, nodes, truth, TRAIN_LOAD)
    judge_jobs = at_offered_load(raw_judge, nodes, truth, TRAIN_LOAD)
    first_test = at_offered_load(raw_tests[0], nodes, truth, TRAIN_LOAD)
    runs: dict[str, dict[str, list]] = {}  # policy -> load -> [(avg_jct, growth), ...] over traces
    trained, deployed, mape = {}, {}, {}
    with tempfile.TemporaryDirectory() as scratch:
        work = models if models is not None else Path(scratch)
        for s in train_seeds:
            names = ("learned", *ablations)
            kept = {name: work / f"seed{s}" / name for name in names}
            if all((d / "meta.json").exists() for d in kept.values()):
                for name, d in kept.items():
                    meta = json.loads((d / "meta.json").read_text())
                    trained[f"{name}/seed{s}"] = d
                    deployed[f"{name}/seed{s}"] = meta["deploy"] + (f" (patience {meta['patience']})"
                                                                    if meta["patience"] else "")
                mape[f"seed{s}"] = None  # measured when it was trained
                log(f"seed {s}: kept models {sorted(kept)}, deployed {deployed}")
                continue
            started = time.process_time()
            res = run_experiment(nodes, train_jobs, first_test, truth, work / f"seed{s}",
                                 replace(hp, seed=s), judge_jobs=judge_jobs, baselines=[], seed=s, log=log,
                                 ablations={name: ABLATIONS[name] for name in ablations})
            for name in names:
                trained[f"{name}/seed{s}"] = res.models[name]
                deployed[f"{name}/seed{s}"] = res.deployed[name]
            mape[f"seed{s}"] = res.speed_mape_unseen
            log(f"seed {s}: trained in {time.process_time() - started:.0f} CPU-s "
                f"({ {k: round(v) for k, v in res.train_seconds.items()} } s wall each), deployed {res.deployed}")
        # The floor (sim/floor.py): arrivals do not change it, so one figure per trace for every load.
        floors = [floor_avg_jct(nodes, raw_test, truth) for raw_test in raw_tests]
        for load in loads:
            runs.setdefault(FLOOR, {})[str(load)] = [(f, 0.0, 0) for f in floors]
            for raw_test in raw_tests:
                jobs = at_offered_load(raw_test, nodes, truth, load)
                for name, r in _evaluate(nodes, jobs, truth, trained, deployed).items():
                    s = r.summary()
                    runs.setdefault(name, {}).setdefault(str(load), []).append(
                        (s["avg_jct"], r.queue_growth(), s.get("timeouts", 0)))
    return {"runs": runs, "deployed": deployed, "speed_mape_unseen": mape}


def _evaluate(nodes, jobs, truth, trained: dict[str, Path], deployed: dict[str, str]) -> dict:
    """Every baseline, trained model, and the search and ``learned-fast`` over each ``learned``
    model on ``jobs`` (``deployed``: what each model's gate deployed);
    ``lif`` uses the interference profile fitted beside the first training seed's model
    (``experiment.evaluate`` takes it from the model named ``learned``)."""
    first, *others = trained
    models = {"learned": trained[first], **{k: trained[k] for k in others}}
    results = evaluate(nodes, jobs, truth, BASELINES, models, seed=0)
    results[first] = results.pop("learned")
    for name, directory in trained.items():  # learned/seedS -> search/seedS, learned-fast/seedS
        if name.startswith("learned/"):
            results[name.replace("learned/", "search/")] = compare(nodes, jobs, truth, ["search"], seed=0,
                                                                    model_dir=directory)["search"]
            # learned-fast differs from learned only where the gate deployed the search
            results[name.replace("learned/", "learned-fast/")] = (
                compare(nodes, jobs, truth, ["learned-fast"], seed=0, model_dir=directory)["learned-fast"]
                if deployed[name] == "search" else results[name])
    return results


def summarize(setting: dict, loads) -> dict:
    """Per policy (trained seeds pooled as 'learned'): mean avg JCT per load, ratio to
    slurm-default per load (mean of means) with the per-trace range, growth, sustained load."""
    runs = setting["runs"]
    pooled = dict(runs)
    for kind in pooled_kinds(runs):
        seeds = [k for k in runs if k.startswith(kind + "/")]
        pooled[kind] = {str(load): [x for k in seeds for x in runs[k][str(load)]] for load in loads}
    out = {}
    for name, by_load in pooled.items():
        row = {}
        for load in loads:
            cell = by_load[str(load)]
            ref = runs["slurm-default"][str(load)]
            jct = float(np.mean([c[0] for c in cell]))
            per_trace = [c[0] / ref[i % len(ref)][0] for i, c in enumerate(cell)]
            row[str(load)] = {"avg_jct_h": jct / 3600, "vs_slurm": jct / float(np.mean([c[0] for c in ref])),
                              "vs_slurm_range": [min(per_trace), max(per_trace)],
                              "growth": float(np.mean([c[1] for c in cell])), "timeouts": sum(c[2] for c in cell)}
        highest = 0.0  # the highest load up to which every swept load is sustained
        for load in loads:
            if row[str(load)]["growth"] >= GROWTH_LIMIT:
                break
            highest = load
        out[name] = {"by_load": row, "sustains": None if name == FLOOR else highest}  # the floor never waits
    return out


def pooled_kinds(runs) -> list[str]:
    """The trained rows, each one per training seed (``learned/seed0``): pooled over seeds."""
    return list(dict.fromkeys(k.split("/")[0] for k in runs if "/" in k))


def best_baseline(summary: dict, load: str) -> str:
    return min((b for b in BASELINES if b in summary), key=lambda b: summary[b]["by_load"][load]["avg_jct_h"])


def print_table(key: str, summary: dict, setting: dict, loads) -> None:
    print(f"\n== {key}: avg JCT (h), mean over test traces; learned, search = mean over training seeds "
          f"(deployed {setting['deployed']}; speed-model MAPE on unseen placements "
          f"{ {k: v if v is None else round(v, 3) for k, v in setting['speed_mape_unseen'].items()} })")
    print(f"{'policy':<18}" + "".join(f"{'load ' + str(x):>12}" for x in loads) + f"{'sustains':>10}")
    for name, s in summary.items():
        print(f"{name:<18}" + "".join(f"{s['by_load'][str(x)]['avg_jct_h']:>12.2f}" for x in loads)
              + (f"{'-':>10}" if name == FLOOR else f"{s['sustains']:>10}"))
    if FLOOR in summary:
        print(f"{'floor / slurm-d.':<18}" + "".join(f"{summary[FLOOR]['by_load'][str(x)]['vs_slurm']:>12.3f}"
                                                   for x in loads)
              + "   (no policy's ratio goes much below this: sim/floor.py)")
    for kind in pooled_kinds(setting["runs"]):
        print(f"{kind} vs slurm-default (per-trace range) | vs the best baseline at that load:")
        for x in loads:
            c = summary[kind]["by_load"][str(x)]
            best = best_baseline(summary, str(x))
            ratio = c["avg_jct_h"] / summary[best]["by_load"][str(x)]["avg_jct_h"]
            print(f"  load {x}: {c['vs_slurm']:.3f} ({c['vs_slurm_range'][0]:.2f}-{c['vs_slurm_range'][1]:.2f})"
                  f" | {ratio:.3f} x {best}")


def plot(summary: dict, loads, path: Path, title: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for name, s in summary.items():
        if "/" in name:  # one training seed's row: the pooled row is plotted
            continue
        if name == FLOOR:
            ax.plot(loads, [s["by_load"][str(x)]["avg_jct_h"] for x in loads], "k--",
                    label="floor: no wait, alone, fastest baseline placement")
            continue
        ax.plot(loads, [s["by_load"][str(x)]["avg_jct_h"] for x in loads], marker="o", label=name)
    ax.set_yscale("log")
    ax.set_xlabel("offered load (GPU time asked for, jobs alone / GPU time available)")
    ax.set_ylabel("avg JCT (hours, log scale)")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "load_sweep.json")
    ap.add_argument("--quick", action="store_true", help="small traces and training budget (a smoke run)")
    ap.add_argument("--only", default="", help="comma-separated truth:workload settings to run")
    ap.add_argument("--train-seeds", default="0,1", help="comma-separated training seeds")
    ap.add_argument("--jobs", type=int, default=300, help="jobs per trace")
    ap.add_argument("--models", type=Path, help="keep the trained models here (<truth>-<workload>/seed<S>/); "
                                                "models already there are evaluated, not retrained")
    ap.add_argument("--ablations", default="", help=f"comma-separated variants trained beside learned: {','.join(ABLATIONS)}")
    ap.add_argument("--loads", default="", help="comma-separated offered loads (default: 0.3,0.5,0.7,0.9,1.1)")
    ap.add_argument("--test-seeds", default=",".join(map(str, TEST_SEEDS)),
                    help="comma-separated seeds of the test traces: fresh ones once a design change "
                         "was made after a loss on these (they are then validation traces)")
    args = ap.parse_args(argv)
    hp = Hyper()
    try:
        test_seeds = [int(s) for s in args.test_seeds.split(",") if s]
    except ValueError:
        ap.error(f"--test-seeds: integers separated by commas, not {args.test_seeds!r}")
    if not test_seeds:
        ap.error("--test-seeds: at least one seed")
    n, loads = args.jobs, LOADS
    if args.quick:
        hp = replace(hp, rl_episodes=3, episode_jobs=60, speed_epochs=20, warm_episodes=1, warm_epochs=10)
        n, test_seeds, loads = 80, test_seeds[:2], (0.3, 0.7, 1.1)
    seeds = [int(s) for s in args.train_seeds.split(",") if s]
    unknown = sorted({a for a in args.ablations.split(",") if a} - set(ABLATIONS))
    if unknown:
        ap.error(f"--ablations: unknown {', '.join(unknown)} (known: {', '.join(ABLATIONS)})")
    if args.loads:
        loads = tuple(float(x) for x in args.loads.split(","))
    nodes = read_cluster(REPO / "examples" / "clusters" / "16x8.toml")
    only = {s for s in args.only.split(",") if s}
    out = {"cluster": "16x8", "loads": list(loads), "train_load": TRAIN_LOAD, "train_seeds": seeds,
           "test_seeds": test_seeds,
           "growth_limit": GROWTH_LIMIT, "hyper": hp.to_dict(), "settings": {}}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    for tname, (spec, types) in TRUTHS.items():
        truth = load_speed_model(spec)
        for mix in ("large", "philly"):
            key = f"{tname}:{mix}"
            if only and key not in only:
                continue
            started = time.time()
            setting = sweep_setting(nodes, truth, traces(mix, types, n, test_seeds), hp, seeds, loads,
                                    lambda m, k=key: print(f"  [{k}] {m}", file=sys.stderr, flush=True),
                                    models=args.models / f"{tname}-{mix}" if args.models else None,
                                    ablations=[a for a in args.ablations.split(",") if a])
            summary = summarize(setting, loads)
            out["settings"][key] = {"summary": summary, "deployed": setting["deployed"],
                                    "speed_mape_unseen": setting["speed_mape_unseen"],
                                    "runs": setting["runs"], "seconds": round(time.time() - started, 1)}
            print_table(key, summary, setting, loads)
            plot(summary, loads, args.out.with_name(f"{args.out.stem}-{tname}-{mix}.png"), key)
            args.out.write_text(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    np.seterr(all="ignore")
    sys.exit(main())
