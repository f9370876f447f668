"""A client of the daemon's socket: the admin CLI, tests and benchmarks use it (the hook is Lua)."""
from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any, Self

from slurm_advisor.daemon import protocol


class DaemonUnavailable(ConnectionError):
    """The daemon is not there, too slow, or answered something that is not the protocol."""


class Client:
    """One connection, any number of requests on it."""

    def __init__(self, path: Path | str | tuple[str, int], timeout_s: float = 2.0):
        """``path``: the daemon's Unix socket, or (host, port) of its report port."""
        try:
            if isinstance(path, tuple):
                self._sock = socket.create_connection(path, timeout=timeout_s)
            else:
                self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                self._sock.settimeout(timeout_s)
                try:
                    self._sock.connect(str(path))
                except OSError:
                    self._sock.close()
                    raise
        except OSError as exc:
            where = "{}:{}".format(*path) if isinstance(path, tuple) else path
            raise DaemonUnavailable(f"cannot connect to {where}: {exc.strerror or exc}") from None
        self._file = self._sock.makefile("rb")

    def call(self, op: str, **fields: Any) -> dict[str, Any]:
        try:
            self._sock.sendall(protocol.encode({"op": op, **fields}))
            line = self._file.readline(protocol.MAX_LINE + 1)
        except OSError as exc:
            raise DaemonUnavailable(f"no answer: {exc}") from None
        try:
            reply = json.loads(line)
        except ValueError:
            raise DaemonUnavailable(f"answer is not JSON: {line[:80]!r}") from None
        if not isinstance(reply, dict) or reply.get("v") != protocol.VERSION:
            raise DaemonUnavailable(f"answer is not protocol v{protocol.VERSION}: {line[:80]!r}")
        return reply

    def close(self) -> None:
        self._file.close()
        self._sock.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def call(path: Path | str | tuple[str, int], op: str, timeout_s: float = 2.0, **fields: Any) -> dict[str, Any]:
    with Client(path, timeout_s) as client:
        return client.call(op, **fields)
