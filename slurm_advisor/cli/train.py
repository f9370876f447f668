"""`slurm-advisor train`: fit the speed model on recorded samples, then train the policy."""
from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import click


@click.command()
@click.option("--from-db", "db_url", required=True,
              help="Existing store with recorded speed samples (DB URL or path).")
@click.option("--cluster", required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Cluster file (TOML) the model is trained for.")
@click.option("--trace", required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Training trace (keep the test trace apart).")
@click.option("--out", required=True, type=click.Path(file_okay=False, path_type=Path), help="Model directory.")
@click.option("--episodes", type=click.IntRange(min=1), default=None,
              help="RL episodes (default from the hyperparameters).")
@click.option("--episode-jobs", type=click.IntRange(min=1), default=None, help="Jobs per RL episode.")
@click.option("--seed", default=0, show_default=True, help="Seeds the training (the same seed, the same model).")
@click.option("--no-replay", is_flag=True, help="Ablation: learn from the latest episode only.")
@click.option("--no-exploration", is_flag=True, help="Ablation: no job-aware exploration.")
@click.option("--no-warm-start", is_flag=True, help="Ablation: start RL from random weights.")
@click.option("--no-holding", is_flag=True, help="Never hold a job for a better placement (patience 0).")
def train(db_url, cluster, trace, out, episodes, episode_jobs, seed, no_replay, no_exploration, no_warm_start,
          no_holding):
    """Fit the speed model on recorded samples only, warm-start the policy, then train it by RL
    in the simulator with rewards from the fitted speed model (never the ground truth)."""
    from slurm_advisor.cli.inputs import read_inputs
    from slurm_advisor.experiments.service import train_and_save
    from slurm_advisor.learned.hyper import Hyper
    from slurm_advisor.training.train import Ablation

    read_inputs(cluster, trace)  # a trace where no job fits is refused before any work
    hp = Hyper(seed=seed)
    if episodes is not None:
        hp = replace(hp, rl_episodes=episodes)
    if episode_jobs is not None:
        hp = replace(hp, episode_jobs=episode_jobs)
    ablation = Ablation(replay=not no_replay, exploration=not no_exploration, warm_start=not no_warm_start,
                        holding=not no_holding)
    meta = train_and_save(db_url, cluster, trace, out, hp, ablation, log=click.echo)
    click.echo(json.dumps({k: meta[k] for k in ("speed_model", "teacher", "best_validation_jct",
                                                  "deploy", "patience", "train_seconds")}, indent=2))
    click.echo(f"model written to {out} (learning curve: {out / 'learning_curve.png'})")
