"""The mode set at run time (`slurm-advisor mode`), kept across restarts in a small state file.

A site that switched to observe mode because something looked wrong must not find the daemon back
in enforce mode after a reboot or a crash: the mode set at run time wins over the config's at the
next start, until `slurm-advisor mode --reset` returns to the config's. The file is one JSON
object, ``{"mode": "observe", "set_at": <epoch s>, "config_mode": "advise"}``, replaced whole
(temporary file, fsync, rename), so a crash leaves the old setting or the new one. The request
loop only hands the new mode to a writer thread (a burst of switches is one write, and a slow
disk never holds up an advice request); `stop` writes what is still pending. It lives in
``mode_file`` (default: beside a SQLite store, ``<db>.mode.json``; with a PostgreSQL store
``/var/lib/slurm-advisor/mode.json``): with the daemon's other durable state, on its own host,
since each daemon has its own mode. No file without a store that outlives the process.
"""
from __future__ import annotations

import json
import logging
import os
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from slurm_advisor.daemon.protocol import MODES

log = logging.getLogger("slurm_advisor.daemon")
_SERVER_MODE_FILE = Path("/var/lib/slurm-advisor/mode.json")  # beside a PostgreSQL store's spool


def mode_file_path(config, store) -> Path | None:
    """Where the mode is kept: the configured file; beside a SQLite file; else under /var/lib;
    none without a store that outlives the process (none, or SQLite in memory)."""
    if config.mode_file is not None:
        return config.mode_file
    if store is None or store.url_for_another_process() is None:
        return None
    db = store.sqlite_file()
    return _SERVER_MODE_FILE if db is None else db.with_name(db.name + ".mode.json")


def serving_mode(config, store) -> str:
    """The mode a daemon with ``config`` and ``store`` serves in: the one kept from run time if any
    (and readable), else the config's. For retrain, which judges a candidate as it will be served."""
    path = mode_file_path(config, store)
    try:
        kept = None if path is None else _read(path)
    except (OSError, ValueError):
        kept = None
    return config.mode if kept is None else kept[0]


class ModeKeeper:
    """Where the daemon's mode comes from: its config, or set at run time and kept in ``path``."""

    def __init__(self, path: Path | None, config_mode: str):
        self.path, self.config_mode = path, config_mode
        self.set_at: float | None = None  # None: the config's mode serves
        self.problem: str | None = None   # why a kept mode was not read, or not kept
        self._wanted: dict[str, Any] | None = None  # the latest switch, not written yet
        self._pending = False
        self._stopping = False
        self._changed = threading.Condition()
        self._thread: threading.Thread | None = None

    def restore(self) -> str:
        """The mode to start in, logged with where it came from: the kept one, else the config's."""
        try:
            kept = None if self.path is None else _read(self.path)
        except (OSError, ValueError) as exc:
            self.problem = f"cannot read {self.path} ({exc}): the config's mode serves"
            log.error("mode %s from the config: %s", self.config_mode, self.problem)
            return self.config_mode
        if kept is None:
            log.info("mode %s from the config", self.config_mode)
            return self.config_mode
        mode, self.set_at = kept
        log.warning("mode %s: set at run time %s and kept in %s, over the config's %s "
                    "(`slurm-advisor mode --reset` returns to it)", mode, _utc(self.set_at), self.path,
                    self.config_mode)
        return mode

    def start(self) -> None:
        if self.path is not None:
            self._thread = threading.Thread(target=self._run, name="mode-keeper", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        """Write what is pending, then end the writer thread."""
        if self._thread is not None:
            with self._changed:
                self._stopping = True
                self._changed.notify()
            self._thread.join()
            self._thread = None

    def keep(self, mode: str | None) -> str | None:
        """Record ``mode`` as set at run time (None: back to the config's), written by the
        writer thread; a warning when it cannot be kept at all."""
        self.set_at = None if mode is None else time.time()
        if self.path is None:
            return None if mode is None else "not kept across a restart: the daemon has no state file " \
                "(set mode_file, or use a durable store)"
        wanted = None if mode is None else {"mode": mode, "set_at": self.set_at, "config_mode": self.config_mode}
        with self._changed:
            self._wanted, self._pending = wanted, True
            self._changed.notify()
        if self._thread is None:  # not started (or stopped): at once, in this thread
            self._write_pending()
        return None

    def flush(self) -> None:
        """Wait until the latest switch is on disk (or failed: ``problem`` says why)."""
        with self._changed:
            self._changed.wait_for(lambda: not self._pending or self._thread is None)

    def info(self) -> dict[str, Any]:
        """What `status` says about the mode's origin."""
        return {"mode_source": "config" if self.set_at is None else "override", "config_mode": self.config_mode,
                "mode_set_at": None if self.set_at is None else _utc(self.set_at),
                "mode_file": None if self.path is None else str(self.path), "mode_problem": self.problem}

    def _run(self) -> None:
        while True:
            with self._changed:
                self._changed.wait_for(lambda: self._pending or self._stopping)
                if not self._pending:
                    return
            self._write_pending()

    def _write_pending(self) -> None:
        with self._changed:
            wanted, pending = self._wanted, self._pending
        if not pending:
            return
        try:
            if wanted is None:
                self.path.unlink(missing_ok=True)
            else:
                _write(self.path, wanted)
            self.problem = None
        except OSError as exc:
            then = "the mode kept before" if wanted is None else "the config's mode"
            self.problem = f"cannot write {self.path} ({exc.strerror or exc}): a restart starts in {then}"
            log.error("mode: %s", self.problem)
        with self._changed:
            self._pending = self._wanted is not wanted  # a newer switch came in meanwhile: again
            self._changed.notify_all()


def _read(path: Path) -> tuple[str, float] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    if not isinstance(data, dict) or data.get("mode") not in MODES or \
            not isinstance(data.get("set_at"), (int, float)):
        raise ValueError(f"expected {{\"mode\": one of {', '.join(MODES)}, \"set_at\": seconds}}")
    return data["mode"], float(data["set_at"])


def _write(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    with tmp.open("w", encoding="utf-8") as f:
        json.dump(data, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(fd)  # the rename itself survives a power loss
    finally:
        os.close(fd)


def _utc(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).isoformat(timespec="seconds")
