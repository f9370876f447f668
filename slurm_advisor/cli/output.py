"""Output files the commands write, written whole or not at all.

Every command that writes a file (``export``, ``convert``, ``simulate --plot``) writes a temporary
file in the same directory and renames it over the target: a write that fails (a full disk, a
kill, a bad row) leaves the earlier file, or none, never a truncated one.
"""
from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from slurm_advisor.errors import InputError


@contextmanager
def replaced_whole(path: Path) -> Iterator[Path]:
    """A fresh temporary path beside ``path`` (same suffix: matplotlib picks the format by it) to
    write to; renamed over ``path`` when the block ends, removed when it raises. OSError from
    the block or the rename is one InputError naming ``path``."""
    path = Path(path)
    tmp = path.with_name(f".{path.stem}.{secrets.token_hex(4)}.tmp{path.suffix}")
    try:
        os.close(os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666))  # the umask's mode, not 0600
        yield tmp
        os.replace(tmp, path)
    except OSError as exc:
        raise InputError(f"{path}: cannot write: {exc.strerror or exc}") from None
    finally:
        tmp.unlink(missing_ok=True)
