"""`slurm-advisor db upgrade`: bring a store's schema to this release's latest migration."""
from __future__ import annotations

import os

import click


@click.group()
def db() -> None:
    """The advisor's database (decisions, speed samples, reports, outcomes, models)."""


@db.command()
@click.option("--db", "url", help="SQLite path or SQLAlchemy URL (default: the daemon's, from its config).")
def upgrade(url: str | None) -> None:
    """Create the database if need be and run every pending migration (Alembic)."""
    from slurm_advisor.daemon.config import load_config
    from slurm_advisor.store import Store
    from slurm_advisor.store.store import mask_url, normalize_url

    target = url if url is not None else load_config(None, os.environ).db  # "" is refused, not the default
    with Store.open(target) as store:
        revision = store.revision()
    click.echo(f"{mask_url(normalize_url(target))}: at revision {revision}")
