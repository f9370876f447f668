"""SQLAlchemy 2.0 tables. Rows never leave the store: callers get domain objects.

The Alembic migrations in ``migrations/versions`` own the real schema; these classes mirror it so the
store can build typed queries and ``alembic revision --autogenerate`` can diff against them.
"""
from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    DateTime,
    Float,
    Index,
    Integer,
    MetaData,
    String,
    Text,
    func,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

# Fixed constraint names keep migrations reproducible across databases (SQLite needs names to alter).
NAMING = {"ix": "ix_%(table_name)s_%(column_0_name)s", "uq": "uq_%(table_name)s_%(column_0_name)s",
          "ck": "ck_%(table_name)s_%(constraint_name)s",
          "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s", "pk": "pk_%(table_name)s"}

# JSONB on PostgreSQL so later issues can index and query inside samples; plain JSON text elsewhere.
JsonDocument = JSON().with_variant(JSONB(), "postgresql")
# ... and for columns that may be empty: None is SQL NULL (not JSON null), so COALESCE sees it
OptionalJson = JSON(none_as_null=True).with_variant(JSONB(none_as_null=True), "postgresql")


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING)


class SpeedSampleRow(Base):
    """One :class:`~slurm_advisor.domain.SpeedSample`: a few query columns plus the full sample as JSON.

    ``sample`` (``codec.sample_to_dict``) is the source of truth; ``source``, ``job_id``, ``job_type``,
    ``speed`` and ``time`` are copies so that filters and training-set queries need not parse JSON.
    """

    __tablename__ = "speed_samples"

    id: Mapped[int] = mapped_column(primary_key=True)
    recorded_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    time: Mapped[float] = mapped_column(Float)
    source: Mapped[str] = mapped_column(String(16), index=True)
    job_id: Mapped[str] = mapped_column(String(255), index=True)
    job_type: Mapped[str] = mapped_column(String(255))
    speed: Mapped[float] = mapped_column(Float)
    sample: Mapped[dict[str, Any]] = mapped_column(JsonDocument)


class DecisionRow(Base):
    """One :class:`~slurm_advisor.domain.decision.Decision`; ``decision`` holds it whole as JSON."""

    __tablename__ = "decisions"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    time: Mapped[datetime] = mapped_column(DateTime(timezone=True), index=True)
    mode: Mapped[str] = mapped_column(String(16))
    action: Mapped[str] = mapped_column(String(16))
    policy: Mapped[str] = mapped_column(String(64))
    model_version: Mapped[str | None] = mapped_column(String(64))
    job_type: Mapped[str] = mapped_column(String(255))
    user_id: Mapped[int | None] = mapped_column(BigInteger)
    nodes: Mapped[str] = mapped_column(Text)
    latency_ms: Mapped[float] = mapped_column(Float)
    fallback: Mapped[bool] = mapped_column(Boolean)
    reason: Mapped[str] = mapped_column(Text)
    decision: Mapped[dict[str, Any]] = mapped_column(JsonDocument)
    # the layouts weighed and their predicted speeds, then (daemon/evidence.py); NULL: before 0005
    evidence: Mapped[dict[str, Any] | None] = mapped_column(OptionalJson)


class ReportRow(Base):
    """One speed report as a job sent it (times: seconds since the epoch). ``sample_id`` links
    the live speed sample built from it; NULL when the daemon had no placement for the job."""

    __tablename__ = "reports"

    id: Mapped[int] = mapped_column(primary_key=True)
    received_at: Mapped[float] = mapped_column(Float, index=True)
    job_id: Mapped[str] = mapped_column(String(64), index=True)
    decision_id: Mapped[str | None] = mapped_column(String(32))
    uid: Mapped[int] = mapped_column(BigInteger)
    window_start: Mapped[float] = mapped_column(Float)
    window_end: Mapped[float] = mapped_column(Float)
    iterations: Mapped[float] = mapped_column(Float)
    seconds: Mapped[float] = mapped_column(Float)
    speed: Mapped[float] = mapped_column(Float)
    sample_id: Mapped[int | None] = mapped_column(Integer)  # speed_samples.id (no FK: tables truncate apart)


class OutcomeRow(Base):
    """Where an advised Slurm job stands or how it ended; one row per job id, upserted."""

    __tablename__ = "outcomes"

    job_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    decision_id: Mapped[str | None] = mapped_column(String(32), index=True)
    state: Mapped[str] = mapped_column(String(32))
    submit_time: Mapped[float | None] = mapped_column(Float)
    start_time: Mapped[float | None] = mapped_column(Float)
    end_time: Mapped[float | None] = mapped_column(Float)
    nodes: Mapped[str] = mapped_column(Text)
    updated_at: Mapped[float] = mapped_column(Float)
    # Slurm's per-node task counts, read from Slurm: {"tasks": [...], "from": "..."}; NULL: not read
    allocation: Mapped[dict[str, Any] | None] = mapped_column(OptionalJson)


class ModelRow(Base):
    """One model in the registry; the partial unique index allows one ``active`` row at most."""

    __tablename__ = "models"
    __table_args__ = (Index("ix_models_one_active", "status", unique=True,
                            sqlite_where=text("status = 'active'"), postgresql_where=text("status = 'active'")),)

    version: Mapped[str] = mapped_column(String(64), primary_key=True)
    directory: Mapped[str] = mapped_column(Text)
    status: Mapped[str] = mapped_column(String(16))
    created_at: Mapped[float] = mapped_column(Float)
    first_sample_time: Mapped[float | None] = mapped_column(Float)
    last_sample_time: Mapped[float | None] = mapped_column(Float)
    samples: Mapped[int] = mapped_column(Integer)
    live_samples: Mapped[int] = mapped_column(Integer)
    metrics: Mapped[dict[str, Any]] = mapped_column(JsonDocument)
    promoted_at: Mapped[float | None] = mapped_column(Float)
    retired_at: Mapped[float | None] = mapped_column(Float)


class ModelActivationRow(Base):
    """One change of the active model; ``version`` NULL: the daemon's default model (none promoted)."""

    __tablename__ = "model_activations"

    id: Mapped[int] = mapped_column(primary_key=True)
    time: Mapped[float] = mapped_column(Float)
    version: Mapped[str | None] = mapped_column(String(64))
    previous: Mapped[str | None] = mapped_column(String(64))
    action: Mapped[str] = mapped_column(String(16))
    forced: Mapped[bool] = mapped_column(Boolean)
    note: Mapped[str] = mapped_column(Text)
