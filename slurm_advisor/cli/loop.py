"""`slurm-advisor loop`: the learning loop on a simulated cluster, through the real daemon."""
from __future__ import annotations

import json
import tempfile
from dataclasses import replace
from pathlib import Path

import click

_FILE = click.Path(exists=True, dir_okay=False, path_type=Path)


# Without --trace: the demo's workload (experiments/demo.py) on fresh seeds no benchmark uses.
GENERATED_SEED = 81


@click.command()
@click.option("--cluster", type=_FILE, help="Cluster file (TOML)  [default: the embedded 8 x 8-GPU cluster].")
@click.option("--trace", "traces", multiple=True, type=_FILE,
              help="A trace (CSV); one cycle per --trace, in the order given  "
                   "[default: --cycles traces of the demo's large-job mix at offered load 0.6].")
@click.option("--cycles", type=click.IntRange(min=1), default=3, show_default=True,
              help="Cycles when no --trace is given.")
@click.option("--jobs", type=click.IntRange(min=10), default=80, show_default=True,
              help="Jobs per generated trace (no --trace).")
@click.option("--speed-model", default="contention", show_default=True,
              help="Ground truth: contention, gavel:PATH, pollux:DIR or path/file.py:Class.")
@click.option("--db", required=True, help="Store: SQLite path or SQLAlchemy URL (with no active model yet).")
@click.option("--models-dir", type=click.Path(file_okay=False, path_type=Path),
              help="Retrain's versions and the 'active' pointer (default: a new temporary directory).")
@click.option("--mode", type=click.Choice(["observe", "advise", "enforce"]), default="advise", show_default=True,
              help="The daemon's mode (enforce: a policy's hold becomes a node-count cap).")
@click.option("--episodes", type=click.IntRange(min=1), help="RL episodes per retrain (default: the hyperparameters').")
@click.option("--hyper", "hyper_values", multiple=True, metavar="NAME=VALUE",
              help="One retrain hyperparameter (learned/hyper.py); repeatable.")
@click.option("--margin", type=click.FloatRange(0, 1, max_open=True), default=0.02, show_default=True,
              help="Retrain promotes only if avg JCT is this share better.")
@click.option("--max-mape", type=click.FloatRange(min=0, min_open=True), default=0.5, show_default=True,
              help="Retrain never promotes a candidate whose speed model misses held-out speeds by more.")
@click.option("--seed", default=0, show_default=True, help="Seeds the simulations.")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list, one object per cycle.")
def loop(cluster, traces, cycles, jobs, speed_model, db, models_dir, mode, episodes, hyper_values, margin,
         max_mape, seed, as_json) -> None:
    """One cycle per trace: run it through the daemon (serving slurm-default until a model is
    promoted) with jobs reporting their speeds and ending with outcomes, then retrain and promote
    or not. Prints per cycle avg JCT (the daemon's and slurm-default's on the same trace, in
    hours; --json keeps seconds), the active speed model's MAPE on the cycle's observations, and whether retrain
    promoted. With no --cluster and no --trace it runs the embedded default: the shipped cluster
    and --cycles fresh traces of the demo's workload."""
    from slurm_advisor.cli.retrain import parse_hyper
    from slurm_advisor.experiments.demo import loaded_trace
    from slurm_advisor.learned.hyper import Hyper
    from slurm_advisor.loop.driver import Loop, LoopSettings
    from slurm_advisor.sim.clusterfile import default_cluster, read_cluster
    from slurm_advisor.sim.trace import read_trace
    from slurm_advisor.speedmodels import load_speed_model

    hp = parse_hyper(hyper_values, Hyper())
    if episodes is not None:
        hp = replace(hp, rl_episodes=episodes)
    if models_dir is None:
        models_dir = Path(tempfile.mkdtemp(prefix="slurm-advisor-loop-models-"))
    click.echo(f"models: {models_dir}", err=True)
    settings = LoopSettings(mode=mode, seed=seed, margin=margin, max_mape=max_mape, hyper=hp)
    nodes, truth = (read_cluster(cluster) if cluster else default_cluster()), load_speed_model(speed_model)
    if traces:
        workload = [read_trace(t) for t in traces]
    else:
        workload = [loaded_trace(nodes, truth, jobs, GENERATED_SEED + seed + i) for i in range(cycles)]
        click.echo(f"traces: {cycles} x {jobs} jobs of the demo's large-job mix at offered load 0.6 "
                   f"(seeds {GENERATED_SEED + seed}-{GENERATED_SEED + seed + cycles - 1})", err=True)
    runner = Loop(nodes, truth, db, models_dir, settings, log=lambda line: click.echo(line, err=True))
    results = runner.run(workload)
    if as_json:
        click.echo(json.dumps(results, indent=2))
        return
    click.echo(table(results))


def table(cycles: list[dict]) -> str:
    """cycle | served | avg JCT | slurm-default | ratio | MAPE | promoted, one row per cycle."""
    rows = [f"{'cycle':>5}  {'served':<26} {'avg JCT h':>10} {'slurm-default h':>16} {'ratio':>6} {'MAPE':>7}  promoted"]
    for c in cycles:
        served = c["policy"] + (f" {c['model']}" if c.get("model") else "")
        rows.append(f"{c['cycle']:>5}  {served:<26} {hours(c['avg_jct']):>10} {hours(c['slurm_default_avg_jct']):>16} "
                    f"{ratio(c['avg_jct'], c['slurm_default_avg_jct']):>6} {percent(c['mape']):>7}  "
                    f"{'yes' if c['promoted'] else 'no'}")
    return "\n".join(rows)


def ratio(a: float | None, b: float | None) -> str:
    """The served policy's avg JCT over slurm-default's: below 1 is a gain."""
    return "-" if a is None or not b else f"{a / b:.3f}"


def hours(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds / 3600:.2f}"


def percent(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f} %"
