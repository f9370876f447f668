"""Closed loop: five cycles of run -> report -> retrain -> promote through the real daemon.

Each cycle runs a fresh synthetic trace (``large`` mix at the demo's offered load, seeds 71-75)
on examples/clusters/16x8.toml under a ground truth (``contention`` by default) with
``slurm_advisor.loop``: the jobs ask the daemon (slurm-default until a model is promoted), report
their speeds and end with outcomes, then retrain decides. Per cycle: avg JCT of what the daemon
served vs slurm-default on the same trace (in the plain simulator, and served through the daemon
all along, "sd/daemon": it equals the plain figure now that the daemon leaves Slurm's own choice
to Slurm; a difference would be the daemon's path itself), the MAPE of the speed model the cycle's retrain
produced on the *next* cycle's observations, and whether it was promoted (and why not).

    python benchmarks/closed_loop.py --out benchmarks/results/closed_loop.json
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

from slurm_advisor.cli.loop import hours, percent
from slurm_advisor.experiments.demo import loaded_trace
from slurm_advisor.learned.hyper import Hyper
from slurm_advisor.loop.driver import Loop, LoopSettings
from slurm_advisor.sim.clusterfile import read_cluster
from slurm_advisor.speedmodels import load_speed_model

REPO = Path(__file__).resolve().parents[1]
SEEDS = (71, 72, 73, 74, 75)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "closed_loop.json")
    ap.add_argument("--truth", default="contention", help="ground-truth speed model spec")
    ap.add_argument("--jobs", type=int, default=120, help="jobs per trace")
    ap.add_argument("--episodes", type=int, default=30, help="RL episodes per retrain")
    ap.add_argument("--mode", default="enforce", choices=("advise", "enforce"),
                    help="the daemon's mode (enforce: the learned policy's holds become node-count caps)")
    ap.add_argument("--margin", type=float, default=0.02)
    ap.add_argument("--seeds", type=lambda v: tuple(int(x) for x in v.split(",")), default=SEEDS,
                    help="trace seeds, one cycle each (default 71,72,73,74,75)")
    ap.add_argument("--fit-seeds", type=int, default=3,
                    help="refit each cycle's speed model with this many fitting seeds (0 = the loop's own, "
                         "1, 2, ...) on the same samples, for the next-cycle MAPE's spread (0: skip)")
    args = ap.parse_args(argv)
    nodes = read_cluster(REPO / "examples" / "clusters" / "16x8.toml")
    truth = load_speed_model(args.truth)
    traces = [loaded_trace(nodes, truth, args.jobs, seed) for seed in args.seeds]
    # the demo's small budget (experiments/demo.py), with fewer RL episodes
    hp = replace(Hyper(), rl_episodes=args.episodes, episode_jobs=min(80, args.jobs), speed_epochs=40,
                 warm_episodes=2, warm_epochs=20)
    settings = LoopSettings(mode=args.mode, margin=args.margin, hyper=hp)
    started = time.time()
    with tempfile.TemporaryDirectory(prefix="closed-loop-") as work:
        loop = Loop(nodes, truth, str(Path(work) / "loop.db"), Path(work) / "models", settings,
                    log=lambda line: print(line, file=sys.stderr))
        cycles = loop.run(traces)
        # slurm-default served through the daemon all along: what the daemon's path itself changes
        # (Slurm's task layout on pinned nodes, slurm/expressible.py) apart from what was learned
        served = Loop(nodes, truth, str(Path(work) / "baseline.db"), Path(work) / "baseline-models",
                      replace(settings, retrain=False)).run(traces)
        spread = refit_spread(str(Path(work) / "loop.db"), cycles, settings, args.fit_seeds)
    for c, b in zip(cycles, served):
        c["daemon_slurm_default_avg_jct"] = b["avg_jct"]
    print(table(cycles))
    if spread:
        print(spread_table(spread))
    out = {"cluster": "examples/clusters/16x8.toml", "truth": args.truth, "mix": "large", "jobs": args.jobs,
           "seeds": list(args.seeds), "mode": args.mode, "margin": args.margin, "hyper": hp.to_dict(),
           "seconds": round(time.time() - started, 1), "cycles": cycles,
           "refit_next_mape": spread}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=2))
    plot(cycles, args.out.with_suffix(".png"), args.truth)
    print(f"results: {args.out}, plot: {args.out.with_suffix('.png')}")
    return 0


def refit_spread(db: str, cycles: list[dict], settings: LoopSettings, seeds: int) -> list[dict]:
    """Per cycle but the last: the next-cycle MAPE of speed models fitted as that cycle's retrain
    fitted its own (the samples stored by then, less the retrain's time holdout; the same
    hyperparameters) with fitting seeds 0..seeds-1. Seed 0 is the retrain's own seed; the others
    say how much of a cycle's figure is the fitting seed's (initialisation, bootstrap, batches)
    rather than the data's. A loop whose models were promoted saw other placements later on, so
    only the first cycle's spread is the whole story there; the samples are the same for every seed."""
    from slurm_advisor.learned.speed.fit import fit_site_model
    from slurm_advisor.retrain.data import split_by_time
    from slurm_advisor.store import Store

    if seeds <= 0:
        return []
    with Store.open(db, create=False) as store:
        samples = store.load_samples()
    starts = [c["samples_since"] for c in cycles] + [math.inf]
    out = []
    for now, begin, end in zip(cycles, starts[1:], starts[2:]):
        seen = [s for s in samples if s.time < begin]  # what the store held when ``now`` retrained
        nxt = [s for s in samples if s.source == "live" and begin <= s.time < end]
        train = split_by_time(seen, settings.holdout_fraction, settings.holdout_max).train
        mapes = [fit_site_model(train, replace(settings.hyper, seed=seed))[0].mape(nxt) for seed in range(seeds)]
        out.append({"cycle": now["cycle"], "train_samples": len(train), "next_samples": len(nxt),
                    "next_mape_by_seed": [round(float(m), 4) for m in mapes]})
    return out


def spread_table(spread: list[dict]) -> str:
    lines = [f"{'cycle':>5} {'trained on':>10} {'next':>6}  next-cycle MAPE by fitting seed (mean, min-max)"]
    for r in spread:
        m = r["next_mape_by_seed"]
        lines.append(f"{r['cycle']:>5} {r['train_samples']:>10} {r['next_samples']:>6}  "
                     f"{', '.join(percent(x) for x in m)}  ({percent(sum(m) / len(m))}, "
                     f"{percent(min(m))}-{percent(max(m))})")
    return "\n".join(lines)


def plot(cycles: list[dict], path: Path, truth: str) -> None:
    """Avg JCT per cycle (served, slurm-default plain and through the daemon) and the next-cycle MAPE."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    x = [c["cycle"] for c in cycles]
    fig, (jct, err) = plt.subplots(1, 2, figsize=(10, 3.6))
    for key, label, dx in (("avg_jct", "served by the daemon", -0.27), ("slurm_default_avg_jct", "slurm-default", 0.0),
                           ("daemon_slurm_default_avg_jct", "slurm-default via the daemon", 0.27)):
        jct.bar([i + dx for i in x], [(c.get(key) or 0) / 3600 for c in cycles], width=0.27, label=label)
    for c in cycles:
        if c["promoted"]:
            jct.annotate("promoted", (c["cycle"], (c["avg_jct"] or 0) / 3600), ha="center", va="bottom", fontsize=7)
    jct.set(xlabel="cycle", ylabel="avg JCT (h)", title=f"closed loop under {truth}", xticks=x)
    jct.legend(fontsize=7)
    mape = [(c["cycle"], 100 * c["next_mape"]) for c in cycles if c.get("next_mape") is not None]
    err.plot([m[0] for m in mape], [m[1] for m in mape], marker="o")
    err.axhline(10, linestyle="--", color="grey")
    err.set(xlabel="cycle whose retrain fitted the model", ylabel="MAPE on the next cycle (%)", xticks=x,
            title="speed model error (target 10 %)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def table(cycles: list[dict]) -> str:
    lines = [(f"{'cycle':>5} {'served':<20} {'avg JCT h':>10} {'slurm-def h':>12} {'ratio':>6} {'sd/daemon h':>12} "
              f"{'MAPE now':>9} {'MAPE next':>10}  promoted")]
    for c in cycles:
        served = c["policy"] + (f" {c['model'][:8]}" if c.get("model") else "")
        ratio = c["avg_jct"] / c["slurm_default_avg_jct"] if c["avg_jct"] and c["slurm_default_avg_jct"] else None
        why = "" if c["promoted"] else f" ({c['retrain']['reason']})"
        lines.append(f"{c['cycle']:>5} {served:<20} {hours(c['avg_jct']):>10} {hours(c['slurm_default_avg_jct']):>12} "
                     f"{'-' if ratio is None else f'{ratio:.2f}':>6} {hours(c.get('daemon_slurm_default_avg_jct')):>12} "
                     f"{percent(c['mape']):>9} "
                     f"{percent(c.get('next_mape')):>10}  {'yes' if c['promoted'] else 'no'}{why}")
    return "\n".join(lines)



if __name__ == "__main__":
    sys.exit(main())
