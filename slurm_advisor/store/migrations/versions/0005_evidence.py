"""decisions.evidence and outcomes.allocation: what a decision is judged by later.

``decisions.evidence`` (JSON, NULL for decisions made before this revision): the layouts the
daemon weighed on the snapshot of the decision, each as per-node PS and worker counts with its
speed predicted then by the speed model of the model that decided (the advised one, Slurm's own
choice as the daemon models cons_tres, a bounded number of feasible alternatives).
``outcomes.allocation`` (JSON, NULL where not read): Slurm's own per-node task counts of the
job, read from Slurm (``scontrol show job -d``) while it ran, and where they were read.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-07
"""
from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def upgrade() -> None:
    # batch mode: SQLite alters a table by copying it; PostgreSQL gets plain ALTER TABLE ADD COLUMN
    with op.batch_alter_table("decisions") as batch:
        batch.add_column(sa.Column("evidence", _JSON, nullable=True))
    with op.batch_alter_table("outcomes") as batch:
        batch.add_column(sa.Column("allocation", _JSON, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("outcomes") as batch:
        batch.drop_column("allocation")
    with op.batch_alter_table("decisions") as batch:
        batch.drop_column("evidence")
