"""speed_samples: every observed job speed, from the simulator or the live cluster.

Revision ID: 0001
Revises:
Create Date: 2024-01-01
"""
from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Written out (not imported from tables.py) so this revision stays fixed as the models evolve.
    op.create_table(
        "speed_samples",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("recorded_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False),
        sa.Column("time", sa.Float(), nullable=False),
        sa.Column("source", sa.String(16), nullable=False),
        sa.Column("job_id", sa.String(255), nullable=False),
        sa.Column("job_type", sa.String(255), nullable=False),
        sa.Column("speed", sa.Float(), nullable=False),
        sa.Column("sample", sa.JSON().with_variant(postgresql.JSONB(), "postgresql"), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_speed_samples"),
    )
    op.create_index("ix_speed_samples_source", "speed_samples", ["source"])
    op.create_index("ix_speed_samples_job_id", "speed_samples", ["job_id"])


def downgrade() -> None:
    op.drop_index("ix_speed_samples_job_id", table_name="speed_samples")
    op.drop_index("ix_speed_samples_source", table_name="speed_samples")
    op.drop_table("speed_samples")
