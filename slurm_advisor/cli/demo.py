"""`slurm-advisor demo`: the whole method on the shipped default cluster, no Slurm needed."""
from __future__ import annotations

from pathlib import Path

import click


@click.command()
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=Path("demo-out"),
              show_default=True, help="Directory for results.json, the JCT CDF plot and the model.")
@click.option("--episodes", type=click.IntRange(min=1), default=100, show_default=True,
              help="RL episodes after the warm start (100: about 2-3 minutes in all on two cores).")
@click.option("--jobs", type=click.IntRange(min=20), default=120, show_default=True,
              help="Jobs in each of the training and test traces.")
@click.option("--seed", default=0, show_default=True, help="Seeds the traces, simulations and training.")
def demo(out: Path, episodes: int, jobs: int, seed: int) -> None:
    """Record speeds on a simulated 8 x 8-GPU cluster, learn the speed model and the policy from
    them, then compare the learned policy with the baselines on an unseen trace."""
    from slurm_advisor.experiments.demo import DemoConfig, run_demo, write_outputs
    from slurm_advisor.sim.tables import table

    result = run_demo(DemoConfig(episodes=episodes, jobs=jobs, seed=seed), out / "model", log=click.echo)
    paths = write_outputs(result, out)
    exp = result.experiment
    click.echo(f"\nthe policies on {jobs} unseen test jobs (times in hours; results.json keeps seconds):\n")
    click.echo(table(exp.results))
    click.echo(f"\nspeed model: mean absolute percentage error {exp.speed_mape_unseen:.1%} "
               "on placements and jobs it never saw")
    click.echo(f"learned deploys: {exp.deployed['learned']} (what the promotion gate shipped: the "
               "network or its teacher heuristic, and whether it holds jobs for better placements)")
    click.echo(f"results: {paths['results']}\nJCT CDF plot: {paths['plot']}\nmodel: {out / 'model' / 'learned'}")
