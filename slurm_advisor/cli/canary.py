"""`slurm-advisor canary`: the canary's verdict on measured outcomes, or the active model's watch
(slurm_advisor/retrain/canary.py); run every few minutes from cron or the systemd timer."""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import click


@click.command()
@click.option("--db", help="Store: SQLite path or SQLAlchemy URL (default: the config's db).")
@click.option("--config", "config_file", type=click.Path(dir_okay=False, path_type=Path),
              help="Daemon config file (db, models_dir, canary_jobs; default /etc/slurm-advisor/config.toml).")
@click.option("--models-dir", type=click.Path(file_okay=False, path_type=Path),
              help="Versioned models and their pointers (default: the config's models_dir).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON summary object.")
def canary(db, config_file, models_dir, as_json) -> None:
    """Decide the running canary (promote it or roll it back) once each arm has canary_jobs
    completed, reported jobs of comparable shapes; with none running, watch the active model's
    placements against the jobs Slurm placed anyway and roll it back on a measured regression.

    Exit status: 0 (whatever the verdict: it is printed), 2 bad input, 4 a retrain holds the lock.
    """
    from slurm_advisor.daemon.config import load_config
    from slurm_advisor.retrain.canary import CanaryRules
    from slurm_advisor.retrain.canary_run import run_canary
    from slurm_advisor.retrain.lock import AnotherRetrain
    from slurm_advisor.store import Store

    config = load_config(config_file, os.environ, {"db": db, "models_dir": models_dir})
    rules = CanaryRules(jobs=config.canary_jobs)
    log = lambda line: click.echo(line, err=True)  # stdout is for the result
    try:
        with Store.open(config.db, create=False) as store:
            summary = run_canary(store, config.models_dir, rules, log)
    except AnotherRetrain as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(4)
    if as_json:
        click.echo(json.dumps(summary, indent=2))
    else:
        judged = summary.get("judged")
        against = f" ({judged} against {summary['against']})" if judged else ""
        click.echo(f"{summary['state']}{against}: {summary['reason']}")
