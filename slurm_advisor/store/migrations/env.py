"""Alembic environment for the slurm_advisor store.

Two ways in: :meth:`Store.open` passes its own open connection in ``config.attributes["connection"]``
(so the URL is parsed once and SQLite in-memory databases work), and admins run
``alembic -c db/alembic.ini upgrade head``, where the URL comes from ``SLURM_ADVISOR_DB_URL``
(or ``sqlalchemy.url`` in the ini file) and may be a bare SQLite path like the store accepts.
"""
from __future__ import annotations

import os
from logging.config import fileConfig

from alembic import context
from sqlalchemy import create_engine
from sqlalchemy.engine import Connection

from slurm_advisor.store.store import normalize_url
from slurm_advisor.store.tables import Base

config = context.config
target_metadata = Base.metadata


def _cli_url() -> str:
    url = os.environ.get("SLURM_ADVISOR_DB_URL") or config.get_main_option("sqlalchemy.url")
    if not url:
        raise SystemExit("set SLURM_ADVISOR_DB_URL (or sqlalchemy.url in alembic.ini) to the database URL")
    return normalize_url(url)


def _run(connection: Connection) -> None:
    context.configure(connection=connection, target_metadata=target_metadata,
                      render_as_batch=connection.dialect.name == "sqlite")
    with context.begin_transaction():
        context.run_migrations()


def main() -> None:
    if context.is_offline_mode():
        context.configure(url=_cli_url(), target_metadata=target_metadata, literal_binds=True)
        with context.begin_transaction():
            context.run_migrations()
        return
    connection = config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return
    if config.config_file_name is not None:  # only the CLI configures logging; the store leaves it alone
        fileConfig(config.config_file_name)
    engine = create_engine(_cli_url())
    try:
        with engine.begin() as conn:
            _run(conn)
    finally:
        engine.dispose()


main()
