"""model_activations: the history of active models, what `models rollback` walks back.

One row per change of the active model: which version (NULL: the daemon's default model, none
promoted), the one before, how (retrain, promote, rollback, register), whether it was forced
over the gate's verdict, and a note (the gate's reason). A database from before this revision
gets one "promote" row per model that had been promoted, in the order of their promotion.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-07
"""
from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "model_activations",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("time", sa.Float(), nullable=False),
        sa.Column("version", sa.String(64), nullable=True),
        sa.Column("previous", sa.String(64), nullable=True),
        sa.Column("action", sa.String(16), nullable=False),
        sa.Column("forced", sa.Boolean(), nullable=False),
        sa.Column("note", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_model_activations"),
    )
    # The registry's promotions so far, oldest first (ids follow the insert order), so that a
    # rollback right after the upgrade reaches the model promoted before the active one.
    op.execute("INSERT INTO model_activations (time, version, previous, action, forced, note) "
               "SELECT promoted_at, version, NULL, 'promote', false, 'recorded before the history was kept' "
               "FROM models WHERE promoted_at IS NOT NULL ORDER BY promoted_at, version")


def downgrade() -> None:
    op.drop_table("model_activations")
