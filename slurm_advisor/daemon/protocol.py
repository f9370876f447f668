"""The advisor protocol (docs/protocol.md): one JSON object per line, both ways. Pure: no I/O.

Everything here turns untrusted bytes into checked values or one-line errors naming the field;
nothing raises anything but :class:`ProtocolError` on bad input.
"""
from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any

from slurm_advisor.plausible_speeds import speed_problem

VERSION = 1
MAX_LINE = 64 * 1024
#: Deepest nesting of objects and arrays in a request: the deepest the protocol uses is 3 (a
#: request's ``job`` object holding a list); the margin is for fields a newer hook may add.
MAX_DEPTH = 8
OPS = ("advise", "health", "status", "mode", "report", "taken")
MODES = ("observe", "advise", "enforce")
ACTIONS = ("place", "cap", "observe", "none")
ENV_LAYOUT = "SLURM_ADVISOR_LAYOUT"
ENV_DECISION = "SLURM_ADVISOR_DECISION"

_JOB_ID_RE = re.compile(r"[0-9]{1,20}")


class ProtocolError(ValueError):
    """A request the daemon refuses; the message is the reply's ``error``."""


def encode(message: dict[str, Any]) -> bytes:
    """One reply or request line (``v`` added). NaN and infinities are not JSON: refused."""
    return (json.dumps({"v": VERSION, **message}, allow_nan=False, separators=(",", ":")) + "\n").encode()


def error_reply(message: str) -> bytes:
    return encode({"ok": False, "error": message})


def decode_request(line: bytes) -> dict[str, Any]:
    """The request object in ``line`` (without or with its trailing newline), checked for v and op."""
    if len(line) > MAX_LINE:
        raise ProtocolError(f"request longer than {MAX_LINE} bytes")
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ProtocolError(f"request is not UTF-8 (byte {exc.start})") from None
    try:
        request = json.loads(text, parse_constant=_no_constant, parse_int=_bounded_int,
                             parse_float=_finite_float)
    except (json.JSONDecodeError, RecursionError) as exc:
        raise ProtocolError(f"request is not JSON: {getattr(exc, 'msg', 'too deeply nested')}") from None
    except ValueError as exc:  # int() of a huge literal; no peer's line may end the daemon
        raise ProtocolError(f"request is not JSON: {exc}") from None
    if not isinstance(request, dict):
        raise ProtocolError("request must be a JSON object")
    if _depth(request) > MAX_DEPTH:
        raise ProtocolError(f"request nests objects and arrays deeper than {MAX_DEPTH}")
    if request.get("v") != VERSION:
        raise ProtocolError(f"unsupported protocol version {request.get('v')!r}; this daemon speaks {VERSION}")
    if request.get("op") not in OPS:
        raise ProtocolError(f"unknown op {request.get('op')!r}; expected one of {', '.join(OPS)}")
    return request


def _bounded_int(text: str) -> int:
    """A JSON integer of at most 20 digits: every count and id the protocol carries fits (Python's
    int() of a literal of more than 4,300 digits raises, and a long one costs quadratic time)."""
    if len(text.lstrip("-")) > 20:
        raise ProtocolError(f"request holds an integer of {len(text)} characters; at most 20 digits")
    return int(text)


def _finite_float(text: str) -> float:
    """A JSON number with a fraction or exponent that is a finite float: ``1e400`` would become
    infinity, which no field of the protocol can hold."""
    value = float(text)
    if not math.isfinite(value):
        raise ProtocolError(f"request holds the number {text[:24]}{'...' if len(text) > 24 else ''}, "
                            "beyond a float's range")
    return value


def _depth(value: Any) -> int:
    """How deeply ``value`` nests objects and arrays (a scalar: 0), looking no deeper than
    MAX_DEPTH + 1. Iterative: a deep request must not cost the recursion limit here."""
    deepest, level = 0, [(value, 1)]
    while level:
        item, depth = level.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        if children is None:
            continue
        deepest = max(deepest, depth)
        if deepest > MAX_DEPTH:
            return deepest
        level.extend((child, depth + 1) for child in children)
    return deepest


def _no_constant(name: str):
    raise ProtocolError(f"request holds {name}, which is not a number")


@dataclass(frozen=True)
class ReportRequest:
    """A checked ``report``: Slurm job ``job_id`` did ``iterations`` in the last ``seconds``."""

    job_id: str
    iterations: float
    seconds: float


def parse_report(request: dict[str, Any]) -> ReportRequest:
    """The ``report`` request's fields, checked: finite, positive, a speed in the plausible
    absolute range (``plausible_speeds``; the job type's own range is the daemon's to check)."""
    job_id = request.get("job_id")
    if isinstance(job_id, int) and not isinstance(job_id, bool):
        job_id = str(job_id)
    if not isinstance(job_id, str) or not _JOB_ID_RE.fullmatch(job_id):
        raise ProtocolError(f"report: job_id must be Slurm's numeric job id, not {job_id!r}")
    iterations, seconds = _positive(request, "iterations"), _positive(request, "seconds")
    problem = speed_problem(iterations / seconds)
    if problem is not None:
        raise ProtocolError(f"report: iterations/seconds: {problem}")
    return ReportRequest(job_id, float(iterations), float(seconds))


def _positive(request: dict[str, Any], field: str) -> float:
    value = request.get(field)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise ProtocolError(f"report: {field} must be a finite number > 0, not {value!r}")
    return float(value)


def format_layout(roles_nodes: list[tuple[str, str]]) -> str:
    """``ps=n1;worker=n1,n3`` from (role, node) per task in task order."""
    groups: dict[str, list[str]] = {}
    for role, node in roles_nodes:
        groups.setdefault(role, []).append(node)
    return ";".join(f"{role}={','.join(nodes)}" for role, nodes in groups.items())


def parse_layout(text: str) -> dict[str, list[str]]:
    """role -> the node of each of its tasks, from ``SLURM_ADVISOR_LAYOUT``."""
    out: dict[str, list[str]] = {}
    for part in filter(None, (text or "").strip().split(";")):
        role, sep, nodes = part.partition("=")
        if not sep or role not in ("ps", "worker") or not nodes:
            raise ProtocolError(f"{ENV_LAYOUT}: bad part {part!r}; expected ps=<nodes>;worker=<nodes>")
        out[role] = nodes.split(",")
    if "worker" not in out:
        raise ProtocolError(f"{ENV_LAYOUT}: no workers in {text!r}")
    return out
