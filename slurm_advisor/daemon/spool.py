"""The spool: what the daemon acknowledged, on disk before the reply leaves, until a writer has
put it in the store.

A record is one line (JSON, no newline inside) appended with one ``os.write`` to a file opened
``O_APPEND``: once that returns the record survives the death of the process (``kill -9``
included), without an fsync per request. A background thread fsyncs what was appended every
``fsync_s`` (50 ms), so a machine crash or power loss loses at most the records of the last
interval and one fsync. Files are ``<name>-<seq>.spool`` in one directory; the appender starts a
new one at each start and every ``rotate_bytes``, so a file that is not the newest is finished.

The drain side (:class:`SpoolReader`, in the writer thread or process) reads the complete lines
that arrived, hands them to the store, then deletes every finished file it has read to the end:
disk use stays within a file or two beyond what the store has not taken yet. What a previous
run left is read first, so a restart replays it; the store's inserts are idempotent (a record
already stored is skipped), which makes the replay exactly once. A line cut short (a machine
crash mid-write) or not decodable is skipped and counted, never raised.

Pure I/O, no domain knowledge: the writers encode and decode the lines.
"""
from __future__ import annotations

import fcntl
import logging
import os
import re
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")
log = logging.getLogger("slurm_advisor.daemon")
FSYNC_S = 0.05          # the power-loss window: appended records are fsynced this often
ROTATE_BYTES = 1 << 20  # a new file after this much, so drained files can go
MAX_BYTES = 256 << 20   # beyond this undrained (a store that hangs) records go the in-memory way
_REPORT_EVERY_S = 60.0  # an append failure is logged once per interval, with a count
_RECHECK_FULL_S = 1.0
READ_AT_MOST = 20_000   # lines per read: a large replay goes in steps, not all in memory at once
LOCK_WAIT_S = 20.0      # a killed daemon's decision writer may still be draining: the next one waits


def _lock(directory: Path, name: str, *, wait_s: float) -> int:
    """The descriptor holding ``name``'s lock in ``directory`` (one appender, or one final
    drain, at a time); OSError when another holds it for longer than ``wait_s``."""
    fd = os.open(directory / f"{name}.lock", os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o600)
    deadline = time.monotonic() + wait_s
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
        except BlockingIOError:
            if time.monotonic() >= deadline:
                os.close(fd)
                raise OSError(f"{directory / (name + '.lock')} is held by another daemon") from None
            time.sleep(0.05)  # a lock has no event to wait on
        except OSError:
            os.close(fd)
            raise


def _files(directory: Path, name: str) -> list[tuple[int, Path]]:
    """The spool files of ``name`` in ``directory``, oldest first."""
    pattern = re.compile(rf"{re.escape(name)}-(\d+)\.spool")
    found = []
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return []
    for entry in entries:
        match = pattern.fullmatch(entry.name)
        if match:
            found.append((int(match.group(1)), Path(entry.path)))
    return sorted(found)


class Spool:
    """The appending side: ``open`` once, ``append(line)`` per record (or per batch of records
    answered together), ``close`` at the stop. ``append`` returns False — never raises — when the
    record is not on disk (no directory, disk full, a spool over ``max_bytes``): the caller then
    keeps the record in memory as before the spool existed."""

    def __init__(self, directory: Path, name: str, *, fsync_s: float = FSYNC_S,
                 rotate_bytes: int = ROTATE_BYTES, max_bytes: int = MAX_BYTES):
        self.directory, self.name = Path(directory), name
        self.fsync_s, self.rotate_bytes, self.max_bytes = fsync_s, rotate_bytes, max_bytes
        self.lock_wait_s = LOCK_WAIT_S
        self.appended = 0   # records on disk
        self.failed = 0     # records that could not be appended (they went the in-memory way)
        self.fsyncs = 0
        self._fd: int | None = None
        self._lock_fd: int | None = None
        self._seq = 0
        self._size = 0
        self._full_until = 0.0
        self._dirty = False
        self._new_file = False
        self._mutex = threading.Lock()
        self._closing = threading.Event()
        self._syncer: threading.Thread | None = None
        self._unsynced: list[int] = []  # rotated-out files, fsynced and closed by the syncer
        self._failures_unreported = 0
        self._reported_at = -_REPORT_EVERY_S

    @property
    def is_open(self) -> bool:
        """Opened and not closed (its lock held)."""
        return self._lock_fd is not None

    def open(self) -> bool:
        """Take the directory's lock for ``name`` and start a new file; False (logged) if not."""
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            self._lock_fd = _lock(self.directory, self.name, wait_s=self.lock_wait_s)
            existing = _files(self.directory, self.name)
            self._seq = existing[-1][0] if existing else 0
            self._start_file()
        except OSError as exc:
            log.error("spool %s in %s cannot be used (%s): %ss are acknowledged before they are on "
                      "disk, as without a spool", self.name, self.directory, exc, self.name)
            self._release_lock()
            return False
        self._syncer = threading.Thread(target=self._sync_loop, name=f"{self.name}-spool-fsync", daemon=True)
        self._syncer.start()
        return True

    def append(self, data: bytes) -> bool:
        """``data`` (whole lines) with one write; True once the kernel has it."""
        with self._mutex:
            if not self._writable():
                return self._failed(None)
            try:
                written = os.write(self._fd, data)
            except OSError as exc:
                return self._failed(exc)
            self._size += written
            self._dirty = True
            if written != len(data) or self._size >= self.rotate_bytes:
                self._rotate()  # a line cut short (disk full) must not be extended by the next one
            if written != len(data):
                return self._failed(OSError(f"short write ({written} of {len(data)} bytes)"))
            self.appended += data.count(b"\n")
        return True

    def close(self) -> None:
        """Fsync and close; the records stay for the writer (or the next start) to drain."""
        self._closing.set()
        if self._syncer is not None:
            self._syncer.join(timeout=10)
        with self._mutex:
            if self._fd is not None:
                self._unsynced.append(self._fd)
                self._fd = None
            self._sync_rotated()
            self._release_lock()  # under the mutex: an append after this fails, it opens nothing

    def _start_file(self) -> None:
        self._seq += 1
        path = self.directory / f"{self.name}-{self._seq:010d}.spool"
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
        self._size = 0
        self._dirty = self._new_file = True  # the directory entry too: the syncer fsyncs the directory

    def _writable(self) -> bool:
        """Whether an append may go to disk: open, not full, a file to write to."""
        if self._lock_fd is None or (self._full_until and not self._room()):
            return False  # not opened, closed, or full
        if self._fd is None:  # the last rotation could not create its file: try again
            try:
                self._start_file()
            except OSError:
                return False
        return True

    def _rotate(self) -> None:
        self._unsynced.append(self._fd)
        self._fd = None
        try:
            self._start_file()
        except OSError as exc:  # the next append tries again
            log.error("spool %s: cannot start a new file: %s", self.name, exc)
            return
        if self._spooled_bytes() > self.max_bytes:
            log.error("spool %s holds over %d MiB the store has not taken: new %ss are kept in "
                      "memory until it drains", self.name, self.max_bytes >> 20, self.name)
            self._full_until = time.monotonic() + _RECHECK_FULL_S

    def _room(self) -> bool:
        """While full: whether the writer has drained enough (checked once a second)."""
        if time.monotonic() < self._full_until:
            return False
        if self._spooled_bytes() > self.max_bytes:
            self._full_until = time.monotonic() + _RECHECK_FULL_S
            return False
        self._full_until = 0.0
        return True

    def _spooled_bytes(self) -> int:
        total = 0
        for _, path in _files(self.directory, self.name):
            try:
                total += path.stat().st_size
            except OSError:
                pass  # drained and deleted meanwhile
        return total

    def _failed(self, exc: OSError | None) -> bool:
        self.failed += 1
        self._failures_unreported += 1
        now = time.monotonic()
        if now - self._reported_at >= _REPORT_EVERY_S:
            log.error("spool %s: %d %ss not written to disk (%s): acknowledged from memory, as "
                      "without a spool", self.name, self._failures_unreported, self.name,
                      exc if exc is not None else "spool closed or full")
            self._reported_at, self._failures_unreported = now, 0
        return False

    def _sync_loop(self) -> None:
        while not self._closing.wait(self.fsync_s):
            self._sync()
        self._sync()

    def _sync(self) -> None:
        with self._mutex:
            fd, dirty, self._dirty = self._fd, self._dirty, False
            new_file, self._new_file = self._new_file, False
            rotated, self._unsynced = self._unsynced, []
        # Outside the lock: an append never waits for an fsync (the fd stays open until closed here).
        for old in rotated:
            _fsync_and_close(old)
        if dirty and fd is not None:
            try:
                os.fdatasync(fd)
                if new_file:
                    _fsync_directory(self.directory)
                self.fsyncs += 1
            except OSError as exc:
                log.error("spool %s: fsync failed: %s", self.name, exc)

    def _sync_rotated(self) -> None:
        rotated, self._unsynced = self._unsynced, []
        for old in rotated:
            _fsync_and_close(old)

    def _release_lock(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # releases the flock
            self._lock_fd = None


def _fsync_and_close(fd: int) -> None:
    try:
        os.fdatasync(fd)
    except OSError as exc:
        log.error("spool: fsync at rotation failed: %s", exc)
    finally:
        os.close(fd)


def _fsync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class SpoolReader:
    """The draining side: ``read()`` returns the complete lines that arrived since the last call
    (a previous run's files first); ``release()``, called once they are in the store, deletes
    the files read to their end that the appender has finished with. ``read(final=True)`` (the
    appender is closed) finishes the newest file too, so a line cut short there is counted in
    ``damaged`` with the undecodable ones the writer reports through :meth:`damaged_line`."""

    def __init__(self, directory: Path, name: str):
        self.directory, self.name = Path(directory), name
        self.damaged = 0
        self._offsets: dict[Path, int] = {}
        self._done: list[Path] = []
        self._lock: int | None = None

    def read(self, *, final: bool = False, limit: int = READ_AT_MOST) -> list[bytes]:
        """At least every complete line of the oldest unread file, and of newer ones while under
        ``limit``. ``final``: the appender is gone, so the newest file is finished too — taken as
        such only if the reader gets the appender's lock (a new daemon may be appending), which
        it then holds until :meth:`close`, so that the next daemon waits for this last drain."""
        if final and self._lock is None:
            try:
                self._lock = _lock(self.directory, self.name, wait_s=0.0)
            except OSError:
                pass
        final = final and self._lock is not None
        files = _files(self.directory, self.name)  # listed first: a newer file means this one is finished
        lines: list[bytes] = []
        for index, (_, path) in enumerate(files):
            if len(lines) >= limit:
                break
            lines.extend(self._read_file(path, final or index < len(files) - 1))
        return lines

    def close(self) -> None:
        """After the last drain: the lock goes (see :meth:`read`)."""
        if self._lock is not None:
            os.close(self._lock)
            self._lock = None

    def take(self, decode: Callable[[bytes], T], *, final: bool = False) -> list[T]:
        """``read``, each line decoded; a line that does not decode is skipped and counted."""
        items = []
        for line in self.read(final=final):
            try:
                items.append(decode(line))
            except (ValueError, TypeError, KeyError, IndexError, AttributeError) as exc:
                self.damaged_line(line, f"{type(exc).__name__}: {exc}")
        return items

    def damaged_line(self, line: bytes, why: str) -> None:
        self.damaged += 1
        log.warning("spool %s: skipped a damaged record (%s): %r", self.name, why, line[:80])

    def release(self) -> None:
        for path in self._done:
            try:
                path.unlink()
            except FileNotFoundError:
                pass
            except OSError as exc:
                log.error("spool %s: cannot delete drained %s: %s", self.name, path, exc)
                continue
            self._offsets.pop(path, None)
        self._done = []

    def _read_file(self, path: Path, finished: bool) -> list[bytes]:
        if path in self._done:
            return []
        offset = self._offsets.get(path, 0)
        try:
            with path.open("rb") as spool:
                spool.seek(offset)
                data = spool.read()
        except FileNotFoundError:
            return []
        except OSError as exc:
            log.error("spool %s: cannot read %s: %s", self.name, path, exc)
            return []
        complete = data.rfind(b"\n") + 1
        self._offsets[path] = offset + complete
        lines = data[:complete].splitlines()
        if finished:
            if complete < len(data):  # the appender was stopped mid-write
                self.damaged_line(data[complete:], "cut short")
            self._done.append(path)
        return [line for line in lines if line]


class SpoolChannel:
    """A writer's spool, both sides: ``put`` encodes and appends a record (False: keep it in
    memory instead), ``take``/``release`` drain it. The decision writer's child process has only
    the reading side (a :class:`SpoolReader` of the same directory and name)."""

    def __init__(self, directory: Path, name: str, encode: Callable[[object], bytes],
                 decode: Callable[[bytes], object], **spool: float):
        self.appender = Spool(directory, name, **spool)
        self.reader = SpoolReader(directory, name)
        self.encode, self.decode = encode, decode
        self.unencodable = 0

    @property
    def failed(self) -> int:
        """Records acknowledged from memory: not encodable or not written."""
        return self.unencodable + self.appender.failed

    def open(self) -> bool:
        return self.appender.open()

    def put(self, item: object) -> bool:
        if not self.appender.is_open:  # counted and logged as a failure; no time spent encoding
            return self.appender.append(b"")
        try:
            line = self.encode(item)
        except (TypeError, ValueError) as exc:
            self.unencodable += 1
            log.error("spool %s: a record cannot be encoded (%s): kept in memory", self.appender.name, exc)
            return False
        return self.appender.append(line)

    def take(self, *, final: bool = False) -> list:
        return self.reader.take(self.decode, final=final)

    def release(self) -> None:
        self.reader.release()

    def close(self) -> None:
        """The appending side; the reader's lock after the last drain (:meth:`finished`)."""
        self.appender.close()

    def finished(self) -> None:
        self.reader.close()
