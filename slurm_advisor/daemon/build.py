"""The daemon built from its configuration (``build_daemon``: the real source, queue, policy and
store) and run until a signal (``serve``); ``daemon.py`` holds the parts tests assemble alike.
"""
from __future__ import annotations

import logging
import re
import signal
import threading
from functools import partial

from slurm_advisor.advisor import Advisor
from slurm_advisor.cluster.base import ClusterSource
from slurm_advisor.daemon.config import DaemonConfig
from slurm_advisor.daemon.daemon import Daemon
from slurm_advisor.daemon.jobcomp import JobCompFile, configured
from slurm_advisor.daemon.limits import ConnectionLimits
from slurm_advisor.daemon.queue import NoQueue, QueueError, SlurmQueue
from slurm_advisor.daemon.server import AdvisorServer
from slurm_advisor.daemon.service import AdviceService
from slurm_advisor.daemon.state import load_policy, speed_model_of
from slurm_advisor.errors import InputError
from slurm_advisor.models.versions import model_version
from slurm_advisor.policies import FROM_MODEL
from slurm_advisor.slurm.release import DEFAULT, Release
from slurm_advisor.store import Store

log = logging.getLogger("slurm_advisor.daemon")


def build_daemon(config: DaemonConfig) -> Daemon:
    """The daemon from its configuration; InputError for anything a user can fix."""
    from slurm_advisor.cluster import make_source
    from slurm_advisor.models.versions import active_dir
    from slurm_advisor.policies import PolicyContext, make_policy
    from slurm_advisor.policies.slurm_default import SlurmDefaultPolicy
    from slurm_advisor.slurm.expressible import express

    source = _make_source(config, make_source)
    queue = SlurmQueue(config.slurm_conf, config.command_timeout_s) if config.source != "simulated" else NoQueue()
    release = _release(queue)  # read once: the model of Slurm follows it
    modelled = release or DEFAULT
    model = active_dir(config.models_dir) or config.model  # the promoted model, once retrain promoted one
    problem = None
    try:
        policy = load_policy(config.policy, model) if config.policy in FROM_MODEL else \
            make_policy(config.policy, PolicyContext(model_dir=model, release=modelled))
    except Exception as exc:  # any model that does not load, as the model follower treats a swap
        if config.policy not in FROM_MODEL:
            raise
        # A corrupt or missing model must not stop the advice: Slurm's own rule serves, the log
        # and `status` say why, and the model follower swaps in the next model that loads.
        problem = f"model {model or 'packaged'} does not load ({exc}); serving slurm-default"
        log.error("%s", problem)
        policy = SlurmDefaultPolicy(modelled)
    served_model = config.policy in FROM_MODEL and problem is None
    fallback = SlurmDefaultPolicy(modelled) if served_model else None
    version = None if not served_model else (model.name if model != config.model else model_version(model))
    snapshot = source.snapshot()
    show_config = _show_config(queue)
    # topology/block's blocks, read once here like the release: from scontrol show topology,
    # which prints them whether topology.conf or topology.yaml (26.05: TopologyPlugin says
    # topology/flat then) holds them. The config's plugin alone, with no blocks read: caps only.
    blocks = getattr(source, "blocks", None)
    advisor = Advisor(policy, fallback=fallback, predictor=speed_model_of(model) if served_model else None)
    service = AdviceService(advisor, express if release is None else partial(express, release=release),
                            speed=(None, None) if served_model else _default_speed(config),
                            model_version=version, model_problem=problem, release=release,
                            has_switches=any(n.switch for n in snapshot.nodes), hold_wait_s=config.hold_wait_s,
                            pins=blocks is not None or not block_topology(show_config), blocks=blocks,
                            default_partition=_default_partition(queue), max_tasks=config.max_tasks,
                            alternatives=config.evidence_alternatives)
    store = Store.open(config.db)
    daemon = Daemon(config, source, queue, service, store, _jobcomp(show_config))
    daemon.state.counters.model_reload_failures += problem is not None
    return daemon


def _default_speed(config: DaemonConfig) -> tuple[object | None, str | None]:
    """The speed model that predicts a heuristic policy's evidence: the config's model (the
    packaged one unless set), with its version; none when it does not load (logged)."""
    try:
        return speed_model_of(config.model), model_version(config.model)
    except Exception as exc:  # noqa: BLE001 -- evidence without predictions, never a daemon that does not start
        log.warning("model %s does not load (%s): decisions record their layouts without predicted speeds",
                    config.model or "packaged", exc)
        return None, None


def _show_config(queue) -> str | None:
    """``scontrol show config`` once at start (None for the simulated source or when it fails)."""
    return _asked_at_start(queue, SlurmQueue.show_config,
                           "cannot read Slurm's config (%s): outcomes from squeue only, pins allowed")


def _release(queue) -> Release | None:
    """The Slurm release (``sinfo --version``), read once at start: the model of Slurm follows it
    (None for the simulated source, or when Slurm does not say: the default release's model)."""
    text = _asked_at_start(queue, SlurmQueue.version,
                           "cannot read Slurm's release (%s): modelling Slurm 22.05")
    try:
        return None if text is None else Release.parse(text)
    except ValueError as exc:
        log.warning("%s: modelling Slurm 22.05", exc)
        return None


def _default_partition(queue) -> str | None:
    return _asked_at_start(queue, SlurmQueue.default_partition,
                           "cannot read Slurm's partitions (%s): a job without -p is not pinned")


def _asked_at_start(queue, ask, warning: str) -> str | None:
    """``ask(queue)`` of a real Slurm queue; None for the simulated source, or with ``warning``
    logged when Slurm does not answer (the daemon serves without it)."""
    if not isinstance(queue, SlurmQueue):
        return None
    try:
        return ask(queue)
    except QueueError as exc:
        log.warning(warning, exc)
        return None


def block_topology(show_config: str | None) -> bool:
    """Whether Slurm places by topology/block (23.11+), where pinning with -w fails the job."""
    return bool(show_config) and re.search(r"^TopologyPlugin\s*=\s*topology/block\b", show_config,
                                           re.MULTILINE) is not None


def _jobcomp(show_config: str | None) -> JobCompFile | None:
    """The job completion file, when slurmctld writes one (read once, at start)."""
    if show_config is None:
        return None
    path = configured(show_config)
    if path is not None:
        log.info("outcomes also from the job completion file %s", path)
    return None if path is None else JobCompFile(path)


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
        server = AdvisorServer(config.socket, daemon.dispatcher(), config.client_timeout_s,
                               report_listen=(config.report_listen, config.report_port) if config.report_port else None,
                               taken=daemon.ready is not None,
                               limits=ConnectionLimits(config.max_connections, config.max_connections_per_uid))
    except OSError as exc:
        daemon.stop()
        where = config.socket if not config.report_port else f"{config.socket} and {config.report_listen}:{config.report_port}"
        raise InputError(f"cannot listen on {where}: {exc}") from None
    daemon.start()

    def _stop(signum, _frame):
        log.info("signal %d: stopping", signum)
        threading.Thread(target=server.shutdown, daemon=True).start()

    def _hangup(signum, _frame):
        # Python's default for SIGHUP ends the process, which systemd's Restart=on-failure counts
        # as a clean exit: the daemon stayed down. Settings change with a restart; the mode and
        # models through the socket and the model directory, without one.
        log.info("signal %d (SIGHUP): ignored; restart the daemon to read its config again", signum)

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    signal.signal(signal.SIGHUP, _hangup)
    log.info("serving on %s: source %s, mode %s (%s), policy %s", config.socket, config.source, daemon.state.mode,
             "set at run time" if daemon.mode_keeper.set_at else "the config's", config.policy)
    if server.report_address:
        log.info("taking MUNGE-signed speed reports on %s:%d", *server.report_address)
    try:
        server.serve_forever(poll_interval=0.2)
    finally:
        server.server_close()
        daemon.stop()
        log.info("stopped")
