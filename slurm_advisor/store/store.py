"""The store API: speed samples in, domain objects out; the schema kept current by Alembic.

Live speed observations are ``speed_samples`` rows with source "live", so training reads them
like any other sample (``load_samples(source="live")``); the raw report each came from is a
``reports`` row linked to it (a report for a job the daemon has no placement for is kept raw,
with no sample). Job outcomes and the model registry: :mod:`slurm_advisor.store.registry`.

Migrations ship inside the package (``slurm_advisor/store/migrations``) so an installed wheel can
upgrade its own database; ``db/alembic.ini`` points the Alembic CLI at the same directory.
"""
from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType
from typing import Self

from sqlalchemy import Engine, bindparam, create_engine, event, func, insert, select, update
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError, SQLAlchemyError
from sqlalchemy.orm import sessionmaker

from slurm_advisor.domain.codec import decision_from_dict, decision_to_dict, sample_from_dict, sample_to_dict
from slurm_advisor.domain.decision import Decision
from slurm_advisor.domain.observation import SpeedSample
from slurm_advisor.domain.speed_report import SpeedReport
from slurm_advisor.errors import InputError
from slurm_advisor.store.registry import OutcomesAndModels
from slurm_advisor.store.tables import DecisionRow, ReportRow, SpeedSampleRow

MIGRATIONS = Path(__file__).resolve().with_name("migrations")
SOURCES = ("sim", "live")
_SQLITE_BUSY_TIMEOUT_S = 15  # a writer waits this long for another process's lock
_CONNECT_TIMEOUT_S = 10  # an unreachable server should fail fast, not hang a daemon or a CLI call
BATCH_SIZE = 5000  # samples per transaction when recording a run (one commit per event cost 7x the run)


EMPTY_URL = "the database is empty: give a SQLite path or a SQLAlchemy URL"


def normalize_url(url: str) -> str:
    """A SQLAlchemy URL for ``url``; a bare path (no ``scheme://``) means a SQLite file. An empty
    one is refused, the one rule of every command (it resolved to the working directory)."""
    if not url.strip():
        raise InputError(EMPTY_URL)
    if "://" in url:
        return url
    return f"sqlite:///{Path(url).expanduser().resolve()}"


def mask_url(url: str) -> str:
    """``url`` with any password replaced, safe for messages and logs."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except ArgumentError:
        return re.sub(r"(://[^:/@]*:)[^@]*@", r"\1***@", url)


class Store(OutcomesAndModels):
    """Speed samples in a SQLite or PostgreSQL database; the only owner of SQLAlchemy sessions.

    Build one with :meth:`open`; the constructor does no I/O so tests may pass in any engine whose
    schema is already current.
    """

    def __init__(self, engine: Engine, url: str) -> None:
        self._engine = engine
        self._url = url
        self._sessions = sessionmaker(engine, expire_on_commit=False)
        self.commits = 0  # write transactions committed through this store

    @classmethod
    def open(cls, url: str, *, create: bool = True) -> Store:
        """Connect to ``url`` (or a bare SQLite path) and upgrade its schema to the latest revision.

        ``create=False`` is for readers: a SQLite file that does not exist is an error instead of
        a new, empty database (a mistyped ``--from-db`` path must not look like "no samples").
        Every failure a user can fix (bad URL, missing driver, unreachable server, a database from a
        newer release) becomes :class:`InputError` naming the URL with its password masked.
        """
        full = normalize_url(url)
        shown = mask_url(full)
        try:
            if not create and not _exists(full):
                raise InputError(f"database {shown} does not exist; record samples into it first "
                                 "(`slurm-advisor simulate --record-to`)")
            engine = _engine_for(full)
        except (ArgumentError, ImportError, ValueError) as exc:
            raise InputError(f"bad database URL {shown}: {exc}") from None
        except OSError as exc:
            raise InputError(f"cannot open database {shown}: {exc}") from None
        store = cls(engine, shown)
        try:
            with store._guard("cannot open"):
                store._upgrade()
        except BaseException:
            engine.dispose()
            raise
        return store

    @classmethod
    def attach(cls, url: str) -> Store:
        """Connect to a database another process has just opened (and so upgraded): no migration
        check, no Alembic import (half a second) — the daemon's decision writer process."""
        full = normalize_url(url)
        try:
            return cls(_engine_for(full), mask_url(full))
        except (ArgumentError, ImportError, ValueError, OSError) as exc:
            raise InputError(f"cannot open database {mask_url(full)}: {exc}") from None

    def url_for_another_process(self) -> str | None:
        """The URL, password included, by which another process reaches this database; None
        for SQLite in memory, which only this connection pool sees."""
        url = self._engine.url
        return None if _in_memory(url) else url.render_as_string(hide_password=False)

    def sqlite_file(self) -> Path | None:
        """The database's file when it is SQLite on disk (what lives beside it: the daemon's spool)."""
        url = self._engine.url
        if url.get_backend_name() != "sqlite" or _in_memory(url) or (url.database or "").startswith("file:"):
            return None
        return Path(url.database).expanduser().resolve()

    def record_samples(self, samples: Iterable[SpeedSample]) -> int:
        """Insert ``samples`` in one transaction (all or none); returns how many were written."""
        rows = [_row(s) for s in samples]
        if rows:
            with self._guard("cannot write to"), self._sessions.begin() as session:
                session.execute(insert(SpeedSampleRow.__table__), rows)  # Core: no ORM bookkeeping per row
            self.commits += 1
        return len(rows)

    def batched(self, size: int = BATCH_SIZE) -> SampleBatch:
        """A recorder for a whole run: ``with store.batched() as record: ... record(samples)``.

        Samples are buffered and written ``size`` at a time, each batch in one transaction, the
        rest when the block ends. If the block raises, the unwritten rest is dropped (batches
        already written stay)."""
        return SampleBatch(self, size)

    def load_samples(self, *, source: str | None = None, limit: int | None = None,
                     skipped: dict[str, int] | None = None, newest: bool = False) -> list[SpeedSample]:
        """Samples in insertion order (``newest``: the reverse), optionally only one ``source`` and
        at most ``limit`` of them. A row that does not decode is an InputError naming it, or, given
        ``skipped``, left out and counted there under "unreadable" (what training does: one damaged
        row must not stop it)."""
        order = SpeedSampleRow.id.desc() if newest else SpeedSampleRow.id
        query = select(SpeedSampleRow.id, SpeedSampleRow.sample).order_by(order)
        if source is not None:
            query = query.where(SpeedSampleRow.source == source)
        if limit is not None:
            query = query.limit(limit)
        with self._guard("cannot read from"), self._sessions() as session:
            rows = session.execute(query).all()
        samples = []
        for row_id, data in rows:
            try:
                samples.append(sample_from_dict(data))
            except (LookupError, TypeError, ValueError, AttributeError) as exc:
                if skipped is None:
                    raise InputError(f"{self._url}: speed sample {row_id} does not decode "
                                     f"({type(exc).__name__}: {exc})") from None
                skipped["unreadable"] = skipped.get("unreadable", 0) + 1
        return samples

    def count_samples(self, source: str | None = None) -> int:
        query = select(func.count()).select_from(SpeedSampleRow)
        if source is not None:
            query = query.where(SpeedSampleRow.source == source)
        with self._guard("cannot read from"), self._sessions() as session:
            return int(session.scalar(query) or 0)

    def record_decisions(self, decisions: Iterable[Decision], *, skip_stored: bool = False) -> int:
        """Insert ``decisions`` in one transaction; returns how many were written. ``skip_stored``:
        those whose id is stored already are left out (a replay of the daemon's spool), not an
        error."""
        rows = [_decision_row(d) for d in decisions]
        if not rows:
            return 0
        with self._guard("cannot write to"), self._sessions.begin() as session:
            if skip_stored:
                stored = set(session.scalars(select(DecisionRow.id).where(DecisionRow.id.in_([r["id"] for r in rows]))))
                rows = [r for r in rows if r["id"] not in stored]
            if rows:
                session.execute(insert(DecisionRow.__table__), rows)
        self.commits += 1
        return len(rows)

    def record_evidence(self, items: Iterable[tuple[str, dict]]) -> int:
        """Each (decision id, evidence) into that decision's row, in one transaction: the evidence
        the daemon computes after the reply (daemon/evidence_worker.py). Returns how many rows
        took one where the driver says (a decision not stored takes none), else how many were given."""
        rows = [{"key": decision_id, "evidence": evidence} for decision_id, evidence in items]
        if not rows:
            return 0
        table = DecisionRow.__table__
        statement = update(table).where(table.c.id == bindparam("key")).values(evidence=bindparam("evidence"))
        with self._guard("cannot write to"), self._sessions.begin() as session:
            count = session.connection().execute(statement, rows).rowcount
        self.commits += 1
        return count if count is not None and count >= 0 else len(rows)

    def load_decisions(self, *, limit: int | None = None) -> list[Decision]:
        """Decisions newest first, at most ``limit`` of them."""
        query = select(DecisionRow.decision, DecisionRow.evidence).order_by(DecisionRow.time.desc(),
                                                                            DecisionRow.id.desc())
        if limit is not None:
            query = query.limit(limit)
        with self._guard("cannot read from"), self._sessions() as session:
            return [_decision(d, evidence) for d, evidence in session.execute(query)]

    def decision(self, decision_id: str) -> Decision | None:
        query = select(DecisionRow.decision, DecisionRow.evidence).where(DecisionRow.id == decision_id)
        with self._guard("cannot read from"), self._sessions() as session:
            found = session.execute(query).first()
        return None if found is None else _decision(*found)

    def count_decisions(self) -> int:
        with self._guard("cannot read from"), self._sessions() as session:
            return int(session.scalar(select(func.count()).select_from(DecisionRow)) or 0)

    def record_reports(self, reports: Iterable[tuple[SpeedReport, SpeedSample | None]], *,
                       skip_stored: bool = False) -> int:
        """Insert each raw report and, where given, the live sample built from it, all in one
        transaction; returns how many reports were written. ``skip_stored``: a report already
        stored — the same job, uid, iterations, seconds and time received (the daemon never
        gives two reports one time) — is left out, its sample too (a replay of the daemon's spool)."""
        items = [(r, None if s is None else _row(s)) for r, s in reports]
        if not items:
            return 0
        sample_id = insert(SpeedSampleRow).returning(SpeedSampleRow.id)
        with self._guard("cannot write to"), self._sessions.begin() as session:
            if skip_stored:
                stored = _stored_reports(session, [r for r, _ in items])
                items = [(r, s) for r, s in items if _report_key(r) not in stored]
                if not items:
                    return 0
            rows = [_report_row(r, None if s is None else session.execute(sample_id, s).scalar_one())
                    for r, s in items]
            session.execute(insert(ReportRow.__table__), rows)
        self.commits += 1
        return len(items)

    def load_reports(self, *, job_id: str | None = None, limit: int | None = None) -> list[SpeedReport]:
        """Raw reports in arrival order, optionally of one job and at most ``limit`` of them."""
        query = select(ReportRow).order_by(ReportRow.id)
        if job_id is not None:
            query = query.where(ReportRow.job_id == str(job_id))
        if limit is not None:
            query = query.limit(limit)
        with self._guard("cannot read from"), self._sessions() as session:
            return [SpeedReport(r.job_id, r.uid, r.iterations, r.seconds, r.window_end, r.decision_id,
                                r.received_at) for r in session.scalars(query)]

    def count_reports(self, *, sampled: bool | None = None) -> int:
        """How many reports; ``sampled`` True/False: only those that did / did not give a sample."""
        query = select(func.count()).select_from(ReportRow)
        if sampled is not None:
            query = query.where(ReportRow.sample_id.is_not(None) if sampled else ReportRow.sample_id.is_(None))
        with self._guard("cannot read from"), self._sessions() as session:
            return int(session.scalar(query) or 0)

    def revision(self) -> str | None:
        """The schema's Alembic revision (e.g. "0003")."""
        from alembic.runtime.migration import MigrationContext  # Alembic costs 0.5 s to import: only here

        with self._guard("cannot read from"), self._engine.connect() as connection:
            return MigrationContext.configure(connection).get_current_revision()

    def close(self) -> None:
        """Release every pooled connection; the store must not be used afterwards."""
        self._engine.dispose()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Store({self._url!r})"

    def _upgrade(self) -> None:
        """Run the packaged migrations up to head on our own connection (no ini file, no logging setup).

        Alembic records the revision in ``alembic_version``, so reopening a current database runs nothing.
        """
        from alembic import command
        from alembic.config import Config
        from alembic.util import CommandError

        config = Config()
        config.set_main_option("script_location", str(MIGRATIONS).replace("%", "%%"))
        try:
            with self._engine.begin() as connection:
                config.attributes["connection"] = connection
                command.upgrade(config, "head")
        except CommandError as exc:  # e.g. a database from a newer release
            raise InputError(f"cannot open database {self._url}: {exc}") from None

    @contextmanager
    def _guard(self, action: str) -> Iterator[None]:
        """Turn database failures into one-line :class:`InputError`s that never show the password."""
        try:
            yield
        except SQLAlchemyError as exc:
            detail = (str(getattr(exc, "orig", None) or exc).strip().splitlines() or [type(exc).__name__])[0]
            raise InputError(f"{action} database {self._url}: {detail}") from None


class SampleBatch:
    """Buffers speed samples and writes them through :meth:`Store.record_samples` in batches."""

    def __init__(self, store: Store, size: int) -> None:
        if size < 1:
            raise ValueError("batch size must be at least 1")
        self._store, self._size = store, size
        self._buffer: list[SpeedSample] = []
        self.written = 0

    def __call__(self, samples: Iterable[SpeedSample]) -> None:
        self._buffer.extend(samples)
        if len(self._buffer) >= self._size:
            self.flush()

    def flush(self) -> None:
        while self._buffer:
            batch, self._buffer = self._buffer[:self._size], self._buffer[self._size:]
            self.written += self._store.record_samples(batch)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if exc_type is None:
            self.flush()
        else:
            self._buffer.clear()


def _report_key(r: SpeedReport) -> tuple:
    return (str(r.job_id), r.received_at if r.received_at is not None else r.window_end, r.uid,
            float(r.iterations), float(r.seconds))


def _stored_reports(session, reports: list[SpeedReport]) -> set[tuple]:
    """The keys (:func:`_report_key`) of those of ``reports`` already stored."""
    times = sorted({_report_key(r)[1] for r in reports})
    query = select(ReportRow.job_id, ReportRow.received_at, ReportRow.uid, ReportRow.iterations,
                   ReportRow.seconds).where(ReportRow.received_at.in_(times))
    return {tuple(row) for row in session.execute(query)}


def _exists(url: str) -> bool:
    """False only for a SQLite file that is not there (servers, memory and URI forms: True)."""
    parsed = make_url(url)
    database = parsed.database or ""
    if parsed.get_backend_name() != "sqlite" or database in ("", ":memory:") or database.startswith("file:"):
        return True
    return Path(database).expanduser().exists()


def _engine_for(url: str) -> Engine:
    parsed = make_url(url)
    connect_args: dict[str, object] = {}
    if parsed.get_backend_name() == "sqlite":
        _make_parent_dir(parsed)
        connect_args["timeout"] = _SQLITE_BUSY_TIMEOUT_S
    elif parsed.get_backend_name() == "postgresql" and "connect_timeout" not in parsed.query:
        connect_args["connect_timeout"] = _CONNECT_TIMEOUT_S
    engine = create_engine(parsed, connect_args=connect_args)
    if parsed.get_backend_name() == "sqlite" and not _in_memory(parsed):
        event.listen(engine, "connect", _sqlite_wal)
    return engine


def _in_memory(url: URL) -> bool:
    """SQLite in memory: a database only its own connection pool sees."""
    return url.get_backend_name() == "sqlite" and (url.database or ":memory:") == ":memory:"


def _sqlite_wal(dbapi_connection, _record) -> None:
    # WAL: the daemon writes while `retrain` and the admin CLI read, without "database is locked".
    # synchronous=NORMAL, SQLite's advice for WAL: no fsync per commit (only at checkpoints), still
    # consistent after a crash or kill -9 (tests/daemon/test_daemon_kill.py); a power loss may undo
    # the last commits. The fsync per commit was most of the daemon's cost per advised submission.
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.close()


def _make_parent_dir(url: URL) -> None:
    database = url.database or ""
    if database and database != ":memory:" and not database.startswith("file:"):
        Path(database).expanduser().parent.mkdir(parents=True, exist_ok=True)


def _row(sample: SpeedSample) -> dict[str, object]:
    if sample.source not in SOURCES:
        raise ValueError(f"sample source {sample.source!r} is not one of {', '.join(SOURCES)}")
    job = sample.subject.job
    return {"time": sample.time, "source": sample.source, "job_id": job.id, "job_type": job.type,
            "speed": sample.speed, "sample": sample_to_dict(sample)}


def _decision_row(d: Decision) -> dict[str, object]:
    whole = decision_to_dict(d)
    whole.pop("evidence", None)  # its own column
    return {"id": d.id, "time": d.time, "mode": d.mode, "action": d.action, "policy": d.policy,
            "model_version": d.model_version, "job_type": d.job_type, "user_id": d.user_id,
            "nodes": ",".join(d.nodes), "latency_ms": d.latency_ms, "fallback": d.fallback,
            "reason": d.reason, "decision": whole, "evidence": d.evidence}


def _decision(whole: dict, evidence: dict | None) -> Decision:
    return decision_from_dict({**whole, "evidence": evidence})


def _report_row(r: SpeedReport, sample_id: int | None) -> dict[str, object]:
    return {"received_at": r.received_at if r.received_at is not None else r.window_end, "job_id": str(r.job_id),
            "decision_id": r.decision_id, "uid": r.uid, "window_start": r.window_start, "window_end": r.window_end,
            "iterations": r.iterations, "seconds": r.seconds, "speed": r.speed, "sample_id": sample_id}
