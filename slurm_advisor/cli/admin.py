"""The admin commands: `status`, `decisions`, `observations`, `export`, `explain`, `shadow`
(`models` and `mode`: admin_models.py). Read commands take ``--db``/``--config`` as `serve` does and ``--json`` (one JSON
document on stdout); tables for people otherwise. What they compute: admin_views, admin_explain.
"""
from __future__ import annotations

import csv
import json
import os
import sys
from collections.abc import Callable
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click

from slurm_advisor.cli import admin_views as views
from slurm_advisor.cli.output import replaced_whole
from slurm_advisor.daemon.config import DaemonConfig, load_config
from slurm_advisor.daemon.protocol import MODES
from slurm_advisor.errors import InputError

#: `status` exits with this when the daemon does not answer (the store part is still shown).
DAEMON_DOWN = 3
_ACTIONS = ("place", "cap", "observe", "none")


def _common(command: Callable) -> Callable:
    command = click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")(command)
    command = click.option("--config", "config_file", type=click.Path(path_type=Path),
                           help="TOML config file (default /etc/slurm-advisor/config.toml when it exists).")(command)
    return click.option("--db", help="SQLite path or SQLAlchemy URL (default: the daemon's, from its config).")(command)


def _config(config_file: Path | None, **flags: Any) -> DaemonConfig:
    return load_config(config_file, os.environ, flags)


def _store(config: DaemonConfig):
    from slurm_advisor.store import Store
    return Store.open(config.db, create=False)


def _emit(as_json: bool, data: Any, human: Callable[[], str]) -> None:
    click.echo(json.dumps(data, indent=2, default=str) if as_json else human())


# -- status --------------------------------------------------------------------------------------
@click.command()
@_common
@click.option("--socket", "socket_path", type=click.Path(path_type=Path), help="The daemon's Unix socket.")
@click.option("--recent", default=10, show_default=True, help="Fallbacks to list.")
@click.option("--scan", default=1000, show_default=True, help="Newest decisions read for fallbacks and the queue.")
def status(db, config_file, as_json, socket_path, recent, scan) -> None:
    """The daemon (mode, policy, model, snapshot age, claims, counters) and, from the store, the
    recent fallbacks and the advised jobs not started yet. Exit 3 when the daemon does not answer
    (the store part is still shown), 2 when the store cannot be read."""
    from slurm_advisor.daemon.client import DaemonUnavailable, call
    from slurm_advisor.daemon.metrics import is_fallback

    config = _config(config_file, db=db, socket=socket_path)
    data: dict[str, Any] = {"socket": str(config.socket)}
    try:
        data["daemon"] = call(config.socket, "status", timeout_s=2.0)
    except DaemonUnavailable as exc:
        data["daemon"], data["daemon_error"] = None, str(exc)
    try:
        with _store(config) as store:
            decisions = views.scan_decisions(store, scan=scan)
            outcomes = views.outcomes_by_decision(store)
            data["active_model"] = _model_dict(store.active_model())
            data["discounted_reporters"] = _discounted_reporters(store)
    except InputError as exc:
        data["store_error"] = str(exc)
        decisions, outcomes = [], {}
    data["fallbacks"] = [views.decision_row(d) for d in decisions if is_fallback(d)][:recent]
    data["queue"], never = _advised_not_started(decisions, outcomes, _unseen_after_s(config))
    data["never_seen"] = {"count": len(never), "after_s": _unseen_after_s(config), "recent": never[:recent]}
    _emit(as_json, data, lambda: _status_text(data))
    if "store_error" in data:
        sys.exit(2)
    if data["daemon"] is None:
        sys.exit(DAEMON_DOWN)


def _discounted_reporters(store) -> dict[str, str]:
    """uid -> why, for the owners whose reports the newest retrain left out (retrain/owners.py)."""
    newest = max(store.list_models(), key=lambda m: m.created_at, default=None)
    return dict((newest.metrics.get("owners") or {}).get("discounted", {})) if newest else {}


def _unseen_after_s(config: DaemonConfig) -> float:
    """How long after its decision a job without any outcome counts as never seen in squeue. The
    daemon records a job's first outcome at the first refresh that lists it (every refresh_s) and
    drops the claim of one that three refreshes missed (daemon/claims.py); 30 refreshes, and a
    minute at least, leave the writer ample time."""
    return max(60.0, 30 * config.refresh_s)


def _advised_not_started(decisions, outcomes, unseen_after_s: float) -> tuple[list[dict], list[dict]]:
    """(the pinned or capped jobs not started, as rows with their job's state; the decisions whose
    job Slurm never showed: rejected after the pin, or cancelled at once). The second are not
    waiting for anything, so they are listed apart rather than as "not seen yet" for good."""
    now = datetime.now(UTC)
    waiting, never = [], []
    for d in decisions:
        outcome = outcomes.get(d.id)
        if d.action not in ("place", "cap") or not _not_started(outcome):
            continue
        if outcome is None and (now - d.time).total_seconds() > unseen_after_s:
            never.append(views.decision_row(d))
        else:
            waiting.append({**views.decision_row(d), "job_id": outcome.job_id if outcome else None,
                            "state": outcome.state if outcome else "not seen in squeue yet"})
    return waiting, never


def _not_started(outcome) -> bool:
    return outcome is None or (outcome.start_time is None and not outcome.final)


def _model_dict(record) -> dict[str, Any] | None:
    return None if record is None else asdict(record)


def _slurm_line(d: dict[str, Any]) -> str:
    """"slurm: 24.11.5, topology block (pins within blocks, caps across them): b1 n[1-2], b2 n[3-4]"."""
    topo = d.get("topology") or {}
    parts = topo.get("blocks") or topo.get("switches") or []
    named = ", ".join(f"{p.get('name')} {p.get('nodes')}" for p in parts[:_NAMED]) if isinstance(parts, list) else ""
    more = f" and {len(parts) - _NAMED} more" if isinstance(parts, list) and len(parts) > _NAMED else ""
    rule = f" ({topo['placement']})" if topo.get("placement") else ""
    return (f"slurm: {d.get('slurm_release') or 'release not read (22.05 modelled)'}, "
            f"topology {topo.get('plugin', 'not read')}{rule}{': ' + named + more if named else ''}")


#: How many switches or blocks the plain status names (``--json`` lists them all).
_NAMED = 8


def _status_text(data: dict[str, Any]) -> str:
    d = data["daemon"]
    if d is None:
        lines = [f"daemon: not answering on {data['socket']} ({data['daemon_error']})"]
    else:
        canary = f" (canary {d['canary']} on {100 * d['canary_share']:.0f} %)" if d.get("canary") else ""
        lines = [(f"daemon: {d.get('mode')} mode ({mode_source_text(d)}), policy {d.get('policy')}, "
                  f"model {d.get('model') or '-'}{canary}, "
                  f"source {d.get('source')}, {d.get('nodes')} nodes, snapshot {d.get('snapshot_age_s')} s old, "
                  f"{d.get('claims')} claims, up {d.get('uptime_s')} s"),
                 "counters: " + ", ".join(f"{k} {d[k]}" for k in (
                     "requests", "decisions", "placed", "capped", "errors", "released", "released_taken",
                     "claims_unseen_dropped", "refresh_failures", "reports", "reports_refused", "decisions_dropped",
                     "decision_writer_restarts", "reports_dropped", "decisions_spool_failed",
                     "reports_spool_failed", "policy_errors", "model_reloads", "model_reload_failures", "connections_refused",
                     "connections_dropped") if k in d)]
        if d.get("mode_problem"):
            lines.append(f"mode file: {d['mode_problem']}")
        if d.get("slurm_release") or d.get("topology"):
            lines.insert(1, _slurm_line(d))
    if "store_error" in data:
        return "\n".join([*lines, f"store: {data['store_error']}"])
    model = data.get("active_model")
    lines.append(f"registry: active model {model['version']} ({model['directory']})" if model
                 else "registry: no active model")
    for uid, why in data.get("discounted_reporters", {}).items():
        lines.append(f"reports: uid {uid} left out by the last retrain: {why}")
    lines.append(f"recent fallbacks ({len(data['fallbacks'])}):")
    lines.append(views.table(("decision", "time", "mode", "action", "policy", "reason"),
                             [(r["id"], r["time"][:19], r["mode"], r["action"], r["policy"], r["reason"])
                              for r in data["fallbacks"]]))
    lines.append(f"advised, not started ({len(data['queue'])}):")
    lines.append(views.table(("decision", "time", "action", "nodes", "job", "state"),
                             [(r["id"], r["time"][:19], r["action"], r["nodes"], r["job_id"], r["state"])
                              for r in data["queue"]]))
    never = data["never_seen"]
    if never["count"]:
        lines.append(f"advised, never seen in squeue {never['after_s']:g} s on (rejected by Slurm or cancelled "
                     f"at once; {never['count']}): " + ", ".join(r["id"] for r in never["recent"])
                     + (", ..." if never["count"] > len(never["recent"]) else ""))
    return "\n".join(lines)


def mode_source_text(reply: dict[str, Any]) -> str:
    """Where the daemon's mode comes from, for people (`mode` and `status`)."""
    if reply.get("mode_source") != "override":
        return "the config's"
    kept = reply.get("mode_file")
    where = f"kept in {kept} across restarts" if kept else "lost at a restart: no state file"
    since = f" {reply['mode_set_at']}" if reply.get("mode_set_at") else ""
    config = f"the config says {reply['config_mode']}, " if reply.get("config_mode") else ""
    return f"set at run time{since}, {where}; {config}`mode --reset` returns to the config's"


# -- decisions, observations, export ---------------------------------------------------------------
@click.command()
@_common
@click.option("--since", help="Only decisions after this: 30m, 2h, 7d or an ISO time (UTC).")
@click.option("--limit", default=50, show_default=True, help="At most this many, newest first.")
@click.option("--mode", type=click.Choice(MODES), help="Only decisions made in this mode.")
@click.option("--action", type=click.Choice(_ACTIONS), help="Only decisions with this action.")
def decisions(db, config_file, as_json, since, limit, mode, action) -> None:
    """Recorded decisions, newest first."""
    with _store(_config(config_file, db=db)) as store:
        found = views.scan_decisions(store, lambda d: (mode is None or d.mode == mode) and
                                     (action is None or d.action == action),
                                     since=views.parse_since(since), limit=limit)
    rows = [views.decision_row(d) for d in found]
    _emit(as_json, rows, lambda: views.table(
        ("decision", "time", "mode", "action", "policy", "type", "user", "nodes", "ms", "fallback", "reason"),
        [(r["id"], r["time"][:19], r["mode"], r["action"], r["policy"], r["job_type"], r["user_id"], r["nodes"],
          r["latency_ms"], "yes" if r["fallback"] else "", r["reason"]) for r in rows]))


@click.command()
@_common
@click.option("--job", "job_id", help="Only this Slurm job.")
@click.option("--limit", default=50, show_default=True, help="The last this many reports and live samples.")
def observations(db, config_file, as_json, job_id, limit) -> None:
    """Speed reports from jobs and the live speed samples built from them."""
    with _store(_config(config_file, db=db)) as store:
        reports = store.load_reports(job_id=job_id)[-limit:] if limit else []
        samples = [s for s in store.load_samples(source="live") if job_id is None or s.subject.job.id == job_id]
    samples = samples[-limit:] if limit else []
    data = {"reports": [views.report_row(r) for r in reports],
            "samples": [{"time": s.time, "job_id": s.subject.job.id, "job_type": s.subject.job.type,
                         "nodes": list(s.subject.placement.nodes()), "neighbours": [n.job.id for n in s.neighbours],
                         "speed": s.speed} for s in samples]}
    _emit(as_json, data, lambda: "\n".join([
        f"reports ({len(reports)}):",
        views.table(("job", "decision", "uid", "window end", "iterations", "seconds", "it/s"),
                    [(r.job_id, r.decision_id, r.uid, views.epoch(r.window_end), r.iterations, r.seconds, r.speed)
                     for r in reports]),
        f"live samples ({len(samples)}):",
        views.table(("time", "job", "type", "nodes", "neighbours", "it/s"),
                    [(views.epoch(s["time"]), s["job_id"], s["job_type"], ",".join(s["nodes"]),
                      ",".join(s["neighbours"]), s["speed"]) for s in data["samples"]])]))


_EXPORTS = {
    "decisions": (views.DECISION_COLUMNS, lambda store: [views.decision_row(d) for d in store.load_decisions()]),
    "observations": (views.REPORT_COLUMNS, lambda store: [views.report_row(r) for r in store.load_reports()]),
    "outcomes": (views.OUTCOME_COLUMNS, lambda store: [views.outcome_row(o) for o in store.load_outcomes()]),
}


@click.command()
@click.argument("what", type=click.Choice(tuple(_EXPORTS)))
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), required=True, help="CSV file to write.")
@click.option("--db", help="SQLite path or SQLAlchemy URL (default: the daemon's, from its config).")
@click.option("--config", "config_file", type=click.Path(path_type=Path), help="TOML config file.")
def export(what, out, db, config_file) -> None:
    """Write decisions (newest first), observations (the raw speed reports) or outcomes as CSV."""
    columns, rows_of = _EXPORTS[what]
    with _store(_config(config_file, db=db)) as store:
        rows = rows_of(store)
    with replaced_whole(out) as tmp, tmp.open("w", newline="", encoding="utf-8") as f:  # whole or not at all
        writer = csv.DictWriter(f, fieldnames=columns)
        writer.writeheader()
        writer.writerows(rows)
    click.echo(f"wrote {len(rows)} {what} to {out}")


# -- explain, shadow -------------------------------------------------------------------------------
_cluster_option = click.option("--cluster", type=click.Path(exists=True, dir_okay=False, path_type=Path),
                               help="Cluster file to judge layouts on (default: the daemon's source: sinfo, "
                                    "or its simulated cluster).")


def _judge(store, config: DaemonConfig, cluster: Path | None):
    from slurm_advisor.cli.admin_explain import make_judge

    active = store.active_model()
    model_dir = Path(active.directory) if active else config.model
    where = f"active model {active.version}" if active else f"model {config.model or 'packaged default'}"
    return make_judge(_nodes(config, cluster), model_dir, where)


def _nodes(config: DaemonConfig, cluster: Path | None):
    from slurm_advisor.cluster.base import SourceError
    from slurm_advisor.sim.clusterfile import default_cluster, read_cluster

    if cluster is not None or config.source == "simulated":
        path = cluster or config.cluster
        return read_cluster(path) if path else default_cluster()
    from slurm_advisor.cluster import make_source

    options = {"slurm_conf": config.slurm_conf, "timeout_s": config.command_timeout_s} \
        if config.source == "slurm" else {}
    try:
        return make_source(config.source, **options).snapshot().nodes
    except SourceError as exc:
        raise InputError(f"cannot read the cluster's nodes ({exc}); pass --cluster FILE") from None


@click.command()
@click.argument("key", metavar="DECISION_OR_JOB_ID")
@_common
@_cluster_option
def explain(key, db, config_file, as_json, cluster) -> None:
    """A decision's placement and its predicted speed, the alternatives (slurm-default's, pack's)
    and theirs; where Slurm put the job and what it reported."""
    from slurm_advisor.cli.admin_explain import explain as run

    config = _config(config_file, db=db)
    with _store(config) as store:
        data = run(store, _judge(store, config, cluster), key)
    _emit(as_json, data, lambda: _explain_text(data))


def _explain_text(d: dict[str, Any]) -> str:
    head = (f"decision {d['decision']} ({d['time'][:19]}): {d['mode']} mode, action {d['action']}, "
            f"policy {d['policy']}{' (fallback)' if d['fallback'] else ''}, model {d['model_version'] or '-'}; "
            f"{d['job_type']}, {d['tasks']} tasks")
    lines = [head] + ([f"reason: {d['reason']}"] if d["reason"] else [])
    lines.append(f"evidence: {d['evidence']}; predicted by the speed model of {d['speed_model']} "
                 f"on the {d['cluster_view']}:")
    chosen = {**d["chosen"], "name": "advised" if d["advised"] else "would advise"}
    judged = [chosen, *d["alternatives"], *([d["slurm"]] if d["slurm"] else [])]
    lines.append(views.table(("layout of", "nodes", "predicted it/s", "tasks", "note"),
                             [(j["name"], ",".join(j["nodes"]), j["predicted"], j["layout"], j.get("note"))
                              for j in judged]))
    if d.get("slurm_choice"):
        lines.append(f"Slurm's own choice then: {d['slurm_choice']}")
    if d["job_id"]:
        lines.append(f"Slurm job {d['job_id']}: {d['state']}")
    m = d["measured"]
    lines.append(f"reported: {m['mean_speed']:.4g} it/s over {m['seconds']:.0f} s ({m['reports']} reports)"
                 if m else "reported: no speed reports")
    return "\n".join(lines)


@click.command()
@_common
@_cluster_option
@click.option("--since", help="Only decisions after this: 30m, 2h, 7d or an ISO time (UTC).")
def shadow(db, config_file, as_json, cluster, since) -> None:
    """Observe mode's evidence: per job and in total, the advisor's layout against where Slurm
    put the job, both predicted when the job was decided by the model that decided it."""
    from slurm_advisor.cli.admin_evidence import shadow as run

    config = _config(config_file, db=db)
    with _store(config) as store:
        observed = views.scan_decisions(store, lambda d: d.mode == "observe" and bool(d.would),
                                        since=views.parse_since(since))
        data = run(store, _nodes(config, cluster), observed)
    _emit(as_json, data, lambda: _shadow_text(data))


def _shadow_text(d: dict[str, Any]) -> str:
    speedup, ci = d["geomean_predicted_speedup"], d["geomean_predicted_speedup_ci95"]
    interval = f", 95 % interval {ci[0]:.3f}-{ci[1]:.3f}x" if ci else ", no interval under 5 jobs"
    models = ", ".join(d["models"]) or "-"
    lines = [(f"{d['decisions']} observe-mode decisions with a layout; {d['with_slurm_placement']} with Slurm's "
              f"per-node layout known; {d['counted']} counted, {d['placed_differently']} of them placed "
              "differently by the advisor (identical nodes swapped: the same layout)"),
             ("predicted speed-up of the advisor's layouts where they differ (geometric mean): "
              f"{'-' if speedup is None else f'{speedup:.3f}x{interval}'} (predicted when decided, "
              f"by the deciding model: {models})"),
             "not counted: " + (", ".join(f"{why} ({n})" for why, n in d["not_counted"].items()) or "none"),
             (f"Slurm's layout as the daemon modelled it: {d['slurm_as_modelled']['agreed']} of "
              f"{d['slurm_as_modelled']['known']}; jobs with measured speeds: {d['measured_jobs']}"),
             f"cannot know: {d['cannot_know']}"]
    lines.append(views.table(("decision", "job", "type", "advisor", "slurm", "pred. advisor", "pred. slurm",
                              "speed-up", "measured it/s", "not counted"),
                             [(r["decision"], r["job_id"], r["job_type"], _tasks_text(r["advisor_tasks"]),
                               _tasks_text(r["slurm_tasks"]), r["advisor_predicted"], r["slurm_predicted"],
                               r["predicted_speedup"], r["measured"]["mean_speed"] if r["measured"] else None,
                               r["not_counted"]) for r in d["jobs"]]))
    return "\n".join(lines)


def _tasks_text(tasks) -> str | None:
    """``n1:1+3,n2:0+4`` (node:PS+workers) for per-node counts; None (shown '-') when unknown."""
    return None if tasks is None else ",".join(f"{n}:{p}+{w}" for n, p, w in tasks)
