"""Prometheus metrics of one daemon, served on an opt-in HTTP port (``metrics_port``, 0 = off).

Each daemon has its own ``CollectorRegistry`` (never prometheus_client's global one), so tests
and benchmarks can run several daemons in one process. What the request path measures itself
(advice latency, decisions by mode and action, fallbacks by reason class) is observed per
request; everything the daemon already counts (reports, refresh failures, writers, claims, the
active model, the registry's models by status and its changes of the active model) is read at
scrape time, costing requests nothing.
"""
from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from slurm_advisor.domain.decision import LEFT_TO_SLURM, UNMODELLED, Decision
from slurm_advisor.domain.model_record import ACTIVATIONS
from slurm_advisor.errors import InputError

log = logging.getLogger("slurm_advisor.daemon")
LATENCY_BUCKETS_S = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0)

#: (class, pattern of the reason text): the first that matches names a fallback's class.
REASON_CLASSES = (
    ("no_snapshot", re.compile(r"no cluster snapshot")),
    ("unmodelled_option", re.compile(r"unmodelled option")),
    ("too_large", re.compile(r"\(max_tasks\)|more than the whole cluster holds")),
    ("cannot_start_now", re.compile(r"wait: the job")),
    ("policy_no_placement", re.compile(r"found no placement")),
    ("policy_error", re.compile(r" failed \(")),
    ("policy_invalid", re.compile(r"invalid placement")),
    ("not_expressible", re.compile(r"cannot lay the advised nodes out")),
    ("partition", re.compile(r"partition")),
    ("does_not_fit", re.compile(r"does not fit")),
)

# The daemon's own counters (state.Counters and the writers) exposed as Prometheus counters.
_STATE_COUNTERS = {
    "requests": "Requests answered on the socket, every op.",
    "errors": "Requests refused or failed (protocol errors, internal errors).",
    "reports": "Speed reports received.",
    "reports_refused": "Speed reports refused (bad values, unknown job, not the owner).",
    "refresh_failures": "Background refreshes of the cluster snapshot that failed.",
    "released": "Pinned or capped jobs the daemon released (after pin_bound_s, or when their nodes were taken).",
    "released_taken": "Of those, released at once because the nodes they were pinned to were taken.",
    "claims_unseen_dropped": "Claims dropped because Slurm never listed their job (rejected, cancelled at once).",
    "connections_refused": "Connections refused at once (over the per-uid or total limit).",
    "connections_dropped": "Connections dropped (a request not whole by its deadline, replies not read).",
    "accept_failures": "Failed accepts on the daemon's sockets (e.g. out of file descriptors).",
    "model_reload_failures": "Models that did not load (at start: slurm-default serves; promoted: the current one kept).",
    "model_reloads": "Models swapped in without a restart (a promotion or a rollback moved models_dir/active).",
    "canary_promotions": "Canaries that ended as the active model (their measured outcomes held up).",
    "canary_rollbacks": "Canaries that ended otherwise (rolled back on measured outcomes).",
}
_WRITER_COUNTERS = {
    "decisions_written": ("writer", "written", "Decisions written to the store."),
    "decisions_dropped": ("writer", "dropped", "Decisions the store never got."),
    "decision_writer_restarts": ("writer", "restarts", "Decision writer processes that died and were replaced."),
    "reports_written": ("reports", "written", "Speed reports written to the store."),
    "reports_dropped": ("reports", "dropped", "Speed reports the store never got."),
    "outcomes_written": ("outcomes", "written", "Job outcome changes written to the store."),
    "evidence_recorded": ("evidence", "recorded", "Decisions' evidence computed after the reply and spooled."),
    "evidence_dropped": ("evidence", "dropped", "Decisions left without evidence: its queue full, or the stop first."),
    "evidence_failed": ("evidence", "failed", "Decisions whose evidence could not be computed (logged)."),
    # the spool's counts, the same for both spooled writers
    **{f"{name}_{count}": (writer, count, help_text.format(label))
       for name, label, writer in (("decisions", "Decisions", "writer"), ("reports", "Speed reports", "reports"))
       for count, help_text in (("spooled", "{} appended to the spool before their reply."),
                                ("spool_failed", "{} the spool could not take (kept in memory)."),
                                ("spool_damaged", "{}: damaged spool lines skipped."))},
}


def is_fallback(decision: Decision) -> bool:
    """The fallback policy decided, or no advice was given for a reason: the job was left to Slurm
    as submitted (observe mode's quiet record is no fallback)."""
    return decision.fallback or (decision.action == "none" and bool(decision.reason)) or \
        decision.reason.startswith((LEFT_TO_SLURM, UNMODELLED))


def reason_class(reason: str) -> str:
    """A short label for a fallback's reason: bounded cardinality for Prometheus."""
    for name, pattern in REASON_CLASSES:
        if pattern.search(reason):
            return name
    return "other"


class DaemonMetrics:
    """The metrics of ``daemon`` (a :class:`~slurm_advisor.daemon.daemon.Daemon`)."""

    def __init__(self, daemon: Any) -> None:
        self.registry = CollectorRegistry()
        self.latency = Histogram("slurm_advisor_advice_latency_seconds",
                                 "Time to decide one advise request (the service's own clock).",
                                 buckets=LATENCY_BUCKETS_S, registry=self.registry)
        self.decisions = Counter("slurm_advisor_decisions", "Decisions by mode and action.",
                                 ["mode", "action"], registry=self.registry)
        self.fallbacks = Counter("slurm_advisor_fallbacks",
                                 "Decisions the fallback policy made or that gave no advice, by reason class.",
                                 ["reason"], registry=self.registry)
        self.registry.register(_DaemonCollector(daemon))
        self._server = None
        self.port: int | None = None  # the bound port once started

    def observe(self, reply: dict[str, Any], decision: Decision | None) -> None:
        """One advise request: ``decision`` None when there was none (no snapshot yet)."""
        if decision is None:
            self.fallbacks.labels(reason_class(str(reply.get("reason", "")))).inc()
            return
        self.latency.observe(decision.latency_ms / 1e3)
        self.decisions.labels(decision.mode, decision.action).inc()
        if is_fallback(decision):
            self.fallbacks.labels(reason_class(decision.reason)).inc()

    def start(self, address: str, port: int) -> int:
        """Serve ``/metrics`` on ``address:port`` in a background thread; returns the bound port."""
        try:
            self._server, _thread = start_http_server(port, addr=address, registry=self.registry)
        except OSError as exc:
            raise InputError(f"cannot serve metrics on {address}:{port}: {exc.strerror or exc}") from None
        self.port = self._server.server_port
        log.info("metrics on http://%s:%d/metrics", address, self.port)
        return self.port

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


class _DaemonCollector(Collector):
    """What the daemon counts anyway, read when Prometheus scrapes."""

    def __init__(self, daemon: Any) -> None:
        self.daemon = daemon

    def collect(self) -> Iterator[Any]:
        d = self.daemon
        counters = vars(d.state.counters)
        for name, help_text in _STATE_COUNTERS.items():
            yield CounterMetricFamily(f"slurm_advisor_{name}", help_text, value=counters.get(name, 0))
        for name, (writer, attribute, help_text) in _WRITER_COUNTERS.items():
            yield CounterMetricFamily(f"slurm_advisor_{name}", help_text,
                                      value=getattr(getattr(d, writer), attribute))
        yield CounterMetricFamily("slurm_advisor_policy_errors", "Proposals the serving policy raised on "
                                  "(the fallback answered them); since the model was loaded.",
                                  value=d.service.advisor.errors)
        age = d.state.snapshot_age_s()
        yield GaugeMetricFamily("slurm_advisor_snapshot_age_seconds", "Age of the cluster snapshot (NaN: none yet).",
                                value=float("nan") if age is None else age)
        yield GaugeMetricFamily("slurm_advisor_claims", "Advised jobs not started yet whose nodes are held back.",
                                value=len(d.state.claims))
        mode = GaugeMetricFamily("slurm_advisor_mode", "The daemon's mode (1 for the current one).", labels=["mode"])
        mode.add_metric([d.state.mode], 1)
        yield mode
        yield GaugeMetricFamily("slurm_advisor_mode_overridden", "1 when the mode was set at run time and "
                                "overrides the config's (kept across restarts until `mode --reset`).",
                                value=float(d.mode_keeper.set_at is not None))
        model = GaugeMetricFamily("slurm_advisor_active_model", "The policy and model version serving (value 1).",
                                  labels=["policy", "version"])
        model.add_metric([d.service.advisor.policy.name, d.service.model_version or ""], 1)
        yield model
        canary = d.service.canary
        yield GaugeMetricFamily("slurm_advisor_canary_share", "The share of marked jobs a canary serves (0: none runs).",
                                value=0.0 if canary is None else canary.share)
        yield from self._registry()

    def _registry(self) -> Iterator[Any]:
        """The store's models by status: a retrain that promoted adds an active one and retires the
        last; one that did not leaves a candidate."""
        if self.daemon.store is None:
            return
        try:
            models = self.daemon.store.list_models()
            changes = self.daemon.store.count_activations()
        except InputError as exc:
            log.warning("metrics: cannot read the model registry: %s", exc)
            return
        family = GaugeMetricFamily("slurm_advisor_models", "Models in the registry by status.", labels=["status"])
        for status in ("candidate", "active", "retired"):
            family.add_metric([status], sum(m.status == status for m in models))
        yield family
        # Every label pair always present (0 until the first): an alert on increase() sees the first one.
        activations = CounterMetricFamily("slurm_advisor_model_activations", "Changes of the active model in the "
                                          "registry (every daemon on the store counts them all), by how and "
                                          "whether forced over the gate.", labels=["action", "forced"])
        for action in ACTIVATIONS:
            for forced in (False, True):
                activations.add_metric([action, str(forced).lower()], changes.get((action, forced), 0))
        yield activations
