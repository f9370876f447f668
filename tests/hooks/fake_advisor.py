"""A stand-in for the advisor daemon on a Unix socket: canned replies, recorded requests.

Each connection gets the behaviour set on the server (a reply line, a delay, a close without a
reply, ...), one request at a time as the protocol says. Threads only; `close()` stops it.
"""
from __future__ import annotations

import json
import os
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

#: Replies as docs/protocol.md shows them.
PLACE = {"v": 1, "ok": True, "decision": "d-5f0c2a9e41b7", "mode": "advise", "action": "place",
         "nodes": "n1,n3", "min_nodes": 2, "max_nodes": 2, "num_tasks": 5,
         "layout": "ps=n1;worker=n1,n3,n3,n3", "switches": None, "wait4switch_s": None, "reason": ""}
CAP = {"v": 1, "ok": True, "decision": "d-00aa11bb22cc", "mode": "advise", "action": "cap",
       "max_nodes": 3, "switches": 1, "wait4switch_s": 600, "reason": ""}
NONE = {"v": 1, "ok": True, "decision": "d-0123456789ab", "mode": "advise", "action": "none", "reason": ""}
OBSERVE = {"v": 1, "ok": True, "decision": "d-0123456789ab", "mode": "observe", "action": "observe", "reason": ""}

Behaviour = Callable[[socket.socket, bytes], None]


def line(reply: dict[str, Any]) -> bytes:
    return (json.dumps(reply) + "\n").encode()


def answer(data: bytes, delay_s: float = 0.0) -> Behaviour:
    """Send `data` (after `delay_s`) and keep the connection open until the client closes it."""
    def behave(conn: socket.socket, request: bytes) -> None:
        if delay_s:
            time.sleep(delay_s)
        try:
            conn.sendall(data)
        except OSError:
            return
        conn.settimeout(2.0)
        try:
            conn.recv(1)  # the client's close
        except OSError:
            pass
    return behave


def close_silently(conn: socket.socket, request: bytes) -> None:
    """Read the request and close without a word."""


class FakeAdvisor:
    def __init__(self, path: Path, behaviour: Behaviour | None = None):
        self.path = str(path)
        self.behaviour: Behaviour = behaviour or answer(line(NONE))
        self.requests: list[bytes] = []
        self.connections = 0
        self._lock = threading.Lock()
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        if os.path.exists(self.path):
            os.unlink(self.path)
        self._sock.bind(self.path)
        os.chmod(self.path, 0o666)
        self._sock.listen(128)
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def reply_with(self, reply: dict[str, Any] | bytes, delay_s: float = 0.0) -> None:
        self.behaviour = answer(reply if isinstance(reply, bytes) else line(reply), delay_s)

    def request_json(self, index: int = -1) -> dict[str, Any]:
        return json.loads(self.requests[index])

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            with self._lock:
                self.connections += 1
            threading.Thread(target=self._handle, args=(conn, self.behaviour), daemon=True).start()

    def _handle(self, conn: socket.socket, behaviour: Behaviour) -> None:
        with conn:
            conn.settimeout(2.0)
            data = b""
            try:
                while not data.endswith(b"\n") and len(data) <= 70_000:
                    chunk = conn.recv(65536)
                    if not chunk:
                        break
                    data += chunk
            except OSError:
                return
            with self._lock:
                self.requests.append(data)
            behaviour(conn, data)

    def close(self) -> None:
        try:
            self._sock.shutdown(socket.SHUT_RDWR)  # wakes the accept()
        except OSError:
            pass
        self._sock.close()
        self._thread.join(timeout=2.0)
        if os.path.exists(self.path):
            os.unlink(self.path)
