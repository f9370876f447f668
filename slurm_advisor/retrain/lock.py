"""One retrain at a time per models directory: an exclusive flock on ``.retrain.lock``.

The kernel drops the lock when the process dies, however it dies (kill -9 included), so a
crashed retrain never blocks the next one.
"""
from __future__ import annotations

import fcntl
import os
from pathlib import Path
from types import TracebackType
from typing import Self

LOCK_FILE = ".retrain.lock"


class AnotherRetrain(Exception):
    """Another retrain holds the lock."""


class RetrainLock:
    def __init__(self, models_dir: Path):
        self.path = Path(models_dir) / LOCK_FILE
        self._fd: int | None = None

    def __enter__(self) -> Self:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
            os.close(fd)
            raise AnotherRetrain(f"another retrain (pid {holder}) holds {self.path}; "
                                 "wait for it to finish") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the descriptor releases the flock
            self._fd = None
