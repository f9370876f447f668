"""What one peer may cost the daemon: connections per peer and in total (fitted to the process's
file descriptor limit), and a log that says once per interval what a peer repeats at will.

The server loop (daemon/server.py) asks :class:`Admission` before it keeps a connection and logs
refusals through :class:`RateLimitedLog`; both are plain objects with no sockets, so they are
tested alone. Only :func:`fd_fitted` touches the process (getrlimit/setrlimit).
"""
from __future__ import annotations

import logging
import math
import resource
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

# Unsent reply bytes at which the server stops reading a connection until it drains: a client
# that never reads its replies costs this, not the 600 MB in 20 s it used to.
MAX_BACKLOG = 64 * 1024
# File descriptors the daemon holds beside its connections: listeners, the store, the log, the
# writer processes' pipes, the metrics port, Python's own. Measured ~30; twice that and more.
FD_HEADROOM = 96
MIN_CONNECTIONS = 16
LOG_INTERVAL_S = 10.0


@dataclass(frozen=True)
class ConnectionLimits:
    """At most ``total`` connections at once, ``per_peer`` of them from one unprivileged peer
    (a uid on the Unix socket, an address on the report port)."""

    total: int = 1024
    per_peer: int = 64

    @property
    def reserved(self) -> int:
        """Connections only root and the Slurm user may take: the hook (slurmctld's user) still
        gets through when every other user holds all its quota."""
        return max(2, self.total // 8)


class Admission:
    """Counts open connections per peer and says whether one more may open."""

    def __init__(self, limits: ConnectionLimits):
        self.limits = limits
        self.open = 0
        self._per_peer: dict[str, int] = {}

    def admit(self, peer: str | None) -> str | None:
        """Count a new connection from ``peer`` (None: root or the Slurm user) and return None,
        or return why it may not open (and count nothing)."""
        limits = self.limits
        if self.open >= limits.total:
            return f"{self.open} connections open (max_connections {limits.total})"
        if peer is not None:
            if self.open >= limits.total - limits.reserved:
                return (f"{self.open} connections open; the last {limits.reserved} of max_connections "
                        f"{limits.total} are kept for root and the Slurm user")
            held = self._per_peer.get(peer, 0)
            if held >= limits.per_peer:
                return f"{peer} holds {held} connections (max_connections_per_uid {limits.per_peer})"
            self._per_peer[peer] = held + 1
        self.open += 1
        return None

    def release(self, peer: str | None) -> None:
        """A connection admitted for ``peer`` closed."""
        self.open -= 1
        if peer is not None:
            held = self._per_peer.pop(peer) - 1
            if held:
                self._per_peer[peer] = held


def connections_within(wanted: int, soft: int, hard: int) -> tuple[int, int]:
    """(connections the fd limit leaves room for, the soft fd limit that needs): the soft limit
    is raised as far as the hard one allows; what is still missing comes off the connections."""
    soft = math.inf if soft == resource.RLIM_INFINITY else soft
    hard = math.inf if hard == resource.RLIM_INFINITY else hard
    need = wanted + FD_HEADROOM
    new_soft = soft if soft >= need else min(need, hard)
    allowed = min(wanted, max(MIN_CONNECTIONS, int(min(new_soft, need)) - FD_HEADROOM))
    return allowed, (resource.RLIM_INFINITY if new_soft == math.inf else int(new_soft))


def fd_fitted(limits: ConnectionLimits, log: logging.Logger) -> ConnectionLimits:
    """``limits`` with a total the process's RLIMIT_NOFILE can hold, raising the soft limit up to
    the hard one when needed; a lowered total is logged (systemd: raise ``LimitNOFILE``)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    allowed, new_soft = connections_within(limits.total, soft, hard)
    if new_soft != soft:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (new_soft, hard))
            log.info("raised the soft file descriptor limit from %d to %d for max_connections %d",
                     soft, new_soft, limits.total)
        except (ValueError, OSError) as exc:
            allowed, _ = connections_within(limits.total, soft, soft)
            log.warning("cannot raise the soft file descriptor limit from %d: %s", soft, exc)
    if allowed < limits.total:
        log.warning("max_connections lowered from %d to %d: the file descriptor limit is %d (hard %d); "
                    "raise it (systemd: LimitNOFILE) to serve more at once", limits.total, allowed,
                    resource.getrlimit(resource.RLIMIT_NOFILE)[0], hard)
    return replace(limits, total=allowed, per_peer=min(limits.per_peer, allowed))


class RateLimitedLog:
    """Logs an event a peer can repeat at will at most once per ``interval_s``: the first at once,
    the others counted and summed up in the next line (``...; 15,602 more in the last 10 s``).

    :meth:`flush`, called from time to time, writes the line for events held back when no new
    one comes after the interval."""

    def __init__(self, logger: logging.Logger, level: int, interval_s: float = LOG_INTERVAL_S,
                 clock: Callable[[], float] = time.monotonic):
        self._logger, self._level, self._interval_s, self._clock = logger, level, interval_s, clock
        self._last_line_at = -math.inf
        self._held = 0
        self._latest: tuple[str, tuple] = ("", ())

    def __call__(self, message: str, *args: object) -> None:
        now = self._clock()
        if now - self._last_line_at < self._interval_s:
            self._held += 1
            self._latest = (message, args)  # formatted only if it is the one written
            return
        self._write(message, args, self._held, now)

    def flush(self) -> None:
        now = self._clock()
        if self._held and now - self._last_line_at >= self._interval_s:
            self._write(*self._latest, self._held - 1, now)

    def _write(self, message: str, args: tuple, more: int, now: float) -> None:
        if more:
            message += f"; {more:,} more in the last {now - self._last_line_at:.0f} s"
        self._logger.log(self._level, message, *args)
        self._last_line_at, self._held = now, 0
