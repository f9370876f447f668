"""MUNGE credentials through libmunge (ctypes): who sent a speed report from another host.

Every Slurm node runs munged with the cluster's shared key: a credential encoded on a compute
node says which uid made it, and munged on the daemon's host checks it, rejects it once its
time-to-live (munged's, 5 min by default) has passed and rejects it when it is replayed. A
report from a job on a compute node therefore travels as a credential whose payload is the
report, and the daemon takes the uid from the credential, never from anything the sender
claims (as SO_PEERCRED decides on the local socket).

libmunge is loaded on first use; without it (or without munged) every call raises MungeError
with one line saying why, and callers fail open (a report is dropped, the daemon serves on).
"""
from __future__ import annotations

import ctypes
import ctypes.util
import functools
import os

_OPT_SOCKET = 8  # MUNGE_OPT_SOCKET in munge.h: the munged socket to talk to (char *)
_LIBRARY = "libmunge.so.2"


class MungeError(Exception):
    """A credential could not be made or was not valid (the message says which and why)."""


@functools.cache
def _lib() -> ctypes.CDLL:
    try:
        lib = ctypes.CDLL(ctypes.util.find_library("munge") or _LIBRARY)
    except OSError as exc:
        raise MungeError(f"libmunge is not installed ({exc}); install the munge package") from None
    lib.munge_encode.argtypes = [ctypes.POINTER(ctypes.c_char_p), ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int]
    lib.munge_decode.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p),
                                 ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.c_uint32),
                                 ctypes.POINTER(ctypes.c_uint32)]
    lib.munge_strerror.restype = ctypes.c_char_p
    lib.munge_ctx_create.restype = ctypes.c_void_p
    lib.munge_ctx_destroy.argtypes = [ctypes.c_void_p]
    lib.munge_ctx_set.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_char_p]
    lib.munge_ctx_strerror.argtypes = [ctypes.c_void_p]
    lib.munge_ctx_strerror.restype = ctypes.c_char_p
    return lib


@functools.cache
def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(None)
    libc.free.argtypes = [ctypes.c_void_p]
    return libc


def default_socket() -> str | None:
    """``MUNGE_SOCKET`` from the environment (a private munged, as the testbed's), else libmunge's."""
    return os.environ.get("MUNGE_SOCKET") or None


class _Context:
    def __init__(self, socket: str | None):
        socket = socket if socket is not None else default_socket()
        self.lib = _lib()
        self.ctx = self.lib.munge_ctx_create()
        if not self.ctx:
            raise MungeError("munge: cannot create a context (out of memory)")
        if socket and self.lib.munge_ctx_set(self.ctx, _OPT_SOCKET, os.fsencode(socket)) != 0:
            self.close()
            raise MungeError(f"munge: cannot use the socket {socket}")

    def error(self, code: int) -> MungeError:
        detail = self.lib.munge_ctx_strerror(self.ctx) or self.lib.munge_strerror(code)
        return MungeError(f"munge: {detail.decode(errors='replace')}")

    def close(self) -> None:
        self.lib.munge_ctx_destroy(self.ctx)


def encode(payload: bytes, socket: str | None = None) -> str:
    """A credential of this process's uid carrying ``payload``."""
    ctx = _Context(socket)
    try:
        cred = ctypes.c_char_p()
        code = ctx.lib.munge_encode(ctypes.byref(cred), ctx.ctx, payload, len(payload))
        if code != 0:
            raise ctx.error(code)
        try:
            return cred.value.decode("ascii")
        finally:
            _libc().free(ctypes.cast(cred, ctypes.c_void_p))
    finally:
        ctx.close()


def decode(credential: str, socket: str | None = None) -> tuple[int, bytes]:
    """(uid that made the credential, its payload); MungeError when it is not valid (forged,
    expired, replayed, from another key) or munged cannot be reached."""
    try:
        raw = credential.encode("ascii")
    except UnicodeEncodeError:
        raise MungeError("munge: Invalid credential format (not ASCII)") from None
    ctx = _Context(socket)
    buf, length = ctypes.c_void_p(), ctypes.c_int()
    uid, gid = ctypes.c_uint32(), ctypes.c_uint32()
    try:
        code = ctx.lib.munge_decode(raw, ctx.ctx, ctypes.byref(buf), ctypes.byref(length),
                                    ctypes.byref(uid), ctypes.byref(gid))
        payload = ctypes.string_at(buf, length.value) if buf.value else b""
        if code != 0:
            raise ctx.error(code)
        return uid.value, payload
    finally:
        if buf.value:
            _libc().free(buf)
        ctx.close()
