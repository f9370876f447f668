"""What the admin commands read from the store and how they show it: time windows, filtered
decision scans, plain aligned tables, CSV rows. No click here; the commands are in admin.py."""
from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from slurm_advisor.domain.decision import Decision
from slurm_advisor.domain.model_record import ModelRecord
from slurm_advisor.domain.outcome import Outcome
from slurm_advisor.domain.speed_report import SpeedReport
from slurm_advisor.errors import InputError

_RELATIVE = re.compile(r"^(\d+(?:\.\d+)?)\s*([smhd])$")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_FIRST_PAGE = 200  # decisions read per store call when scanning; doubles each call
MAX_SINCE_DAYS = 36_500  # a century back: further, datetime's arithmetic overflows


def parse_since(text: str | None, now: datetime | None = None) -> datetime | None:
    """``30m``, ``2h``, ``7d``, ``90s`` before now, or an ISO time (naive: UTC); None passes."""
    if text is None:
        return None
    now = now or datetime.now(UTC)
    match = _RELATIVE.match(text.strip())
    if match:
        seconds = float(match.group(1)) * _UNITS[match.group(2)]
        if seconds > MAX_SINCE_DAYS * 86400:  # 99999999d raised OverflowError
            raise InputError(f"--since {text!r}: at most {MAX_SINCE_DAYS}d ({MAX_SINCE_DAYS // 365} years) back")
        return now - timedelta(seconds=seconds)
    try:
        when = datetime.fromisoformat(text.strip())
    except ValueError:
        raise InputError(f"--since {text!r}: expected a duration (90s, 30m, 2h, 7d) or an ISO time "
                         "(2026-01-31T12:00)") from None
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def scan_decisions(store, keep: Callable[[Decision], bool] = lambda d: True, *, since: datetime | None = None,
                   limit: int | None = None, scan: int | None = None) -> list[Decision]:
    """Decisions newest first that ``keep`` accepts, back to ``since``, at most ``limit`` of them,
    looking at no more than ``scan`` decisions. The store has no filtered query: this reads pages
    of growing size (each call re-reads the newest ones; fine for an admin command)."""
    out: list[Decision] = []
    for seen, decision in enumerate(_newest_first(store)):
        if (scan is not None and seen >= scan) or (since is not None and decision.time < since):
            break
        if keep(decision):
            out.append(decision)
            if limit is not None and len(out) >= limit:
                break
    return out


def _newest_first(store) -> Iterator[Decision]:
    size, done = _FIRST_PAGE, 0
    while True:
        page = store.load_decisions(limit=size)
        yield from page[done:]
        if len(page) < size:
            return
        done, size = len(page), size * 2


def outcomes_by_decision(store) -> dict[str, Outcome]:
    """Every outcome that names its decision, by decision id."""
    return {o.decision_id: o for o in store.load_outcomes() if o.decision_id}


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """Plain left-aligned columns, two spaces apart; None shows as '-'."""
    cells = [[_cell(v) for v in row] for row in rows]
    widths = [max([len(h), *(len(r[i]) for r in cells)]) for i, h in enumerate(headers)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths)).rstrip()]
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in cells]
    return "\n".join(lines)


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.3g}" if abs(value) < 1e5 else f"{value:.0f}"
    if isinstance(value, datetime):
        return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")
    return str(value)


def epoch(value: float | None) -> str | None:
    """Seconds since the epoch as a UTC time for people."""
    return None if value is None else datetime.fromtimestamp(value, UTC).strftime("%Y-%m-%d %H:%M:%S")


def layout_text(layout: Sequence[tuple[str, str]]) -> str:
    """``ps=n1;worker=n1,n2`` (the protocol's form) for a (role, node) list; '' when empty."""
    roles: dict[str, list[str]] = {}
    for role, node in layout:
        roles.setdefault(role, []).append(node)
    return ";".join(f"{role}={','.join(nodes)}" for role, nodes in roles.items())


# -- rows: decisions, reports, outcomes, models (CSV and tables share them) -----------------------
DECISION_COLUMNS = ("id", "time", "mode", "action", "policy", "model_version", "job_type", "user_id", "nodes",
                    "layout", "would", "max_nodes", "latency_ms", "fallback", "reason")
REPORT_COLUMNS = ("job_id", "decision_id", "uid", "window_start", "window_end", "iterations", "seconds", "speed",
                  "received_at")
OUTCOME_COLUMNS = ("job_id", "decision_id", "state", "submit_time", "start_time", "end_time", "nodes")
MODEL_COLUMNS = ("version", "status", "created_at", "promoted_at", "retired_at", "samples", "live_samples",
                 "first_sample_time", "last_sample_time", "directory", "metrics")


def decision_row(d: Decision) -> dict[str, Any]:
    return {"id": d.id, "time": d.time.isoformat(), "mode": d.mode, "action": d.action, "policy": d.policy,
            "model_version": d.model_version, "job_type": d.job_type, "user_id": d.user_id,
            "nodes": ",".join(d.nodes), "layout": layout_text(d.layout), "would": layout_text(d.would),
            "max_nodes": d.max_nodes, "latency_ms": round(d.latency_ms, 3), "fallback": d.fallback,
            "reason": d.reason}


def report_row(r: SpeedReport) -> dict[str, Any]:
    return {"job_id": r.job_id, "decision_id": r.decision_id, "uid": r.uid, "window_start": r.window_start,
            "window_end": r.window_end, "iterations": r.iterations, "seconds": r.seconds, "speed": r.speed,
            "received_at": r.received_at}


def outcome_row(o: Outcome) -> dict[str, Any]:
    return {"job_id": o.job_id, "decision_id": o.decision_id, "state": o.state, "submit_time": o.submit_time,
            "start_time": o.start_time, "end_time": o.end_time, "nodes": ",".join(o.nodes)}


def model_row(m: ModelRecord) -> dict[str, Any]:
    return {"version": m.version, "status": m.status, "created_at": m.created_at, "promoted_at": m.promoted_at,
            "retired_at": m.retired_at, "samples": m.samples, "live_samples": m.live_samples,
            "first_sample_time": m.first_sample_time, "last_sample_time": m.last_sample_time,
            "directory": m.directory, "metrics": json.dumps(m.metrics, sort_keys=True)}
