"""The Unix-socket server: an event loop, one JSON line per request (docs/protocol.md).

Who may do what is decided by the peer's credentials (SO_PEERCRED), never by anything it sends.
A connection that sends nothing is dropped after ``client_timeout_s`` and blocks nobody. Bad
bytes get an error reply; the daemon keeps serving.

Optionally the same loop listens on a TCP port for speed reports from jobs on other hosts
(``report_port``). A TCP peer has no credentials the kernel vouches for, so it may send one
thing only: a ``report`` whose fields travel inside a MUNGE credential (``daemon/munge.py``),
and the credential's uid decides, as the peer's uid does on the local socket.
"""
from __future__ import annotations

import logging
import os
import selectors
import socket
import stat
import struct
import threading
import time
from pathlib import Path
from typing import Any

from slurm_advisor.daemon import munge, protocol
from slurm_advisor.daemon.protocol import ProtocolError
from slurm_advisor.daemon.ready import TAKEN_SUFFIX, taken_path

log = logging.getLogger("slurm_advisor.daemon")
_CRED = struct.Struct("3i")  # struct ucred: pid, uid, gid


def peer_uid(sock: socket.socket) -> int:
    _pid, uid, _gid = _CRED.unpack(sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _CRED.size))
    return uid


_SCM_CREDENTIALS = getattr(socket, "SCM_CREDENTIALS", 2)
_CMSG_CRED = socket.CMSG_SPACE(_CRED.size)


def _taken_socket(path: Path) -> socket.socket:
    """Bound after the stream socket, whose check found no other live daemon: a socket left at
    ``path`` is a previous run's."""
    try:
        if not stat.S_ISSOCK(os.lstat(path).st_mode):
            raise OSError(f"{path} exists and is not a socket; refusing to replace it")
        os.unlink(path)
    except FileNotFoundError:
        pass
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)  # each datagram carries its sender's uid
        sock.bind(str(path))
        os.chmod(path, 0o666)  # anyone may send; only root's and the Slurm user's datagrams count
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
    except OSError:
        sock.close()
        raise
    sock.setblocking(False)
    return sock


REMOTE = None  # the uid of a TCP peer: nobody the kernel vouches for (only signed reports are taken)


class _Connection:
    __slots__ = ("deadline", "inbox", "outbox", "sock", "uid")

    def __init__(self, sock: socket.socket, uid: int | None, deadline: float):
        self.sock, self.uid, self.deadline = sock, uid, deadline
        self.inbox = bytearray()
        self.outbox = bytearray()


class AdvisorServer:
    """A single-threaded event loop over non-blocking sockets (selectors).

    One thread per connection cost ~1 ms a request on 2 cores, and requests must be handled one at
    a time anyway (claims: each decision sees the ones before it), so the loop itself calls the
    dispatcher. A connection is closed when it has been silent for ``client_timeout_s``, so clients
    that connect and send nothing cost a file descriptor each, never another client's time.
    """

    def __init__(self, path: Path, dispatcher, client_timeout_s: float,
                 report_listen: tuple[str, int] | None = None, taken: bool = False):
        self.dispatcher = dispatcher
        self.client_timeout_s = client_timeout_s
        self.server_address = str(path)
        prepare_socket_path(path)
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self._listener.bind(str(path))
            os.chmod(path, 0o666)  # anyone may connect; what each peer may ask is checked per request
            # A full backlog makes a non-blocking connect (the hook's, with its timeout) fail at once
            # with EAGAIN: leave room for a burst of submissions.
            self._listener.listen(1024)
        except OSError:
            self._listener.close()
            raise
        self._listener.setblocking(False)
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._listener, selectors.EVENT_READ, None)
        self._reports = None if report_listen is None else _tcp_listener(report_listen, self._listener)
        self.report_address = None if self._reports is None else self._reports.getsockname()[:2]
        if self._reports is not None:
            self._selector.register(self._reports, selectors.EVENT_READ, "tcp")
        # The hook's notes that it used a ready answer (daemon/ready.py): datagrams, read before
        # any request is answered, so every answer counts the ones the hook used before it.
        self._taken = _taken_socket(taken_path(path)) if taken else None
        if self._taken is not None:
            self._selector.register(self._taken, selectors.EVENT_READ, "taken")
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._selector.register(self._wake_r, selectors.EVENT_READ, "wake")
        self._connections: dict[int, _Connection] = {}
        self._stopping = threading.Event()
        self._stopped = threading.Event()

    def serve_forever(self, poll_interval: float = 0.2) -> None:
        self._stopped.clear()
        try:
            while not self._stopping.is_set():
                for key, events in self._selector.select(timeout=poll_interval):
                    if key.data is None:
                        self._accept(self._listener)
                    elif key.data == "tcp":
                        self._accept(self._reports)
                    elif key.data == "wake":
                        self._wake_r.recv(64)
                    elif key.data == "taken":
                        self.read_taken()
                    else:
                        self._service(key.data, events)
                self._expire(time.monotonic())
        finally:
            self._stopped.set()

    def shutdown(self) -> None:
        """Stop serve_forever (from any thread, or a signal handler) and wait for it."""
        self._stopping.set()
        try:
            self._wake_w.send(b"x")
        except OSError:
            pass
        self._stopped.wait(timeout=10)

    def server_close(self) -> None:
        for conn in list(self._connections.values()):
            self._close(conn)
        for sock in (self._listener, self._reports, self._taken, self._wake_r, self._wake_w):
            if sock is not None:
                sock.close()
        self._selector.close()
        for path in (self.server_address, str(taken_path(Path(self.server_address)))):
            try:
                os.unlink(path)
            except OSError:
                pass

    def read_taken(self) -> None:
        """Hand every queued datagram to the dispatcher, with the sender's uid (SO_PASSCRED)."""
        if self._taken is None:
            return
        for _ in range(1024):
            try:
                data, ancillary, _flags, _addr = self._taken.recvmsg(protocol.MAX_LINE + 1, _CMSG_CRED)
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                log.error("reading the taken socket: %s", exc)
                return
            uid = next((_CRED.unpack(d[:_CRED.size])[1] for level, kind, d in ancillary
                        if level == socket.SOL_SOCKET and kind == _SCM_CREDENTIALS), None)
            self.dispatcher.taken(data, uid)

    # -- the loop's steps -------------------------------------------------------------------
    def _accept(self, listener: socket.socket) -> None:
        for _ in range(64):  # a burst: accept what is queued, then serve
            try:
                sock, _ = listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:  # e.g. out of file descriptors: log, keep serving the others
                log.error("accept failed: %s", exc)
                return
            sock.setblocking(False)
            uid = REMOTE if listener is self._reports else peer_uid(sock)
            conn = _Connection(sock, uid, time.monotonic() + self.client_timeout_s)
            self._connections[sock.fileno()] = conn
            self._selector.register(sock, selectors.EVENT_READ, conn)
            # The hook sends its line right after connecting: it is often here already, and
            # reading now saves a trip round the loop.
            self._service(conn, selectors.EVENT_READ)

    def _service(self, conn: _Connection, events: int) -> None:
        if events & selectors.EVENT_WRITE and not self._flush(conn):
            return
        if events & selectors.EVENT_READ:
            try:
                data = conn.sock.recv(65536)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                data = b""
            if not data:
                self._close(conn)
                return
            conn.inbox += data
            conn.deadline = time.monotonic() + self.client_timeout_s
            self._answer(conn)

    def _answer(self, conn: _Connection) -> None:
        """Answer every complete line in the inbox; an over-long one gets its error and the close."""
        while True:
            end = conn.inbox.find(b"\n")
            if end < 0:
                if len(conn.inbox) > protocol.MAX_LINE:
                    self._reply(conn, bytes(conn.inbox), close=True)
                return
            line = bytes(conn.inbox[:end])
            del conn.inbox[:end + 1]
            self.read_taken()
            if not self._reply(conn, line):
                return

    def _reply(self, conn: _Connection, line: bytes, close: bool = False) -> bool:
        reply, keep_open = self.dispatcher.reply_to(line, conn.uid)
        conn.outbox += reply
        if not self._flush(conn):
            return False
        if close or not keep_open:
            self._close(conn)
            return False
        return True

    def _flush(self, conn: _Connection) -> bool:
        """Send what is queued; False when the connection is gone."""
        try:
            sent = conn.sock.send(conn.outbox) if conn.outbox else 0
        except (BlockingIOError, InterruptedError):
            sent = 0
        except OSError:
            self._close(conn)
            return False
        del conn.outbox[:sent]
        mask = selectors.EVENT_READ | (selectors.EVENT_WRITE if conn.outbox else 0)
        self._selector.modify(conn.sock, mask, conn)
        return True

    def _expire(self, now: float) -> None:
        for conn in [c for c in self._connections.values() if c.deadline <= now]:
            self._close(conn)

    def _close(self, conn: _Connection) -> None:
        if self._connections.pop(conn.sock.fileno(), None) is not None:
            self._selector.unregister(conn.sock)
        conn.sock.close()


def _tcp_listener(address: tuple[str, int], unix: socket.socket) -> socket.socket:
    host, port = address
    try:
        sock = socket.create_server((host, port), family=socket.AF_INET6 if ":" in host else socket.AF_INET,
                                    backlog=1024)
    except OSError:
        path = unix.getsockname()
        unix.close()
        os.unlink(path)  # bound a moment ago: nobody else's
        raise
    sock.setblocking(False)
    return sock


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

    def __init__(self, daemon, admin_uids: frozenset[int], munge_socket: str | None = None):
        self.daemon = daemon
        self.admin_uids = admin_uids
        self.munge_socket = munge_socket

    def taken(self, data: bytes, uid: int | None) -> None:
        """A datagram from the hook: it used a ready answer. No reply (the hook does not wait);
        anything wrong is counted and logged."""
        try:
            request = protocol.decode_request(data.rstrip(b"\n"))
            if request["op"] != "taken":
                raise ProtocolError(f"the taken socket takes op 'taken' only, not {request['op']!r}")
            if uid is None or (uid != 0 and uid not in self.admin_uids):
                raise ProtocolError(f"taken: uid {uid} is neither root nor the Slurm user")
        except ProtocolError as exc:
            self.daemon.state.counters.ready_refused += 1
            log.warning("ready answer note refused: %s", exc)
            return
        try:
            self.daemon.taken(request)
        except Exception:  # a bug must cost one note, not the daemon
            log.exception("ready answer note failed")
            self.daemon.state.counters.errors += 1

    def reply_to(self, line: bytes, uid: int | None) -> tuple[bytes, bool]:
        """(reply line, keep the connection open)."""
        started = time.perf_counter()
        try:
            request = protocol.decode_request(line.rstrip(b"\n"))
        except ProtocolError as exc:
            self.daemon.state.counters.errors += 1
            return protocol.error_reply(str(exc)), False
        try:
            if uid is REMOTE:
                request, uid = self._signed(request)
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

    def _signed(self, request: dict[str, Any]) -> tuple[dict[str, Any], int]:
        """A TCP peer's request: a ``report`` whose fields are the payload of a MUNGE credential;
        (those fields, the uid that made the credential)."""
        credential = request.get("credential")
        if request["op"] != "report" or not isinstance(credential, str):
            raise ProtocolError("over TCP the daemon takes only speed reports signed with MUNGE "
                                "(op report with a credential)")
        try:
            uid, payload = munge.decode(credential, self.munge_socket)
        except munge.MungeError as exc:
            raise ProtocolError(f"report: {exc}") from None
        inner = protocol.decode_request(payload)
        if inner["op"] != "report":
            raise ProtocolError(f"report: the credential carries op {inner['op']!r}, not a report")
        return inner, uid

    def _handle(self, request: dict[str, Any], uid: int) -> dict[str, Any]:
        op = request["op"]
        if op in ("advise", "mode") and uid != 0 and uid not in self.admin_uids:
            raise ProtocolError(f"{op}: uid {uid} is neither root nor the Slurm user")
        if op == "advise":
            return self.daemon.advise(request.get("job"), request.get("ready_key"))
        if op == "taken":
            raise ProtocolError(f"taken: send it as a datagram to {TAKEN_SUFFIX}, not over this socket")
        if op == "mode":
            return self.daemon.switch_mode(request.get("mode"))
        if op == "health":
            return self.daemon.health()
        if op == "status":
            return self.daemon.status()
        return self.daemon.report(request, uid)  # op is one of protocol.OPS: report


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
