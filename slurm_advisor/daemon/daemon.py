"""The daemon, assembled: source + queue -> state (refreshed in the background) -> advice service
-> decisions store, served on a Unix socket. ``build_daemon(config)`` wires the real parts;
tests pass their own source, queue and store.
"""
from __future__ import annotations

import hashlib
import logging
import pwd
import signal
import threading
import time
from pathlib import Path
from typing import Any

from slurm_advisor.advisor import Advisor
from slurm_advisor.cluster.base import ClusterSource
from slurm_advisor.daemon.claims import Claims
from slurm_advisor.daemon.config import DaemonConfig
from slurm_advisor.daemon.protocol import MODES, ProtocolError
from slurm_advisor.daemon.queue import NoQueue, SlurmQueue
from slurm_advisor.daemon.server import AdvisorServer, Dispatcher
from slurm_advisor.daemon.service import AdviceService
from slurm_advisor.daemon.state import DaemonState, Refresher
from slurm_advisor.daemon.writer import DecisionWriter
from slurm_advisor.errors import InputError
from slurm_advisor.store import Store

log = logging.getLogger("slurm_advisor.daemon")
_PACKAGED_MODEL = Path(__file__).resolve().parent.parent / "data" / "model"  # as learned.checkpoint
_RECENT = 10_000  # decisions kept in memory for unpinning (the user's own node counts)


class Daemon:
    def __init__(self, config: DaemonConfig, source: ClusterSource, queue, service: AdviceService,
                 store: Store | None):
        self.config = config
        self.source = source
        self.service = service
        self.state = DaemonState(config.mode, Claims(config.claim_ttl_s))
        self.writer = DecisionWriter(store)
        self.store = store
        self.refresher = Refresher(self.state, source, queue, period_s=config.refresh_s,
                                   pin_bound_s=config.pin_bound_s, node_counts=self._user_node_counts)
        self._advise_lock = threading.Lock()  # claims: one decision at a time sees the previous ones
        self._recent: dict[str, tuple[int | None, int | None]] = {}

    # -- requests ---------------------------------------------------------------------------
    def advise(self, fields: Any) -> dict[str, Any]:
        self.state.counters.requests += 1
        if not isinstance(fields, dict):
            raise ProtocolError("advise: 'job' must be an object")
        with self._advise_lock:
            snapshot = self.state.snapshot()
            if snapshot is None:
                return {"ok": True, "decision": None, "mode": self.state.mode, "action": "none",
                        "reason": "no cluster snapshot yet"}
            reply, decision, job, placement = self.service.advise(snapshot, fields, self.state.mode)
            if placement is not None:
                self.state.claims.add(decision.id, snapshot, job, placement, time.monotonic())
        self._remember(decision.id, fields)
        self.writer.put(decision)
        counters = self.state.counters
        counters.decisions += 1
        counters.placed += reply["action"] == "place"
        counters.capped += reply["action"] == "cap"
        return reply

    def switch_mode(self, mode: Any) -> dict[str, Any]:
        if mode not in MODES:
            raise ProtocolError(f"mode: expected one of {', '.join(MODES)}, not {mode!r}")
        old = self.state.mode
        self.state.set_mode(mode)
        log.info("mode %s -> %s", old, mode)
        return {"ok": True, "mode": mode, "was": old}

    def health(self) -> dict[str, Any]:
        age = self.state.snapshot_age_s()
        return {"ok": True, "mode": self.state.mode, "snapshot_age_s": None if age is None else round(age, 3)}

    def status(self) -> dict[str, Any]:
        snap = self.state.snapshot()
        return {**self.health(), "policy": self.service.advisor.policy.name,
                "model": self.service.model_version, "source": self.source.name,
                "nodes": 0 if snap is None else len(snap.nodes), "claims": len(self.state.claims),
                "uptime_s": round(time.time() - self.state.started_at, 1),
                "decisions_written": self.writer.written, "decisions_dropped": self.writer.dropped,
                **vars(self.state.counters)}

    # -- life cycle -------------------------------------------------------------------------
    def start(self) -> None:
        self.writer.start()
        self.refresher.start()

    def stop(self) -> None:
        self.refresher.stop()
        self.writer.stop()
        if self.store is not None:
            self.store.close()

    def dispatcher(self) -> Dispatcher:
        return Dispatcher(self, admin_uids=_uids(self.config.slurm_user))

    def _remember(self, decision: str, fields: dict[str, Any]) -> None:
        if len(self._recent) >= _RECENT:
            self._recent.pop(next(iter(self._recent)))
        self._recent[decision] = (fields.get("min_nodes"), fields.get("max_nodes"))

    def _user_node_counts(self, decision: str) -> tuple[int | None, int | None]:
        if decision in self._recent or self.store is None:
            return self._recent.get(decision, (None, None))
        try:  # decided before a restart: the decision log has the request
            found = self.store.decision(decision)
        except InputError:
            return None, None
        return (found.request.get("min_nodes"), found.request.get("max_nodes")) if found else (None, None)


def _uids(user: str) -> frozenset[int]:
    try:
        return frozenset({pwd.getpwnam(user).pw_uid})
    except KeyError:
        log.warning("slurm_user %r does not exist here: only root may ask for advice", user)
        return frozenset()


def model_version(model_dir: Path | None) -> str:
    """A short hash of the model's files: what the decision log names."""
    directory = Path(model_dir) if model_dir else _PACKAGED_MODEL
    digest = hashlib.sha256()
    for name in ("meta.json", "policy.pt", "speed.pt"):
        path = directory / name
        if path.is_file():
            digest.update(path.read_bytes())
    return digest.hexdigest()[:12]


def build_daemon(config: DaemonConfig) -> Daemon:
    """The daemon from its configuration; InputError for anything a user can fix."""
    from slurm_advisor.cluster import make_source
    from slurm_advisor.daemon.expressible import express
    from slurm_advisor.policies import PolicyContext, make_policy
    from slurm_advisor.policies.slurm_default import SlurmDefaultPolicy

    source = _make_source(config, make_source)
    queue = SlurmQueue(config.slurm_conf, config.command_timeout_s) if config.source != "simulated" else NoQueue()
    policy = make_policy(config.policy, PolicyContext(model_dir=config.model))
    fallback = SlurmDefaultPolicy() if config.policy == "learned" else None
    version = model_version(config.model) if config.policy == "learned" else None
    snapshot = source.snapshot()
    service = AdviceService(Advisor(policy, fallback=fallback), express, model_version=version,
                            has_switches=any(n.switch for n in snapshot.nodes), hold_wait_s=config.hold_wait_s)
    store = Store.open(config.db)
    return Daemon(config, source, queue, service, store)


def _make_source(config: DaemonConfig, make_source) -> ClusterSource:
    if config.source == "simulated":
        return make_source("simulated", cluster_file=config.cluster)
    if config.source == "slurm":
        return make_source("slurm", slurm_conf=config.slurm_conf, timeout_s=config.command_timeout_s)
    return make_source(config.source)


def serve(config: DaemonConfig) -> None:
    """Run until SIGTERM or SIGINT; SIGHUP is logged (mode switches go through the socket)."""
    daemon = build_daemon(config)
    try:
        server = AdvisorServer(config.socket, daemon.dispatcher(), config.client_timeout_s)
    except OSError as exc:
        daemon.stop()
        raise InputError(f"cannot listen on {config.socket}: {exc}") from None
    daemon.start()

    def _stop(signum, _frame):
        log.info("signal %d: stopping", signum)
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    log.info("serving on %s: source %s, mode %s, policy %s", config.socket, config.source, config.mode,
             config.policy)
    try:
        server.serve_forever(poll_interval=0.2)
    finally:
        server.server_close()
        daemon.stop()
        log.info("stopped")
