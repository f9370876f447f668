"""`slurm-advisor retrain`: the cron job of the learning loop (see slurm_advisor.retrain)."""
from __future__ import annotations

import json
import os
import sys
from dataclasses import fields, replace
from pathlib import Path

import click

from slurm_advisor.errors import InputError

_NOT_FORWARDED = {"submit", "partition", "sbatch_args"}  # what --submit drops from the batch job's command
_FILE = click.Path(exists=True, dir_okay=False, path_type=Path)


@click.command()
@click.option("--db", help="Store: SQLite path or SQLAlchemy URL (default: the config's db).")
@click.option("--config", "config_file", type=click.Path(dir_okay=False, path_type=Path),
              help="Daemon config file (db, models_dir, cluster source; default /etc/slurm-advisor/config.toml).")
@click.option("--models-dir", type=click.Path(file_okay=False, path_type=Path),
              help="Versioned models and the 'active' pointer (default: the config's models_dir, "
                   "/var/lib/slurm-advisor/models).")
@click.option("--cluster", type=_FILE, help="Cluster file (default: a snapshot from the config's cluster source).")
@click.option("--trace", type=_FILE, help="Job mix to train and judge on (default: the recent advised jobs).")
@click.option("--margin", type=click.FloatRange(0, 1, max_open=True), default=0.02, show_default=True,
              help="Promote only if avg JCT is this share better.")
@click.option("--holdout-fraction", type=click.FloatRange(0, 1, min_open=True, max_open=True), default=0.2,
              show_default=True, help="Most recent share of samples held out of training.")
@click.option("--holdout-max", type=click.IntRange(min=1), default=5000, show_default=True,
              help="At most this many samples held out (the share alone grows with the store).")
@click.option("--max-mape", type=click.FloatRange(min=0, min_open=True), default=0.5, show_default=True,
              help="Never promote a candidate whose speed model misses held-out speeds by more.")
@click.option("--prior-tolerance", type=click.FloatRange(min=0), default=0.1, show_default=True,
              help="Never promote a candidate more than this share worse than the incumbent under the "
                   "prior (the contention model, which read no report).")
@click.option("--no-canary", is_flag=True,
              help="Promote an accepted candidate at once, not as a canary first (the config's canary_share "
                   "> 0 makes it a canary; `slurm-advisor canary` decides it).")
@click.option("--jobs", "recent", type=click.IntRange(min=1), default=300, show_default=True,
              help="Recent advised jobs in the replayed mix.")
@click.option("--episodes", type=click.IntRange(min=1), help="RL episodes (default from the hyperparameters).")
@click.option("--hyper", "hyper_values", multiple=True, metavar="NAME=VALUE",
              help="Set one hyperparameter (learned/hyper.py), e.g. --hyper speed_epochs=30; repeatable.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON summary object.")
@click.option("--submit", is_flag=True, help="Run this retrain as a Slurm batch job; print its job id.")
@click.option("--partition", help="With --submit: the partition (e.g. a GPU one).")
@click.option("--sbatch-arg", "sbatch_args", multiple=True, help="With --submit: one more sbatch argument; repeatable.")
@click.pass_context
def retrain(ctx, db, config_file, models_dir, cluster, trace, margin, holdout_fraction, holdout_max, max_mape,
            prior_tolerance, no_canary, recent, episodes, hyper_values, as_json, submit, partition,
            sbatch_args) -> None:
    """Refit the speed model on the stored samples, fine-tune the active policy against it, and
    promote the candidate only if it beats the active model (or, before the first, slurm-default)
    by --margin on avg JCT of the recent job mix under an independent judge, no more than
    --prior-tolerance worse under a prior that read no report, without a worse speed model on
    the held-out recent samples. Owners whose reports contradict Slurm's clock are left out, and
    no owner weighs more than a quarter (docs/learned.md). The daemon picks a promoted model up
    by itself.

    Exit status: 0 promoted; 1 error (active model unchanged); 2 bad input; 3 kept the active
    model (not better: the reason is printed); 4 another retrain is running.
    """
    from slurm_advisor.retrain.retrain import RetrainExit

    if submit:
        from slurm_advisor.retrain.submit import sbatch_argv
        from slurm_advisor.retrain.submit import submit as run_sbatch

        job_id = run_sbatch(sbatch_argv(_forwarded(ctx), partition=partition, sbatch_args=sbatch_args))
        click.echo(json.dumps({"submitted": job_id}) if as_json else f"submitted batch job {job_id}")
        return
    if partition or sbatch_args:
        raise InputError("--partition and --sbatch-arg go with --submit")
    result = _run(db, config_file, models_dir, cluster, trace, margin, holdout_fraction, holdout_max, max_mape,
                  prior_tolerance, no_canary, recent, episodes, hyper_values)
    if result.status is RetrainExit.LOCKED:
        click.echo(f"error: {result.reason}", err=True)
    if as_json:
        click.echo(json.dumps(result.summary(), indent=2))
    elif result.status is not RetrainExit.LOCKED:
        click.echo(f"{'canary' if result.canary else 'promoted' if result.promoted else 'kept the active model'}"
                   f"{f' (candidate {result.candidate})' if result.candidate else ''}: {result.reason}")
    sys.exit(result.status)


def _run(db, config_file, models_dir, cluster, trace, margin, holdout_fraction, holdout_max, max_mape, prior_tolerance,
         no_canary, recent, episodes, hyper_values):
    from slurm_advisor.daemon.config import load_config
    from slurm_advisor.learned.hyper import Hyper
    from slurm_advisor.retrain.lock import AnotherRetrain
    from slurm_advisor.retrain.retrain import RetrainExit, RetrainResult, RetrainSettings, run_retrain
    from slurm_advisor.sim.trace import read_trace

    config = load_config(config_file, os.environ, {"db": db, "models_dir": models_dir})
    hp = parse_hyper(hyper_values, Hyper())
    if episodes is not None:
        hp = replace(hp, rl_episodes=episodes)
    settings = RetrainSettings(margin=margin, holdout_fraction=holdout_fraction, holdout_max=holdout_max,
                               max_mape=max_mape, prior_tolerance=prior_tolerance, recent_jobs=recent, hyper=hp,
                               canary=config.canary_share > 0 and not no_canary)
    nodes = _cluster(config, cluster)
    settings = replace(settings, holds=_serving_mode(config) == "enforce")
    log = lambda line: click.echo(line, err=True)  # stdout is for the result
    try:
        return run_retrain(config.db, config.models_dir, nodes, settings,
                           trace=read_trace(trace) if trace else None, log=log)
    except AnotherRetrain as exc:
        return RetrainResult(RetrainExit.LOCKED, str(exc))


def parse_hyper(values, hp):
    """``hp`` with each NAME=VALUE applied, converted to the default's type; InputError names a bad one."""
    known = {f.name: type(getattr(hp, f.name)) for f in fields(hp)}
    changes = {}
    for item in values:
        name, sep, raw = item.partition("=")
        if not sep or name not in known:
            raise InputError(f"--hyper {item!r}: expected NAME=VALUE with NAME one of {', '.join(known)}")
        try:
            changes[name] = known[name](raw)
        except ValueError:
            raise InputError(f"--hyper {item!r}: {name} must be a {known[name].__name__}") from None
    return replace(hp, **changes)


def _cluster(config, cluster: Path | None):
    """The nodes from --cluster, else from a snapshot of the config's cluster source."""
    from slurm_advisor.cluster import SourceError, make_source
    from slurm_advisor.sim.clusterfile import read_cluster

    if cluster is not None:
        return read_cluster(cluster)
    options = {"simulated": {"cluster_file": config.cluster},
               "slurm": {"slurm_conf": config.slurm_conf, "timeout_s": config.command_timeout_s}}
    try:
        return make_source(config.source, **options.get(config.source, {})).snapshot().nodes
    except SourceError as exc:
        raise InputError(f"cannot read the cluster from source {config.source!r} ({exc}); pass --cluster FILE") from None


def _serving_mode(config) -> str:
    """The daemon's mode (kept from run time, else the config's): a candidate is judged as it will
    be served, and in advise mode a hold is left to Slurm."""
    from slurm_advisor.daemon.mode_file import serving_mode
    from slurm_advisor.store import Store

    try:
        with Store.open(config.db, create=False) as store:
            return serving_mode(config, store)
    except InputError:
        return config.mode  # no store yet: run_retrain says so


def _forwarded(ctx: click.Context) -> list[str]:
    """This command's options as given, minus --submit's own, with paths made absolute."""
    out: list[str] = []
    for param in ctx.command.params:
        value = ctx.params.get(param.name)
        if param.name in _NOT_FORWARDED or value is None or value is False or value == ():
            continue
        flag = param.opts[0]
        if getattr(param, "is_flag", False):
            out.append(flag)
            continue
        for v in value if param.multiple else (value,):
            out += [flag, str(Path(v).resolve()) if isinstance(v, Path) else str(v)]
    return out
