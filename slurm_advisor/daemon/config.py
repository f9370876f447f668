"""The daemon's settings, layered once at the edge: defaults < TOML file < SLURM_ADVISOR_* < flags.

Every layer is validated against the same table of fields, so an unknown key or a value of the
wrong type is one message naming the file (or variable, or flag) and the valid keys.
"""
from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

from slurm_advisor.daemon.limits import MIN_CONNECTIONS
from slurm_advisor.daemon.protocol import MODES
from slurm_advisor.errors import InputError
from slurm_advisor.slurm.marker import MAX_TASKS

ENV_PREFIX = "SLURM_ADVISOR_"
DEFAULT_CONFIG = Path("/etc/slurm-advisor/config.toml")
SOURCES = ("slurm", "pyslurm", "simulated")


@dataclass(frozen=True)
class DaemonConfig:
    socket: Path = Path("/run/slurm-advisor/advisor.sock")
    mode: str = "observe"                     # observe | advise | enforce (docs: admin guide, "Modes");
    #                                           observe by default: nothing changes until an admin says so
    source: str = "slurm"                     # slurm (CLI JSON) | pyslurm | simulated
    cluster: Path | None = None               # simulated source: cluster file (None: the embedded one)
    db: str = "/var/lib/slurm-advisor/advisor.db"   # SQLite path or any SQLAlchemy URL
    model: Path | None = None                 # model directory (None: the packaged default model)
    models_dir: Path = Path("/var/lib/slurm-advisor/models")  # retrain's versions: once its `active`
    #                                           pointer exists the daemon serves it and follows promotions
    policy: str = "learned"                   # any registered policy name
    refresh_s: float = 2.0                    # snapshot refresh period
    claim_ttl_s: float = 120.0                # an advised job not started by then frees its claim
    pin_bound_s: float = 300.0                # a pinned job still pending by then is unpinned
    hold_wait_s: float = 600.0                # enforce: how long a held job waits for its switch bound
    slurm_user: str = "slurm"                 # besides root, who may ask for advice (slurmctld's user)
    slurm_conf: Path | None = None            # passed to the Slurm commands as SLURM_CONF
    command_timeout_s: float = 10.0           # one sinfo/squeue/scontrol call
    client_timeout_s: float = 2.0             # a connection that sends nothing is dropped after this
    log_file: Path | None = None              # None: stderr
    log_level: str = "info"
    metrics_port: int = 0                     # Prometheus metrics on this HTTP port; 0: off
    metrics_address: str = "127.0.0.1"        # where the metrics port listens
    decision_log: Path | None = None          # JSONL: one line per decision, appended; None: off
    spool_dir: Path | None = None             # decisions and reports on disk before they are acknowledged;
    #                                           None: beside a SQLite file (<db>.spool), else /var/lib/slurm-advisor/spool
    mode_file: Path | None = None             # the mode set at run time, kept across restarts (daemon/mode_file.py);
    #                                           None: beside a SQLite file (<db>.mode.json), else /var/lib/slurm-advisor/mode.json
    report_port: int = 0                      # TCP port for MUNGE-signed speed reports from other hosts; 0: off
    report_listen: str = "0.0.0.0"            # where the report port listens (jobs: SLURM_ADVISOR_REPORT_ADDRESS)
    ready_keys: int = 8                       # repeat requests answered ahead (<socket>.ready); 0: off
    munge_socket: Path | None = None          # munged's socket (None: $MUNGE_SOCKET, else libmunge's default)
    max_tasks: int = 10_000                   # a job with more tasks is left to Slurm as submitted (1-100,000)
    max_connections: int = 1024               # open at once, in all; the last eighth kept for root and the Slurm user
    max_connections_per_uid: int = 64         # open at once from one uid other than those (report port: one address)
    canary_share: float = 0.2                 # a model the gate accepts first serves this share of marked jobs; 0: none
    canary_jobs: int = 20                     # completed, reported jobs per arm before the canary is decided
    evidence_alternatives: int = 2            # feasible alternatives (-N k layouts) each decision records, predicted
    evidence_queue: int = 100                 # decisions waiting for their evidence (computed after the reply); beyond: none

    def validated(self) -> DaemonConfig:
        if self.mode not in MODES:
            raise InputError(f"mode {self.mode!r}: expected one of {', '.join(MODES)}")
        if self.source not in SOURCES:
            raise InputError(f"source {self.source!r}: expected one of {', '.join(SOURCES)}")
        for name in RANGES:
            check_range(name, getattr(self, name), name)
        if self.log_level.lower() not in ("debug", "info", "warning", "error"):
            raise InputError(f"log_level {self.log_level!r}: expected debug, info, warning or error")
        return self


@dataclass(frozen=True)
class Range:
    """The values a numeric setting may take, bounds included; ``what`` names them in the message."""

    low: float
    high: float
    unit: str = ""
    what: str = ""

    def describe(self) -> str:
        return self.what or f"from {self.low:g} to {self.high:g}{self.unit}"


PORT = Range(0, 65535, what="a TCP port (0 = off, at most 65535)")
# Every numeric setting's valid values (docs/admin-guide.md "Settings" lists them). A value
# outside is refused at start: refresh_s = 1e308 killed the refresh and ready threads (a wait
# beyond threading.TIMEOUT_MAX raises), client_timeout_s = 1e-9 dropped 18 of 20 requests.
RANGES: dict[str, Range] = {
    "refresh_s": Range(0.01, 86400, " s"),           # up to a day between snapshots
    "claim_ttl_s": Range(0.1, 7 * 86400, " s"),      # a claim outliving a week is a leak
    "pin_bound_s": Range(1, 7 * 86400, " s"),
    "hold_wait_s": Range(1, 7 * 86400, " s"),        # Slurm's --switches wait, whole seconds
    "command_timeout_s": Range(0.1, 3600, " s"),
    "client_timeout_s": Range(0.5, 3600, " s"),      # below, a loaded hook misses it
    "ready_keys": Range(0, 64),
    "metrics_port": PORT,
    "report_port": PORT,
    "max_tasks": Range(1, MAX_TASKS),                 # the marker's own bound
    # fewer connections leave too little room for root and the Slurm user; a per-uid limit above
    # max_connections is max_connections
    "max_connections": Range(MIN_CONNECTIONS, 65536),
    "max_connections_per_uid": Range(1, 65536),
    "canary_share": Range(0, 0.5),                    # a canary serves the smaller arm
    "canary_jobs": Range(5, 100000),                  # fewer: no test can tell the arms apart
    "evidence_alternatives": Range(0, 3),             # one cons_tres pass each, after the reply
    "evidence_queue": Range(1, 10_000),               # each holds its snapshot's free array (24 bytes a node: 24 MB at 10,000 nodes x 100)
}


def check_range(name: str, value: float, where: str) -> None:
    """Refuse ``value`` (NaN and infinities included) outside ``name``'s range, naming the range."""
    bounds = RANGES.get(name)
    if bounds is not None and not bounds.low <= value <= bounds.high:
        raise InputError(f"{where} must be {bounds.describe()}, not {value!r}")


_FIELDS = {f.name: f for f in fields(DaemonConfig)}
_PATHS = {"socket", "cluster", "model", "models_dir", "slurm_conf", "log_file", "decision_log", "munge_socket",
          "spool_dir", "mode_file"}
_FLOATS = {n for n, f in _FIELDS.items() if f.type == "float"}
_INTS = {n for n, f in _FIELDS.items() if f.type == "int"}


def load_config(file: Path | None = None, env: Mapping[str, str] | None = None,
                flags: Mapping[str, Any] | None = None) -> DaemonConfig:
    """The layered configuration. ``file`` None reads DEFAULT_CONFIG when it exists."""
    config = DaemonConfig()
    path = file if file is not None else (DEFAULT_CONFIG if DEFAULT_CONFIG.is_file() else None)
    if path is not None:
        config = _apply(config, _read_toml(path), where=str(path))
    env_values = {k[len(ENV_PREFIX):].lower(): v for k, v in (env or {}).items()
                  if k.startswith(ENV_PREFIX) and k[len(ENV_PREFIX):].lower() in _FIELDS}
    config = _apply(config, env_values, where="environment", prefix=ENV_PREFIX)
    config = _apply(config, {k: v for k, v in (flags or {}).items() if v is not None}, where="flag")
    return config.validated()


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        data = tomllib.loads(path.read_bytes().decode("utf-8"))
    except OSError as exc:
        raise InputError(f"{path}: cannot read config: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: not UTF-8 (byte {exc.start})") from None
    except ValueError as exc:  # TOMLDecodeError, or int() of a literal of more than 4,300 digits
        raise InputError(f"{path}: not valid TOML: {exc}") from None
    return data.get("daemon", data) if isinstance(data.get("daemon"), dict) else data


def _apply(config: DaemonConfig, values: Mapping[str, Any], *, where: str, prefix: str = "") -> DaemonConfig:
    changes = {}
    for key, raw in values.items():
        if key not in _FIELDS:
            raise InputError(f"{where}: unknown setting {key!r}; valid: {', '.join(_FIELDS)}")
        named = f"{where}: {prefix}{key.upper()}" if prefix else f"{where}: {key}"
        changes[key] = _convert(key, raw, named)
        check_range(key, changes[key], f"{named}: {key}" if prefix else named)
    return replace(config, **changes)


def _convert(key: str, raw: Any, where: str) -> Any:
    if key in _PATHS:
        if not isinstance(raw, (str, Path)) or not str(raw):
            raise InputError(f"{where} must be a path, not {raw!r}")
        return Path(raw).expanduser()
    if key in _FLOATS:
        try:
            value = float(raw) if not isinstance(raw, bool) else None
        except (TypeError, ValueError):
            value = None
        if value is None:
            raise InputError(f"{where} must be a number of seconds, not {raw!r}")
        return value
    if key in _INTS:
        if isinstance(raw, int) and not isinstance(raw, bool):
            return raw
        if isinstance(raw, str) and re.fullmatch(r"[0-9]{1,18}", raw.strip()):  # ASCII digits, int()-safe
            return int(raw)
        raise InputError(f"{where} must be a whole number, not {raw!r}")
    if not isinstance(raw, str):
        raise InputError(f"{where} must be a string, not {raw!r}")
    return raw
