"""The submit marker: what a user writes into ``--comment`` to ask for advice. Pure.

``slurm-advisor: type=<model> ps=<n> workers=<n> [model_mb=<x>] [batch=<n>] [iters=<x>] [nodes=any]``
anywhere in the comment. ``nodes=any`` is for a job submitted with ``-m arbitrary``, whose ``-w``
list sbatch requires: it says that list is only the layout to run without the advisor, and the
advisor may choose the nodes (``slurm/request.py``). The counts are bounded (:data:`MAX_TASKS`), so that no comment makes the
daemon build a per-task structure of a billion entries; Slurm's own task count, where the
user gave one, must match them (``slurm/request.py``).
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

MARKER = "slurm-advisor:"
#: More tasks than any job of a 10,000-node cluster of 8-GPU nodes has.
MAX_TASKS = 100_000

_MARKER_RE = re.compile(r"slurm-advisor:((?:\s+[a-z_]+=[^\s]+)+)")
_MARKER_KEYS = {"type": str, "ps": int, "workers": int, "model_mb": float, "batch": int, "iters": float,
                "nodes": str}
#: keys whose value is one of a few words
_CHOICES = {"nodes": ("any",)}
_REQUIRED_MARKER_KEYS = ("type", "ps", "workers")
_TYPE_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+-]{0,63}")


class MarkerError(ValueError):
    """A malformed marker; the message names the key."""


@dataclass(frozen=True)
class Marker:
    """What the user wrote after ``slurm-advisor:`` in ``--comment``."""

    type: str
    ps: int
    workers: int
    model_mb: float | None = None
    batch: int | None = None
    iters: float | None = None
    nodes: str | None = None  # "any": the job's -w list (-m arbitrary) is not a requirement


def parse_marker(comment: str | None) -> Marker | None:
    """The marker in ``comment``; None when there is none; MarkerError when it is malformed."""
    if not comment or MARKER not in comment:
        return None
    match = _MARKER_RE.search(comment)
    if match is None:
        raise MarkerError("comment: 'slurm-advisor:' must be followed by key=value pairs "
                            "(type=<name> ps=<n> workers=<n>)")
    values: dict[str, Any] = {}
    for pair in match.group(1).split():
        key, _, raw = pair.partition("=")
        if key not in _MARKER_KEYS:
            raise MarkerError(f"comment: unknown marker key {key!r}; valid: {', '.join(_MARKER_KEYS)}")
        values[key] = _marker_value(key, raw)
    missing = [k for k in _REQUIRED_MARKER_KEYS if k not in values]
    if missing:
        raise MarkerError(f"comment: marker lacks {', '.join(missing)}")
    if values["workers"] < 1 or values["ps"] < 0:
        raise MarkerError("comment: marker needs workers >= 1 and ps >= 0")
    if values["ps"] + values["workers"] > MAX_TASKS:
        raise MarkerError(f"comment: marker asks for {values['ps'] + values['workers']} tasks; "
                          f"at most {MAX_TASKS}")
    return Marker(**values)


def _marker_value(key: str, raw: str) -> Any:
    kind = _MARKER_KEYS[key]
    if key in _CHOICES:
        if raw not in _CHOICES[key]:
            raise MarkerError(f"comment: marker {key}={raw!r} must be one of: {', '.join(_CHOICES[key])}")
        return raw
    if kind is str:
        if not _TYPE_RE.fullmatch(raw):
            raise MarkerError(f"comment: marker {key}={raw!r} must be letters, digits and _.+- (64 at most)")
        return raw
    try:
        value = kind(raw)
    except ValueError:
        raise MarkerError(f"comment: marker {key}={raw!r} is not {'an integer' if kind is int else 'a number'}") from None
    if not math.isfinite(value) or value < 0 or (kind is float and value == 0) or value > 1e9:
        raise MarkerError(f"comment: marker {key}={raw!r} is out of range")
    return value
