"""The server's sockets made and read at the edge: the peer's uid on a stream socket, the
``.taken`` datagram socket and its senders' uids, the report port, a stale socket path."""
from __future__ import annotations

import os
import socket
import stat
import struct
from pathlib import Path

_CRED = struct.Struct("3i")  # struct ucred: pid, uid, gid
_SCM_CREDENTIALS = getattr(socket, "SCM_CREDENTIALS", 2)
CREDENTIALS_SPACE = socket.CMSG_SPACE(_CRED.size)  # recvmsg's ancillary buffer for one sender's uid


def peer_uid(sock: socket.socket) -> int:
    _pid, uid, _gid = _CRED.unpack(sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _CRED.size))
    return uid


def sender_uid(ancillary: list[tuple[int, int, bytes]]) -> int | None:
    """The uid a datagram carries (SO_PASSCRED), from recvmsg's ancillary data."""
    return next((_CRED.unpack(data[:_CRED.size])[1] for level, kind, data in ancillary
                 if level == socket.SOL_SOCKET and kind == _SCM_CREDENTIALS), None)


def taken_socket(path: Path) -> socket.socket:
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


def tcp_listener(address: tuple[str, int], unix: socket.socket) -> socket.socket:
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
