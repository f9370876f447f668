"""reports, outcomes, models: the learning loop's raw speed reports, job outcomes and model registry.

Live speed observations themselves are ``speed_samples`` rows with source "live" (what training
reads); ``reports`` keeps each raw report and links the sample built from it.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-01
"""
from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def upgrade() -> None:
    op.create_table(
        "reports",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("received_at", sa.Float(), nullable=False),
        sa.Column("job_id", sa.String(64), nullable=False),
        sa.Column("decision_id", sa.String(32), nullable=True),
        sa.Column("uid", sa.BigInteger(), nullable=False),
        sa.Column("window_start", sa.Float(), nullable=False),
        sa.Column("window_end", sa.Float(), nullable=False),
        sa.Column("iterations", sa.Float(), nullable=False),
        sa.Column("seconds", sa.Float(), nullable=False),
        sa.Column("speed", sa.Float(), nullable=False),
        sa.Column("sample_id", sa.Integer(), nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_reports"),
    )
    op.create_index("ix_reports_received_at", "reports", ["received_at"])
    op.create_index("ix_reports_job_id", "reports", ["job_id"])
    op.create_table(
        "outcomes",
        sa.Column("job_id", sa.String(64), nullable=False),
        sa.Column("decision_id", sa.String(32), nullable=True),
        sa.Column("state", sa.String(32), nullable=False),
        sa.Column("submit_time", sa.Float(), nullable=True),
        sa.Column("start_time", sa.Float(), nullable=True),
        sa.Column("end_time", sa.Float(), nullable=True),
        sa.Column("nodes", sa.Text(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("job_id", name="pk_outcomes"),
    )
    op.create_index("ix_outcomes_decision_id", "outcomes", ["decision_id"])
    op.create_table(
        "models",
        sa.Column("version", sa.String(64), nullable=False),
        sa.Column("directory", sa.Text(), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("first_sample_time", sa.Float(), nullable=True),
        sa.Column("last_sample_time", sa.Float(), nullable=True),
        sa.Column("samples", sa.Integer(), nullable=False),
        sa.Column("live_samples", sa.Integer(), nullable=False),
        sa.Column("metrics", _JSON, nullable=False),
        sa.Column("promoted_at", sa.Float(), nullable=True),
        sa.Column("retired_at", sa.Float(), nullable=True),
        sa.PrimaryKeyConstraint("version", name="pk_models"),
    )
    # At most one active model, enforced by the database itself (both SQLite and PostgreSQL).
    op.create_index("ix_models_one_active", "models", ["status"], unique=True,
                    sqlite_where=sa.text("status = 'active'"), postgresql_where=sa.text("status = 'active'"))


def downgrade() -> None:
    op.drop_index("ix_models_one_active", table_name="models")
    op.drop_table("models")
    op.drop_index("ix_outcomes_decision_id", table_name="outcomes")
    op.drop_table("outcomes")
    op.drop_index("ix_reports_job_id", table_name="reports")
    op.drop_index("ix_reports_received_at", table_name="reports")
    op.drop_table("reports")
