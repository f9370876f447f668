"""The store's part for the learning loop's bookkeeping: job outcomes and the model registry.

A mixin of :class:`~slurm_advisor.store.store.Store` (which owns the engine and the sessions);
kept apart so that each file stays small. Times are seconds since the epoch.
"""
from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

from sqlalchemy import func, insert, select, update
from sqlalchemy.dialects import postgresql, sqlite

from slurm_advisor.domain.model_record import ACTIVATIONS, MODEL_STATUSES, ModelActivation, ModelRecord
from slurm_advisor.domain.outcome import FINAL_STATES, Outcome
from slurm_advisor.errors import InputError
from slurm_advisor.store.tables import ModelActivationRow, ModelRow, OutcomeRow

_UPSERTS = {"sqlite": sqlite.insert, "postgresql": postgresql.insert}


class OutcomesAndModels:
    """Outcomes upserted by job id; models registered, promoted (one active at a time), retired;
    every change of the active model logged in the same transaction (``model_history``)."""

    # -- outcomes ---------------------------------------------------------------------------
    def record_outcomes(self, outcomes: Iterable[Outcome]) -> int:
        """Insert or update (by job id) in one transaction; a known decision id is never unset."""
        rows = [_outcome_row(o) for o in outcomes]
        if not rows:
            return 0
        with self._guard("cannot write to"), self._sessions.begin() as session:
            upsert = _UPSERTS.get(session.bind.dialect.name)
            for row in rows:
                if upsert is None:
                    session.merge(OutcomeRow(**row))
                    continue
                stmt = upsert(OutcomeRow).values(row)
                changes = {k: stmt.excluded[k] for k in row if k != "job_id"}
                changes["decision_id"] = func.coalesce(stmt.excluded.decision_id, OutcomeRow.decision_id)
                # Slurm's per-node counts are read once, while the job runs: a later state keeps them
                changes["allocation"] = func.coalesce(stmt.excluded.allocation, OutcomeRow.allocation)
                session.execute(stmt.on_conflict_do_update(index_elements=["job_id"], set_=changes))
        self.commits += 1
        return len(rows)

    def outcome(self, job_id: str) -> Outcome | None:
        with self._guard("cannot read from"), self._sessions() as session:
            row = session.get(OutcomeRow, str(job_id))
            return None if row is None else _outcome(row)

    def load_outcomes(self, *, final: bool | None = None, limit: int | None = None) -> list[Outcome]:
        """Outcomes, most recently updated first; ``final`` False: only jobs not ended yet."""
        query = select(OutcomeRow).order_by(OutcomeRow.updated_at.desc(), OutcomeRow.job_id)
        if final is not None:
            ended = OutcomeRow.state.in_(sorted(FINAL_STATES))
            query = query.where(ended if final else ~ended)
        if limit is not None:
            query = query.limit(limit)
        with self._guard("cannot read from"), self._sessions() as session:
            return [_outcome(r) for r in session.scalars(query)]

    # -- the model registry -----------------------------------------------------------------
    def register_model(self, record: ModelRecord) -> ModelRecord:
        """Add ``record`` (an "active" one is promoted in the same transaction); returns it as stored."""
        if record.status not in MODEL_STATUSES:
            raise InputError(f"model status {record.status!r}: expected one of {', '.join(MODEL_STATUSES)}")
        row = _model_row(record)
        row.update(status="candidate" if record.status == "active" else record.status,
                   created_at=record.created_at or time.time())
        with self._guard("cannot write to"), self._sessions.begin() as session:
            session.execute(insert(ModelRow), [row])
            if record.status == "active":
                _activate(session, record.version, time.time(), "register")
        self.commits += 1
        return self.model(record.version)

    def set_model_status(self, version: str, status: str) -> ModelRecord:
        """Make ``version`` candidate, active, retired or the canary; promoting retires the active one,
        a new canary the old one (one transaction)."""
        if status not in MODEL_STATUSES:
            raise InputError(f"model status {status!r}: expected one of {', '.join(MODEL_STATUSES)}")
        now = time.time()
        with self._guard("cannot write to"), self._sessions.begin() as session:
            if session.get(ModelRow, version) is None:
                known = ", ".join(session.scalars(select(ModelRow.version))) or "none"
                raise InputError(f"no model {version!r} in the registry; registered: {known}")
            if status == "active":
                _activate(session, version, now, "promote")
            elif status == "canary":  # one canary at a time: a newer one replaces it; promoted_at: its start
                session.execute(update(ModelRow).where(ModelRow.status == "canary", ModelRow.version != version)
                                .values(status="retired", retired_at=now))
                session.execute(update(ModelRow).where(ModelRow.version == version).values(
                    status=status, promoted_at=now, retired_at=None))
            else:
                session.execute(update(ModelRow).where(ModelRow.version == version).values(
                    status=status, retired_at=now if status == "retired" else None))
        self.commits += 1
        return self.model(version)

    def activate(self, version: str | None, action: str, *, forced: bool = False, note: str = "") -> None:
        """Make ``version`` the active model (None: none, the daemon's default model serves),
        retiring the active one, and log it as ``action``: one transaction."""
        if action not in ACTIVATIONS:
            raise InputError(f"activation {action!r}: expected one of {', '.join(ACTIVATIONS)}")
        with self._guard("cannot write to"), self._sessions.begin() as session:
            if version is not None and session.get(ModelRow, version) is None:
                raise InputError(f"no model {version!r} in the registry")
            _activate(session, version, time.time(), action, forced, note)
        self.commits += 1

    def model_history(self) -> list[ModelActivation]:
        """Every change of the active model, oldest first."""
        query = select(ModelActivationRow).order_by(ModelActivationRow.id)
        with self._guard("cannot read from"), self._sessions() as session:
            return [ModelActivation(r.time, r.version, r.previous, r.action, r.forced, r.note)
                    for r in session.scalars(query)]

    def count_activations(self) -> dict[tuple[str, bool], int]:
        """How many activations of each (action, forced): the metrics' counter."""
        query = select(ModelActivationRow.action, ModelActivationRow.forced, func.count()) \
            .group_by(ModelActivationRow.action, ModelActivationRow.forced)
        with self._guard("cannot read from"), self._sessions() as session:
            return {(action, bool(forced)): n for action, forced, n in session.execute(query)}

    def model(self, version: str) -> ModelRecord | None:
        with self._guard("cannot read from"), self._sessions() as session:
            row = session.get(ModelRow, version)
            return None if row is None else _model(row)

    def active_model(self) -> ModelRecord | None:
        with self._guard("cannot read from"), self._sessions() as session:
            row = session.scalar(select(ModelRow).where(ModelRow.status == "active"))
            return None if row is None else _model(row)

    def list_models(self) -> list[ModelRecord]:
        """Every registered model, newest first."""
        query = select(ModelRow).order_by(ModelRow.created_at.desc(), ModelRow.version)
        with self._guard("cannot read from"), self._sessions() as session:
            return [_model(r) for r in session.scalars(query)]


def _activate(session, version: str | None, now: float, action: str, forced: bool = False, note: str = "") -> None:
    """Retire the active model (if another), then activate ``version`` (None: none) and log the
    change; the caller's transaction."""
    previous = session.scalar(select(ModelRow.version).where(ModelRow.status == "active"))
    session.execute(update(ModelRow).where(ModelRow.status == "active", ModelRow.version != version)
                    .values(status="retired", retired_at=now))
    if version is not None:
        session.execute(update(ModelRow).where(ModelRow.version == version)
                        .values(status="active", promoted_at=now, retired_at=None))
    session.execute(insert(ModelActivationRow).values(time=now, version=version, previous=previous, action=action,
                                                      forced=forced, note=note))


def _outcome_row(o: Outcome) -> dict[str, Any]:
    return {"job_id": str(o.job_id), "decision_id": o.decision_id, "state": o.state,
            "submit_time": o.submit_time, "start_time": o.start_time, "end_time": o.end_time,
            "nodes": ",".join(o.nodes), "updated_at": time.time(),
            "allocation": {"tasks": list(o.tasks), "from": o.tasks_from} if o.tasks else None}


def _outcome(row: OutcomeRow) -> Outcome:
    allocation = row.allocation or {}
    return Outcome(row.job_id, row.state, row.decision_id, row.submit_time, row.start_time, row.end_time,
                   tuple(filter(None, row.nodes.split(","))), tuple(int(t) for t in allocation.get("tasks", ())),
                   str(allocation.get("from", "")))


def _model_row(r: ModelRecord) -> dict[str, Any]:
    return {"version": r.version, "directory": str(r.directory), "status": r.status, "created_at": r.created_at,
            "first_sample_time": r.first_sample_time, "last_sample_time": r.last_sample_time,
            "samples": r.samples, "live_samples": r.live_samples, "metrics": dict(r.metrics),
            "promoted_at": r.promoted_at, "retired_at": r.retired_at}


def _model(row: ModelRow) -> ModelRecord:
    return ModelRecord(row.version, row.directory, row.status, row.created_at, row.first_sample_time,
                       row.last_sample_time, row.samples, row.live_samples, dict(row.metrics or {}),
                       row.promoted_at, row.retired_at)
