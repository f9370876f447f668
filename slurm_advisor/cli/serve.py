"""`slurm-advisor serve` (the daemon) and `slurm-advisor ctl` (ask a running one)."""
from __future__ import annotations

import json
import logging
import os
import sys
import time
from pathlib import Path

import click

from slurm_advisor.daemon.config import SOURCES, DaemonConfig, load_config
from slurm_advisor.daemon.protocol import MODES

_SOCKET_HELP = f"Unix socket (default {DaemonConfig.socket})"


@click.command()
@click.option("--source", type=click.Choice(SOURCES), help="Cluster state: Slurm CLI JSON (default), pyslurm, simulated.")
@click.option("--socket", "socket_path", type=click.Path(path_type=Path), help=_SOCKET_HELP)
@click.option("--mode", type=click.Choice(MODES), help="observe: record only; advise: pin jobs that can start now; enforce: also hold.")
@click.option("--db", help=f"Decision store: SQLite path or SQLAlchemy URL (default {DaemonConfig.db}).")
@click.option("--model", type=click.Path(path_type=Path), help="Model directory (default: the packaged model).")
@click.option("--policy", help="Registered policy name (default learned).")
@click.option("--cluster", type=click.Path(path_type=Path), help="Cluster file for --source simulated (default: embedded).")
@click.option("--config", "config_file", type=click.Path(path_type=Path),
              help="TOML config file (default /etc/slurm-advisor/config.toml when it exists).")
@click.option("--refresh-s", type=float, help="Snapshot refresh period in seconds (default 2).")
@click.option("--log-file", type=click.Path(path_type=Path), help="Log here instead of stderr.")
@click.option("--log-level", type=click.Choice(["debug", "info", "warning", "error"]),
              help="Log this and more severe (config log_level; default info).")
@click.option("--report-port", type=int, help="Also take MUNGE-signed speed reports from other hosts on this TCP "
              "port (default 0: off; jobs then need SLURM_ADVISOR_REPORT_ADDRESS=host:port).")
def serve(source, socket_path, mode, db, model, policy, cluster, config_file, refresh_s, log_file, log_level,
          report_port) -> None:
    """Run the advisor daemon that job_submit.lua asks (until SIGTERM)."""
    from slurm_advisor.daemon.build import serve as run

    flags = {"source": source, "socket": socket_path, "mode": mode, "db": db, "model": model, "policy": policy,
             "cluster": cluster, "refresh_s": refresh_s, "log_file": log_file, "log_level": log_level,
             "report_port": report_port}
    config = load_config(config_file, os.environ, flags)
    _check_socket_directory(config.socket)
    _setup_logging(config)
    run(config)


def _check_socket_directory(socket: Path) -> None:
    """The socket's directory is made if missing; one that is a file is an error before any work."""
    from slurm_advisor.errors import InputError

    for parent in socket.parents:
        if parent.exists():
            if not parent.is_dir():
                raise InputError(f"socket {socket}: {parent} is not a directory")
            return


def _setup_logging(config: DaemonConfig) -> None:
    handler = logging.FileHandler(config.log_file) if config.log_file else logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logger = logging.getLogger("slurm_advisor")
    logger.addHandler(handler)
    logger.setLevel(config.log_level.upper())


@click.group()
def ctl() -> None:
    """Ask a running daemon: health, status, or switch its mode."""


def _ask(socket_path: Path | None, op: str, **fields) -> None:
    from slurm_advisor.daemon.client import DaemonUnavailable, call
    from slurm_advisor.errors import InputError

    path = socket_path or load_config(None, os.environ).socket
    try:
        reply = call(path, op, **fields)
    except DaemonUnavailable as exc:
        raise InputError(f"daemon at {path}: {exc}") from None
    click.echo(json.dumps(reply, indent=2))
    if not reply.get("ok"):
        sys.exit(1)


_socket_option = click.option("--socket", "socket_path", type=click.Path(path_type=Path), help=_SOCKET_HELP)


@ctl.command()
@_socket_option
def health(socket_path) -> None:
    """Mode and snapshot age."""
    _ask(socket_path, "health")


@ctl.command()
@_socket_option
def status(socket_path) -> None:
    """Counters, claims, policy and model."""
    _ask(socket_path, "status")


@ctl.command()
@click.argument("mode", type=click.Choice(MODES))
@_socket_option
def mode(mode, socket_path) -> None:
    """Switch the daemon's mode at run time (root or the Slurm user)."""
    _ask(socket_path, "mode", mode=mode)


@click.command()
@click.option("--older-than", "older_than_s", type=float, help="Seconds pending before a job is unpinned "
              "(default: the config's pin_bound_s, 300).")
@click.option("--config", "config_file", type=click.Path(path_type=Path), help="TOML config file.")
@click.option("--dry-run", is_flag=True, help="List the jobs it would release; change nothing.")
def release(older_than_s, config_file, dry_run) -> None:
    """Unpin advised jobs pending too long: the daemon does this itself; run this from cron too, so
    that no job stays pinned or capped when the daemon is down (examples/etc/cron)."""
    from slurm_advisor.daemon.queue import QueueError, SlurmQueue
    from slurm_advisor.errors import InputError

    config = load_config(config_file, os.environ, {"pin_bound_s": older_than_s})
    queue = SlurmQueue(config.slurm_conf, config.command_timeout_s)
    try:
        stale = [j for j in queue.advised() if j.waiting and time.time() - j.submit_time > config.pin_bound_s]
        for job in stale:
            click.echo(f"{'would release' if dry_run else 'releasing'} job {job.job_id} ({job.decision})")
            if not dry_run:
                queue.release(job, *_user_node_counts(config.db, job.decision))
    except QueueError as exc:
        raise InputError(str(exc)) from None


def _user_node_counts(db: str, decision_id: str) -> tuple[int | None, int | None]:
    """The --nodes the user asked for, from the decision log when there is one (else unknown)."""
    from slurm_advisor.errors import InputError
    from slurm_advisor.store import Store

    try:
        with Store.open(db, create=False) as store:
            found = store.decision(decision_id)
    except InputError:
        return None, None
    request = found.request if found else {}
    return request.get("min_nodes"), request.get("max_nodes")
