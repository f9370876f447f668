"""`slurm-advisor simulate`: compare policies on a cluster and trace under a ground truth."""
from __future__ import annotations

import json
from contextlib import nullcontext
from pathlib import Path

import click

from slurm_advisor.policies import BASELINES, POLICIES


def parse_policies(value: str) -> list[str]:
    names = [p.strip() for p in value.split(",") if p.strip()]
    unknown = [p for p in names if p not in POLICIES]
    if unknown or not names:
        raise click.BadParameter(f"unknown policy {', '.join(unknown) or '(none)'}; "
                                 f"valid: {', '.join(POLICIES)}")
    return names


@click.command()
@click.option("--cluster", required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Cluster file (TOML).")
@click.option("--trace", required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Job trace CSV.")
@click.option("--speed-model", default="contention", show_default=True,
              help="Ground truth: contention, gavel:FILE.json, pollux:DIR or file.py:Class[:json].")
@click.option("--policy", "policies", default=",".join(BASELINES),
              show_default=True, help=f"Comma-separated policies from: {', '.join(POLICIES)}.")
@click.option("--model", "model_dir", type=click.Path(file_okay=False, path_type=Path),
              help="Checkpoint directory for the learned policy (default: the shipped model).")
@click.option("--record-to", default=None, help="Store every observed speed sample here (DB URL or path).")
@click.option("--sample-noise", default=0.02, show_default=True,
              help="Log-normal noise of recorded speeds, as real measurements have.")
@click.option("--seed", default=0, show_default=True, help="Seeds the simulations (the same seed, the same result).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of a table.")
@click.option("--plot", type=click.Path(dir_okay=False, path_type=Path), help="Write a JCT CDF plot.")
@click.option("--served-as", type=click.Choice(("enforce", "advise")), default="enforce", show_default=True,
              help="Play the daemon's mode: enforce serves a policy's holds (as node-count caps); in advise "
                   "mode the hook cannot delay a job, so a held job is left to Slurm and starts at once. In "
                   "both the policy decides a job once and a pin runs as Slurm lays it out.")
def simulate(cluster, trace, speed_model, policies, model_dir, record_to, sample_noise, seed, as_json, plot,
             served_as):
    """Run a trace through the simulator once per policy, on the same inputs and seed."""
    from slurm_advisor.cli.inputs import read_inputs
    from slurm_advisor.cli.output import replaced_whole
    from slurm_advisor.sim.floor import floor_avg_jct
    from slurm_advisor.sim.runner import compare
    from slurm_advisor.sim.tables import plot_jct_cdf, summaries, table
    from slurm_advisor.speedmodels import load_speed_model

    names = parse_policies(policies)
    (nodes, jobs), truth = read_inputs(cluster, trace), load_speed_model(speed_model)
    store = _open_store(record_to)
    try:
        with store.batched() if store else nullcontext() as record:
            results = compare(nodes, jobs, truth, names, seed=seed, model_dir=model_dir,
                              recorder=record, sample_noise=sample_noise, holds=served_as == "enforce",
                              caps=served_as == "enforce")
    finally:
        if store:
            store.close()
    if as_json:
        # Every figure is finite (bounded trace, checked speeds); allow_nan=False makes sure of it.
        click.echo(json.dumps(summaries(results), indent=2, allow_nan=False))
    else:
        click.echo(table(results, floor=floor_avg_jct(nodes, jobs, truth, seed=seed)))
    if plot:
        with replaced_whole(plot) as tmp:
            plot_jct_cdf(results, tmp, title=f"{trace.name} on {cluster.name} ({truth.name})")
        if not as_json:
            click.echo(f"plot written to {plot}")


def _open_store(url: str | None):
    if url is None:  # "" is refused by the store, as every command's empty --db
        return None
    from slurm_advisor.store import Store
    return Store.open(url)
