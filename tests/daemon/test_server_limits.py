"""The server loop's bounds, in process: replies held back and resumed, report-port peers counted
per address, a failing accept that rests instead of spinning."""
from __future__ import annotations

import errno
import json
import logging
import selectors
import socket
import threading
import time

from daemon_helpers import make_daemon

from slurm_advisor.daemon.client import call
from slurm_advisor.daemon.limits import MAX_BACKLOG, ConnectionLimits
from slurm_advisor.daemon.server import AdvisorServer, ServerThread, _Connection


def test_a_client_that_reads_late_gets_every_reply_in_order(tmp_path):
    # ~20x MAX_BACKLOG of replies: the daemon stops reading while they back up and goes on as they
    # drain. No store, so no mode file to write after each switch; a deadline that a loaded
    # machine cannot miss (0.5 s dropped the connection under a full CI run): the backlog is tested
    daemon = make_daemon(tmp_path, store=False, client_timeout_s=10.0)
    count = 20 * MAX_BACKLOG // 60
    requests = b"".join(b'{"v": 1, "op": "mode", "mode": "%s"}\n' % (b"observe", b"advise")[i % 2]
                        for i in range(count))
    server = AdvisorServer(daemon.config.socket, daemon.dispatcher(), daemon.config.client_timeout_s)
    with ServerThread(server), socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(20)
        s.connect(str(daemon.config.socket))
        sender = threading.Thread(target=s.sendall, args=(requests,), daemon=True)
        sender.start()
        replies_file = s.makefile("rb")
        replies = [json.loads(replies_file.readline()) for _ in range(count)]
        sender.join(timeout=10)
    assert len(replies) == count
    assert [r["mode"] for r in replies] == [("observe", "advise")[i % 2] for i in range(count)]


def test_a_pipelined_burst_is_answered_a_turn_at_a_time(tmp_path):
    # one client's 100 pipelined lines must not hold up the others: 16 answered, then the others'
    # turn (the loop's next select), then 16 more
    daemon = make_daemon(tmp_path, store=False)
    server = AdvisorServer(daemon.config.socket, daemon.dispatcher(), 2.0)
    ours, theirs = socket.socketpair()
    try:
        conn = _Connection(ours, 0, None, time.monotonic() + 2.0)
        server._connections[ours.fileno()] = conn
        server._selector.register(ours, selectors.EVENT_READ, conn)
        conn.inbox += b'{"v": 1, "op": "health"}\n' * 100
        theirs.settimeout(2)
        assert server._answer(conn) is True
        assert _replies(theirs) == 16 and conn.more and conn in server._turns
        server._take_turns()
        assert _replies(theirs) == 16
        for _ in range(10):
            server._take_turns()
        assert _replies(theirs) == 100 - 32 and not conn.more and not server._turns
    finally:
        server.server_close()
        theirs.close()


def _replies(sock: socket.socket) -> int:
    """The reply lines waiting on ``sock``."""
    sock.setblocking(False)
    data = b""
    try:
        while chunk := sock.recv(65536):
            data += chunk
    except BlockingIOError:
        pass
    return data.count(b"\n")


def test_report_port_peers_are_counted_per_address(tmp_path):
    daemon = make_daemon(tmp_path, store=False)
    server = AdvisorServer(daemon.config.socket, daemon.dispatcher(), 2.0, report_listen=("127.0.0.1", 0),
                           limits=ConnectionLimits(total=16, per_peer=2))
    with ServerThread(server):
        clients = [socket.create_connection(server.report_address, timeout=2) for _ in range(4)]
        try:
            replies = [_first_line(c) for c in clients]
            assert replies[:2] == [None, None]  # held open: nothing said yet
            assert all("too many connections: address 127.0.0.1 holds 2 connections" in r for r in replies[2:])
            assert call(daemon.config.socket, "health")["ok"] is True  # the Unix socket's root is not counted there
            assert call(daemon.config.socket, "status")["connections_refused"] == 2
        finally:
            for c in clients:
                c.close()


def _first_line(sock: socket.socket) -> str | None:
    """The line the daemon sent at once, or None when it sent nothing within 0.3 s."""
    sock.settimeout(0.3)
    try:
        return sock.makefile("rb").readline().decode() or None
    except TimeoutError:
        return None


class _FailingListener:
    """The daemon's listener out of file descriptors: every accept fails with EMFILE."""

    def __init__(self, real: socket.socket):
        self.real, self.accepts = real, 0
        self._tried = threading.Condition()

    def wait_for(self, accepts: int, timeout_s: float) -> bool:
        """Until the server has tried ``accepts`` accepts (each try notifies)."""
        with self._tried:
            return self._tried.wait_for(lambda: self.accepts >= accepts, timeout_s)

    def fileno(self) -> int:
        return self.real.fileno()

    def close(self) -> None:
        self.real.close()

    def accept(self):
        with self._tried:
            self.accepts += 1
            self._tried.notify_all()
        raise OSError(errno.EMFILE, "Too many open files")


def test_a_failing_accept_rests_the_listener_and_logs_once(tmp_path, caplog):
    daemon = make_daemon(tmp_path, store=False)
    server = AdvisorServer(daemon.config.socket, daemon.dispatcher(), 2.0)
    failing = server._listener = _FailingListener(server._listener)
    waiting = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    with caplog.at_level(logging.ERROR, logger="slurm_advisor.daemon"), ServerThread(server):
        waiting.connect(str(daemon.config.socket))  # queued: the listener stays readable
        assert failing.wait_for(1, 5), "the first accept"
        started = time.monotonic()
        assert failing.wait_for(6, 5), "five more accepts"
        took = time.monotonic() - started
    waiting.close()
    assert took >= 0.4  # one try per rest of 0.1 s, not a spinning loop (tens of thousands a second)
    assert [r.getMessage() for r in caplog.records if "accept failed" in r.getMessage()] == [
        "accept failed: [Errno 24] Too many open files; not accepting for 0.1 s"]
