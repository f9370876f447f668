"""The Unix-socket server: an event loop, one JSON line per request (docs/protocol.md).

Who may do what is decided by the peer's credentials (SO_PEERCRED), never by anything it sends.
Bad bytes get an error reply; the daemon keeps serving. What a peer may cost is bounded
(``daemon/limits.py``): each request line must arrive whole within ``client_timeout_s`` of the
connection or of the previous reply (so a silent or trickling client is dropped then and blocks
nobody); a connection whose unsent replies pass ``MAX_BACKLOG`` is not read until they drain,
and dropped at its deadline if they do not; connections are counted per peer and in total, with
room kept for root and the Slurm user; refusals and failures are logged once per interval.

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
import threading
import time
from contextlib import suppress
from pathlib import Path
from typing import Any

from slurm_advisor.daemon import munge, protocol, sockets
from slurm_advisor.daemon.limits import MAX_BACKLOG, Admission, ConnectionLimits, RateLimitedLog, fd_fitted
from slurm_advisor.daemon.protocol import ProtocolError
from slurm_advisor.daemon.ready import TAKEN_SUFFIX, taken_path

log = logging.getLogger("slurm_advisor.daemon")
REMOTE = None  # the uid of a TCP peer: nobody the kernel vouches for (only signed reports are taken)
_SWEEP_S = 0.05  # how often deadlines are checked: a scan of every connection, not once per request
_ACCEPT_PAUSE_S = 0.1  # a listener whose accept failed rests this long instead of waking the loop at once
_LINES_PER_TURN = 16  # a pipelining client's lines answered before the other clients get a turn


class _Connection:
    __slots__ = ("deadline", "inbox", "mask", "more", "outbox", "peer", "sock", "uid")

    def __init__(self, sock: socket.socket, uid: int | None, peer: str | None, deadline: float):
        self.sock, self.uid, self.peer, self.deadline = sock, uid, peer, deadline
        self.inbox = bytearray()
        self.outbox = bytearray()
        self.mask = selectors.EVENT_READ
        self.more = False  # complete lines wait in the inbox: not read further until they are answered


class AdvisorServer:
    """A single-threaded event loop over non-blocking sockets (selectors).

    One thread per connection cost ~1 ms a request on 2 cores, and requests must be handled one at
    a time anyway (claims: each decision sees the ones before it), so the loop itself calls the
    dispatcher. A connection is closed when no request line arrived whole ``client_timeout_s`` after
    it opened or after its previous reply, so clients that connect and send nothing (or a byte at a
    time) cost a file descriptor each for that long, never another client's time.
    """

    def __init__(self, path: Path, dispatcher, client_timeout_s: float,
                 report_listen: tuple[str, int] | None = None, taken: bool = False,
                 limits: ConnectionLimits | None = None):
        self.dispatcher = dispatcher
        self.client_timeout_s = client_timeout_s
        self.limits = fd_fitted(limits or ConnectionLimits(), log)
        self._admission = Admission(self.limits)
        self._counters = dispatcher.daemon.state.counters
        self._refused = RateLimitedLog(log, logging.WARNING)
        self._dropped = RateLimitedLog(log, logging.INFO)
        self._accept_failed = RateLimitedLog(log, logging.ERROR)
        self._taken_refused = RateLimitedLog(log, logging.WARNING)
        self._resting: dict[socket.socket, float] = {}  # listeners whose accept failed -> when to retry
        self._next_sweep = 0.0
        self._turns: dict[_Connection, None] = {}  # connections with lines left after their turn, in order
        self.server_address = str(path)
        sockets.prepare_socket_path(path)
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
        self._reports = None if report_listen is None else sockets.tcp_listener(report_listen, self._listener)
        self.report_address = None if self._reports is None else self._reports.getsockname()[:2]
        if self._reports is not None:
            self._selector.register(self._reports, selectors.EVENT_READ, "tcp")
        # The hook's notes that it used a ready answer (daemon/ready.py): datagrams, read before
        # any request is answered, so every answer counts the ones the hook used before it.
        self._taken = sockets.taken_socket(taken_path(path)) if taken else None
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
                for key, events in self._selector.select(timeout=0 if self._turns else poll_interval):
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
                self._take_turns()
                now = time.monotonic()
                if now >= self._next_sweep:
                    self._sweep(now)
        finally:
            self._stopped.set()

    def shutdown(self) -> None:
        """Stop serve_forever (from any thread, or a signal handler) and wait for it."""
        self._stopping.set()
        with suppress(OSError):
            self._wake_w.send(b"x")
        self._stopped.wait(timeout=10)

    def server_close(self) -> None:
        for conn in list(self._connections.values()):
            self._close(conn)
        for sock in (self._listener, self._reports, self._taken, self._wake_r, self._wake_w):
            if sock is not None:
                sock.close()
        self._selector.close()
        for path in (self.server_address, str(taken_path(Path(self.server_address)))):
            with suppress(OSError):
                os.unlink(path)

    def read_taken(self) -> None:
        """Hand every queued datagram to the dispatcher, with the sender's uid (SO_PASSCRED)."""
        if self._taken is None:
            return
        for _ in range(1024):
            try:
                data, ancillary, _flags, _addr = self._taken.recvmsg(protocol.MAX_LINE + 1, sockets.CREDENTIALS_SPACE)
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                log.error("reading the taken socket: %s", exc)
                return
            refused = self.dispatcher.taken(data, sockets.sender_uid(ancillary))
            if refused is not None:
                self._taken_refused("ready answer note refused: %s", refused)

    # -- the loop's steps -------------------------------------------------------------------
    def _accept(self, listener: socket.socket) -> None:
        for _ in range(64):  # a burst: accept what is queued, then serve
            try:
                sock, address = listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:  # e.g. out of file descriptors: keep serving the others
                self._rest(listener, exc)
                return
            if listener is self._reports:
                uid, peer = REMOTE, f"address {address[0]}"
            else:
                uid = sockets.peer_uid(sock)
                peer = None if self.dispatcher.privileged(uid) else f"uid {uid}"
            refused = self._admission.admit(peer)
            if refused is not None:
                self._refuse(sock, refused)
                continue
            sock.setblocking(False)
            conn = _Connection(sock, uid, peer, time.monotonic() + self.client_timeout_s)
            self._connections[sock.fileno()] = conn
            self._selector.register(sock, selectors.EVENT_READ, conn)
            # The hook sends its line right after connecting: it is often here already, and
            # reading now saves a trip round the loop.
            self._service(conn, selectors.EVENT_READ)

    def _refuse(self, sock: socket.socket, reason: str) -> None:
        """Over a limit: one error line and the close, at once (never left in the listen backlog)."""
        self._counters.connections_refused += 1
        self._refused("connection refused: %s", reason)
        sock.setblocking(False)
        with suppress(OSError):  # nothing sent yet (EAGAIN); a close on unread bytes would reset the connection
            sock.recv(protocol.MAX_LINE)
        with suppress(OSError):  # the peer is gone
            sock.send(protocol.error_reply(f"too many connections: {reason}"))
        sock.close()

    def _rest(self, listener: socket.socket, exc: OSError) -> None:
        """An accept failed: the queued connection keeps the listener readable, and retrying at
        once would spin the loop (EMFILE) and flood the log. It rests a moment instead."""
        self._counters.accept_failures += 1
        self._accept_failed("accept failed: %s; not accepting for %.1f s", exc, _ACCEPT_PAUSE_S)
        if listener not in self._resting:
            self._selector.unregister(listener)
            self._resting[listener] = time.monotonic() + _ACCEPT_PAUSE_S

    def _service(self, conn: _Connection, events: int) -> None:
        if events & selectors.EVENT_WRITE:
            if not self._flush(conn):
                return
            if conn.more and len(conn.outbox) <= MAX_BACKLOG and not self._answer(conn):
                return  # lines held back while the replies backed up: answered now
        if events & selectors.EVENT_READ and not conn.more and len(conn.outbox) <= MAX_BACKLOG:
            try:
                data = conn.sock.recv(65536)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                data = b""
            if not data:
                self._close(conn)
                return
            conn.inbox += data  # no new deadline: a request must arrive whole, not a byte in time
            self._answer(conn)

    def _answer(self, conn: _Connection) -> bool:
        """Answer the complete lines in the inbox, a turn's worth and while the replies do not
        back up; the rest waits for the connection's next turn (one pipelined burst must not hold
        the hook's request up). An over-long line gets its error and the close. False when the
        connection is gone."""
        for _ in range(_LINES_PER_TURN):
            if len(conn.outbox) > MAX_BACKLOG:
                break
            end = conn.inbox.find(b"\n")
            if end < 0:
                if len(conn.inbox) > protocol.MAX_LINE:
                    return self._reply(conn, bytes(conn.inbox), close=True)
                break
            line = bytes(conn.inbox[:end])
            del conn.inbox[:end + 1]
            self.read_taken()
            if not self._reply(conn, line):
                return False
        conn.more = b"\n" in conn.inbox
        if conn.more and len(conn.outbox) <= MAX_BACKLOG:
            self._turns[conn] = None
        return self._flush(conn)

    def _take_turns(self) -> None:
        """Another turn for each connection that had lines left after its last one."""
        turns, self._turns = self._turns, {}
        for conn in turns:
            if self._connections.get(conn.sock.fileno()) is conn:
                self._answer(conn)

    def _reply(self, conn: _Connection, line: bytes, close: bool = False) -> bool:
        """Queue the reply to ``line``; False when the connection is closed after it."""
        reply, keep_open = self.dispatcher.reply_to(line, conn.uid)
        conn.outbox += reply
        conn.deadline = time.monotonic() + self.client_timeout_s  # for the next request, or the drain
        if close or not keep_open:
            if self._flush(conn):
                self._close(conn)
            return False
        return True

    def _flush(self, conn: _Connection) -> bool:
        """Send what is queued; False when the connection is gone. A connection whose unsent
        replies pass MAX_BACKLOG is not read until they drain: a client that never reads its
        replies cannot make the daemon hold more of them."""
        try:
            sent = conn.sock.send(conn.outbox) if conn.outbox else 0
        except (BlockingIOError, InterruptedError):
            sent = 0
        except OSError:
            self._close(conn)
            return False
        del conn.outbox[:sent]
        mask = ((selectors.EVENT_WRITE if conn.outbox else 0)
                | (selectors.EVENT_READ if len(conn.outbox) <= MAX_BACKLOG and not conn.more else 0)
                or selectors.EVENT_READ)  # waiting for its turn, nothing to send: registered, not read
        if mask != conn.mask:
            conn.mask = mask
            self._selector.modify(conn.sock, mask, conn)
        return True

    def _sweep(self, now: float) -> None:
        """Drop the connections past their deadline, put rested listeners back, write the log
        lines held back."""
        self._next_sweep = now + _SWEEP_S
        for conn in [c for c in self._connections.values() if c.deadline <= now]:
            if conn.inbox or conn.outbox:
                self._counters.connections_dropped += 1
                self._dropped("dropped a connection of %s: %s within %g s", conn.peer or f"uid {conn.uid}",
                              "its replies were not read" if conn.outbox else "no complete request",
                              self.client_timeout_s)
            self._close(conn)
        for listener, until in list(self._resting.items()):
            if until <= now:
                del self._resting[listener]
                self._selector.register(listener, selectors.EVENT_READ, "tcp" if listener is self._reports else None)
        for rate_limited in (self._refused, self._dropped, self._accept_failed, self._taken_refused):
            rate_limited.flush()

    def _close(self, conn: _Connection) -> None:
        if self._connections.pop(conn.sock.fileno(), None) is not None:
            self._selector.unregister(conn.sock)
            self._admission.release(conn.peer)
        conn.sock.close()


class Dispatcher:
    """Decodes one request line, checks who may send it, hands it to the daemon's handlers."""

    def __init__(self, daemon, admin_uids: frozenset[int], munge_socket: str | None = None):
        self.daemon = daemon
        self.admin_uids = admin_uids
        self.munge_socket = munge_socket

    def privileged(self, uid: int | None) -> bool:
        """Root or the Slurm user: who may ask for advice, switch the mode, note a taken answer."""
        return uid == 0 or uid in self.admin_uids

    def taken(self, data: bytes, uid: int | None) -> str | None:
        """A datagram from the hook: it used a ready answer. No reply (the hook does not wait);
        a refused one is counted, and why is returned for the caller's (rate-limited) log."""
        try:  # the sender first: a flood from another user costs no JSON decoding
            if not self.privileged(uid):
                raise ProtocolError(f"taken: uid {uid} is neither root nor the Slurm user")
            request = protocol.decode_request(data.rstrip(b"\n"))
            if request["op"] != "taken":
                raise ProtocolError(f"the taken socket takes op 'taken' only, not {request['op']!r}")
        except ProtocolError as exc:
            self.daemon.state.counters.ready_refused += 1
            return str(exc)
        try:
            self.daemon.taken(request)
        except Exception:  # a bug must cost one note, not the daemon
            log.exception("ready answer note failed")
            self.daemon.state.counters.errors += 1
        return None

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
        if op in ("advise", "mode") and not self.privileged(uid):
            raise ProtocolError(f"{op}: uid {uid} is neither root nor the Slurm user")
        if op == "advise":
            return self.daemon.advise(request.get("job"), request.get("ready_key"))
        if op == "taken":
            raise ProtocolError(f"taken: send it as a datagram to {TAKEN_SUFFIX}, not over this socket")
        if op == "mode":
            return self.daemon.switch_mode(request.get("mode"), request.get("reset", False))
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
