"""Speed reports from a training job to the advisor's daemon: never slow, never fatal.

``report(iterations, seconds)`` sends one report now; :class:`Reporter` counts iterations in a
training loop and reports every ``every`` of them from a background thread. Both find the job in
``SLURM_JOB_ID`` and the daemon at ``SLURM_ADVISOR_REPORT_ADDRESS`` (``host:port``: the daemon's
report port, for jobs on other hosts than the daemon's; the report travels signed with MUNGE,
which every Slurm node runs) or else at ``SLURM_ADVISOR_SOCKET`` (else the daemon's default
socket), and swallow every error: outside Slurm, with the daemon away or refusing, nothing
happens. No torch here: any Python training loop may import it.
"""
from __future__ import annotations

import os
import threading
import time
from pathlib import Path

DEFAULT_SOCKET = Path("/run/slurm-advisor/advisor.sock")  # as DaemonConfig.socket
TIMEOUT_S = 0.5


def socket_path(socket: Path | str | None = None) -> Path:
    return Path(socket or os.environ.get("SLURM_ADVISOR_SOCKET") or DEFAULT_SOCKET)


def report_address(address: str | None = None) -> tuple[str, int] | None:
    """(host, port) from ``address`` or ``SLURM_ADVISOR_REPORT_ADDRESS``; None when neither is set."""
    text = address or os.environ.get("SLURM_ADVISOR_REPORT_ADDRESS")
    if not text:
        return None
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"report address {text!r} is not host:port")
    return host.strip("[]"), int(port)


def send(iterations: float, seconds: float, *, job_id: str | None = None, socket: Path | str | None = None,
         address: str | None = None, timeout_s: float = TIMEOUT_S) -> str | None:
    """Report once; None when the daemon took it, else why not (one line). With a report
    address (``address`` or ``SLURM_ADVISOR_REPORT_ADDRESS``) the report goes there over TCP,
    signed with MUNGE; else to the daemon's Unix socket."""
    from slurm_advisor.daemon import munge, protocol
    from slurm_advisor.daemon.client import DaemonUnavailable, call

    job = job_id or os.environ.get("SLURM_JOB_ID")
    if not job:
        return "no job id: not inside a Slurm job and no --job-id given"
    fields = {"job_id": str(job), "iterations": iterations, "seconds": seconds}
    try:
        remote = report_address(address)
        if remote is None:
            reply = call(socket_path(socket), "report", timeout_s=timeout_s, **fields)
        else:
            signed = munge.encode(protocol.encode({"op": "report", **fields}).rstrip(b"\n"))
            reply = call(remote, "report", timeout_s=timeout_s, credential=signed)
    except (DaemonUnavailable, munge.MungeError, OSError, ValueError) as exc:  # ValueError: NaN is not JSON
        return str(exc)
    return None if reply.get("ok") else str(reply.get("error", "refused"))


def report(iterations: float, seconds: float, **where) -> bool:
    """Send one report now (``job_id=``, ``socket=``, ``timeout_s=`` optional); True when stored."""
    try:
        return send(iterations, seconds, **where) is None
    except Exception:  # noqa: BLE001 -- a report must never fail the job
        return False


class Reporter:
    """``reporter.step()`` once per iteration; every ``every`` steps the iterations and seconds
    since the last accepted report go to the daemon from a background thread, at most one in
    flight (steps meanwhile count towards the next). A refused or lost report's window is kept."""

    def __init__(self, every: int = 50, *, job_id: str | None = None, socket: Path | str | None = None,
                 address: str | None = None, timeout_s: float = TIMEOUT_S):
        self.every = max(1, int(every))
        self.job_id = job_id or os.environ.get("SLURM_JOB_ID")
        self.socket, self.address, self.timeout_s = socket, address, timeout_s
        self.sent = 0       # reports the daemon took
        self._lock = threading.Lock()
        self._iterations = 0
        self._since = time.monotonic()
        self._unsent = 0    # steps since the last attempt
        self._busy = False

    def step(self, iterations: int = 1) -> None:
        """Count ``iterations`` done; start a report when ``every`` have passed and none is in flight."""
        if not self.job_id:
            return
        with self._lock:
            self._iterations += iterations
            self._unsent += iterations
            if self._unsent < self.every or self._busy:
                return
            self._busy, self._unsent = True, 0
            window = (self._iterations, time.monotonic())
        threading.Thread(target=self._send, args=window, name="slurm-advisor-report", daemon=True).start()

    def flush(self, timeout_s: float | None = None) -> bool:
        """Report what is not reported yet, in this thread (at the end of training); True when stored."""
        deadline = time.monotonic() + (timeout_s if timeout_s is not None else 2 * self.timeout_s)
        while True:
            with self._lock:
                if not self._busy:
                    self._busy = True
                    window = (self._iterations, time.monotonic())
                    break
            if time.monotonic() > deadline:
                return False
            time.sleep(0.01)
        return self._send(*window) if window[0] else self._done(True)  # nothing left to report

    def _send(self, iterations: int, now: float) -> bool:
        ok = report(iterations, max(now - self._since, 1e-6), job_id=self.job_id, socket=self.socket,
                    address=self.address, timeout_s=self.timeout_s)
        with self._lock:
            if ok:
                self._iterations -= iterations
                self._since = now
                self.sent += 1
        return self._done(ok)

    def _done(self, ok: bool) -> bool:
        with self._lock:
            self._busy = False
        return ok
