"""The Unix-socket server: one thread per connection, one JSON line per request (docs/protocol.md).

Who may do what is decided by the peer's credentials (SO_PEERCRED), never by anything it sends.
A connection that sends nothing is dropped after ``client_timeout_s`` and holds only its own
thread, so it cannot block others. Bad bytes get an error reply; the daemon keeps serving.
"""
from __future__ import annotations

import logging
import os
import socket
import socketserver
import stat
import struct
import threading
import time
from pathlib import Path
from typing import Any

from slurm_advisor.daemon import protocol
from slurm_advisor.daemon.protocol import ProtocolError

log = logging.getLogger("slurm_advisor.daemon")
_CRED = struct.Struct("3i")  # struct ucred: pid, uid, gid


def peer_uid(sock: socket.socket) -> int:
    _pid, uid, _gid = _CRED.unpack(sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _CRED.size))
    return uid


class _Handler(socketserver.StreamRequestHandler):
    server: AdvisorServer

    def handle(self) -> None:
        self.connection.settimeout(self.server.client_timeout_s)
        uid = peer_uid(self.connection)
        while True:
            try:
                line = self.rfile.readline(protocol.MAX_LINE + 1)
            except (TimeoutError, OSError):
                return
            if not line:
                return
            reply, keep_open = self.server.dispatcher.reply_to(line, uid)
            try:
                self.wfile.write(reply)
                self.wfile.flush()
            except OSError:
                return
            if not keep_open:
                return


class AdvisorServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True  # a stuck client never keeps the daemon from exiting
    allow_reuse_address = False
    # A full backlog makes a non-blocking connect (the hook's, with its timeout) fail at once with
    # EAGAIN: leave room for a burst of submissions and for silent clients not yet accepted.
    request_queue_size = 1024

    def __init__(self, path: Path, dispatcher, client_timeout_s: float):
        self.dispatcher = dispatcher
        self.client_timeout_s = client_timeout_s
        prepare_socket_path(path)
        super().__init__(str(path), _Handler)
        os.chmod(path, 0o666)  # anyone may connect; what each peer may ask is checked per request

    def server_close(self) -> None:
        super().server_close()
        try:
            os.unlink(self.server_address)
        except OSError:
            pass


def prepare_socket_path(path: Path) -> None:
    """Make the directory; remove a stale socket, but never a live daemon's or a non-socket file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(mode):
        raise OSError(f"{path} exists and is not a socket; refusing to replace it")
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(1.0)
    try:
        probe.connect(str(path))
    except OSError:
        os.unlink(path)  # nobody listens: stale
        return
    finally:
        probe.close()
    raise OSError(f"another daemon already listens on {path}")


class Dispatcher:
    """Decodes one request line, checks who may send it, hands it to the daemon's handlers."""

    def __init__(self, daemon, admin_uids: frozenset[int]):
        self.daemon = daemon
        self.admin_uids = admin_uids

    def reply_to(self, line: bytes, uid: int) -> tuple[bytes, bool]:
        """(reply line, keep the connection open)."""
        started = time.perf_counter()
        try:
            request = protocol.decode_request(line.rstrip(b"\n"))
        except ProtocolError as exc:
            self.daemon.state.counters.errors += 1
            return protocol.error_reply(str(exc)), False
        try:
            reply = self._handle(request, uid)
        except ProtocolError as exc:
            self.daemon.state.counters.errors += 1
            return protocol.error_reply(str(exc)), True
        except Exception:  # a bug must cost one reply, not the daemon
            log.exception("request %r failed", request.get("op"))
            self.daemon.state.counters.errors += 1
            return protocol.error_reply("internal error; see the daemon's log"), True
        log.debug("%s from uid %d in %.2f ms", request["op"], uid, (time.perf_counter() - started) * 1e3)
        return protocol.encode(reply), True

    def _handle(self, request: dict[str, Any], uid: int) -> dict[str, Any]:
        op = request["op"]
        if op in ("advise", "mode") and uid != 0 and uid not in self.admin_uids:
            raise ProtocolError(f"{op}: uid {uid} is neither root nor the Slurm user")
        if op == "advise":
            return self.daemon.advise(request.get("job"))
        if op == "mode":
            return self.daemon.switch_mode(request.get("mode"))
        if op == "health":
            return self.daemon.health()
        if op == "status":
            return self.daemon.status()
        raise ProtocolError(f"{op}: not served by this daemon yet")


class ServerThread:
    """Runs an AdvisorServer in a thread (tests and benchmarks; `serve` runs it in the main thread)."""

    def __init__(self, server: AdvisorServer):
        self.server = server
        self._thread = threading.Thread(target=server.serve_forever, name="advisor-server", daemon=True)

    def __enter__(self) -> AdvisorServer:
        self._thread.start()
        return self.server

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
        self._thread.join(timeout=10)
