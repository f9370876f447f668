"""Slurm's compact host lists (``n[1-3,5],gpu[01-02]-ib``), the one implementation. Pure.

Expanded as ``scontrol show hostnames`` of Slurm 22.05 expands them: several bracket groups in
one name give every combination (``r[1-2]n[1-2]`` -> r1n1 r1n2 r2n1 r2n2), a range keeps the zero
padding of its low end, names repeat when the list repeats them. Every name is checked against
:data:`NODE_NAME` (what Slurm and DNS both allow, nothing a shell reads as syntax) and a list
names at most ``max_hosts`` hosts, so that a peer's list can neither smuggle syntax nor exhaust
memory. Bad input raises :class:`HostListError` naming ``what`` (the variable or field).
"""
from __future__ import annotations

import itertools
import re
from collections.abc import Iterable

MAX_HOSTS = 65536

#: A node name we accept: what Slurm and DNS both allow, nothing a shell would read as syntax.
NODE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


class HostListError(ValueError):
    """A host list that is not Slurm's syntax, names a bad node, or names too many."""


def expand(spec: str, what: str = "host list", *, max_hosts: int = MAX_HOSTS) -> list[str]:
    """The names ``spec`` lists, in order; ``""`` (or blanks) lists none."""
    spec = spec.strip()
    if not spec:
        return []
    names: list[str] = []
    for item in _split_top(spec, what):
        pieces = [_expand_ranges(text, spec, what, max_hosts) if bracket else [text]
                  for bracket, text in _name_pieces(item)]
        size = 1
        for options in pieces:
            size *= len(options)
        if len(names) + size > max_hosts:
            raise HostListError(f"{what}: {spec!r} names more than {max_hosts} hosts")
        names += ["".join(combo) for combo in itertools.product(*pieces)]
    for name in names:
        if not NODE_NAME.fullmatch(name):
            raise HostListError(f"{what}: bad node name {name!r}: letters, digits and ._- only (64 at most)")
    return names


def compress(names: Iterable[str]) -> str:
    """A compact list for ``names`` in their order: runs of one prefix with consecutive numbers of
    one width become ``n[1-3]``; ``expand(compress(x)) == list(x)``."""
    out: list[str] = []
    group_head, group_ranges, last = None, [], None
    for name in names:
        match = re.fullmatch(r"(.*?)(\d+)", name)
        head, digits = (match.group(1), match.group(2)) if match else (name, None)
        if digits is not None and head == group_head and last is not None and \
                int(digits) == last[0] + 1 and len(digits) == last[1]:
            group_ranges[-1][1] = digits
        elif digits is not None and head == group_head and not re.search(r"[\[\],]", head):
            group_ranges.append([digits, digits])
        else:
            _flush(out, group_head, group_ranges)
            group_head, group_ranges = (head, [[digits, digits]]) if digits is not None else (None, [])
            if digits is None:
                out.append(name)
        last = (int(digits), len(digits)) if digits is not None else None
    _flush(out, group_head, group_ranges)
    return ",".join(out)


def _flush(out: list[str], head: str | None, ranges: list[list[str]]) -> None:
    if head is None or not ranges:
        return
    if len(ranges) == 1 and ranges[0][0] == ranges[0][1]:
        out.append(head + ranges[0][0])
        return
    parts = [lo if lo == hi else f"{lo}-{hi}" for lo, hi in ranges]
    out.append(f"{head}[{','.join(parts)}]")


def _split_top(spec: str, what: str) -> list[str]:
    """``spec`` split at the commas outside brackets."""
    items, depth, start = [], 0, 0
    for i, char in enumerate(spec):
        if char == "[":
            depth += 1
        elif char == "]":
            depth -= 1
        elif char == "," and depth == 0:
            items.append(spec[start:i])
            start = i + 1
        if depth not in (0, 1):
            raise HostListError(f"{what}: bad host list {spec!r}: unbalanced brackets")
    if depth:
        raise HostListError(f"{what}: bad host list {spec!r}: unclosed '['")
    items.append(spec[start:])
    if any(not item for item in items):
        raise HostListError(f"{what}: bad host list {spec!r}: empty name")
    return items


def _name_pieces(item: str) -> list[tuple[bool, str]]:
    """(is a bracket group, text) pieces of one name of the list."""
    parts = re.split(r"\[([^\]]*)\]", item)
    return [(i % 2 == 1, text) for i, text in enumerate(parts) if text or i % 2 == 1]


def _expand_ranges(text: str, spec: str, what: str, max_hosts: int) -> list[str]:
    out: list[str] = []
    for part in text.split(","):
        lo, dash, hi = part.partition("-")
        if not lo.isdigit() or (dash and not hi.isdigit()):
            raise HostListError(f"{what}: bad range {part!r} in {spec!r}")
        first, last = int(lo), int(hi) if dash else int(lo)
        if last < first:
            raise HostListError(f"{what}: bad range {part!r} in {spec!r}")
        if len(out) + last - first >= max_hosts:
            raise HostListError(f"{what}: {spec!r} names more than {max_hosts} hosts")
        out += [f"{i:0{len(lo)}d}" for i in range(first, last + 1)]
    return out
