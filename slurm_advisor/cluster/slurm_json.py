"""Slurm's JSON and text output turned into domain values. Pure: no I/O, fed decoded documents.

Two schema families are read:

- Slurm 22.05 (openapi v0.0.38): numbers are plain, a node's ``state`` is one lower-case string
  with its flags apart in ``state_flags`` (a drained idle node is ``"idle"`` + ``["DRAIN"]``).
- Slurm 23.02+ (data_parser v0.0.39 to v0.0.42): a node's ``state`` is a list holding the base
  state and its flags; numbers that may be unset are ``{"set", "infinite", "number"}``
  objects; ``job_state`` is a list from v0.0.40; per-node job resources moved from
  ``job_resources.allocated_nodes`` to ``job_resources.nodes.allocation`` in v0.0.41.

A document that lacks a field we need, or holds the wrong kind of value there, raises
:class:`SourceError` naming the field.
"""
from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from slurm_advisor.cluster.base import SourceError
from slurm_advisor.domain import Node, Resources
from slurm_advisor.slurm import hostlist
from slurm_advisor.slurm.blocks import Blocks

#: Node states and flags in which Slurm starts nothing new on a node (either spelling of a
#: release: 22.05 writes "MAINT" in sinfo's text but "MAINTENANCE" in JSON). UNKNOWN and
#: INVALID_REG: a node that has not registered properly gets no jobs either.
UNAVAILABLE = frozenset({
    "DRAIN", "DRAINING", "DRAINED", "DOWN", "FAIL", "FAILING", "RESERVED", "MAINT", "MAINTENANCE",
    "NOT_RESPONDING", "POWERED_DOWN", "POWERING_DOWN", "POWER_DOWN", "FUTURE", "UNKNOWN", "INVALID_REG",
})
_MEM_UNITS = {"K": 1 / 1024, "M": 1, "G": 1024, "T": 1024 * 1024}


@dataclass(frozen=True, slots=True)
class NodeReading:
    """One node as Slurm reports it: configured capacity, what is free now, its states."""

    node: Node
    free: Resources
    states: frozenset[str]

    @property
    def available(self) -> bool:
        return not (self.states & UNAVAILABLE)


@dataclass(frozen=True, slots=True)
class JobReading:
    """One running job as squeue reports it: what the advisor needs to rebuild its placement."""

    job_id: str
    comment: str
    user: str
    nodes: tuple[str, ...]              # in Slurm's order
    cpus: int
    gpus: int
    mem_mb: int
    # node -> CPUs held there (cores, up to v0.0.40: only ever used as shares); empty when squeue omits it
    cpus_on: Mapping[str, int]
    start_time: float
    time_limit_s: float | None


# -- values ----------------------------------------------------------------------------------
def number(value: Any, field: str, *, default: float | None = None) -> float | None:
    """A plain number or a v0.0.39+ ``{"set", "infinite", "number"}`` object; None when unset
    or infinite (or ``default`` when the value is absent or null)."""
    if value is None:
        return default
    if isinstance(value, dict):
        if "number" not in value:
            raise SourceError(f"{field}: expected a number, got an object without 'number'")
        if value.get("infinite") or value.get("set") is False:
            return None
        value = value["number"]
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise SourceError(f"{field}: expected a number, got {value!r}")
    return value


def count(value: Any, field: str) -> int:
    """A number that must be there and be a non-negative integer."""
    got = number(value, field)
    if got is None or got < 0 or got != int(got):
        raise SourceError(f"{field}: expected a non-negative integer, got {value!r}")
    return int(got)


def text(value: Any, field: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise SourceError(f"{field}: expected a string, got {value!r}")
    return value


def strings(value: Any, field: str) -> list[str]:
    """A string or a list of strings (Slurm moved many CSV strings to lists in v0.0.39)."""
    if value is None:
        return []
    if isinstance(value, str):
        return [value] if value else []
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return value
    raise SourceError(f"{field}: expected a string or a list of strings, got {value!r}")


def expand_hostlist(spec: str) -> list[str]:
    """Slurm's compact host list as names in order (``slurm/hostlist.py``), errors as SourceError."""
    try:
        return hostlist.expand(spec)
    except hostlist.HostListError as exc:
        raise SourceError(str(exc)) from None


def gres_gpus(spec: str | list[str] | None) -> int:
    """GPUs in a GRES string or list: "gpu:4", "gpu:a100:2(S:0-1),gpu:v100:1", "gpu:2(IDX:0,2)".

    The parenthesised parts (sockets, indices: they may hold commas) are dropped first; "(null)"
    and "N/A" hold none.
    """
    items = spec if isinstance(spec, list) else [spec or ""]
    total = 0
    for item in items:
        for entry in re.sub(r"\([^)]*\)", "", item).split(","):
            parts = entry.strip().split(":")
            if parts[0] == "gpu" and len(parts) >= 2 and parts[-1].isdigit():
                total += int(parts[-1])
    return total


def _tres(spec: str, key: str) -> str | None:
    """The value of ``key`` in a TRES string such as "cpu=6,mem=6000M,node=2,gres/gpu=3"."""
    for pair in spec.split(","):
        name, _, value = pair.partition("=")
        if name == key:
            return value
    return None


def _tres_mem_mb(spec: str) -> int | None:
    value = _tres(spec, "mem")
    if not value:
        return None
    unit = value[-1].upper() if value[-1].isalpha() else "M"
    digits = value[:-1] if value[-1].isalpha() else value
    try:
        return int(float(digits) * _MEM_UNITS.get(unit, 1))
    except ValueError:
        raise SourceError(f"tres_alloc_str: bad memory {value!r}") from None


# -- nodes -----------------------------------------------------------------------------------
def parse_sinfo(doc: Any) -> tuple[NodeReading, ...]:
    """Every node of ``sinfo --json`` (22.05) or ``scontrol --json show nodes`` (23.02+), in
    Slurm's order. A node in a state where Slurm starts nothing is kept with nothing free."""
    nodes = _document_list(doc, "nodes")
    if nodes is None:
        if isinstance(doc, dict) and "sinfo" in doc:
            raise SourceError("sinfo --json of Slurm 23.02+ groups nodes (top-level 'sinfo'); "
                              "read 'scontrol --json show nodes' instead")
        raise SourceError("nodes: missing from the document")
    readings = tuple(_node(n, i) for i, n in enumerate(nodes))
    names = [r.node.name for r in readings]
    if len(set(names)) != len(names):
        twice = sorted({n for n in names if names.count(n) > 1})
        raise SourceError(f"nodes: listed twice: {', '.join(twice[:5])}")
    return readings


def _document_list(doc: Any, key: str) -> list | None:
    if not isinstance(doc, dict):
        raise SourceError(f"expected a JSON object with '{key}', got {type(doc).__name__}")
    errors = doc.get("errors") or []
    if errors:  # sinfo/squeue --json exit 0 with the controller's errors in here
        first = errors[0]
        said = first.get("error", first) if isinstance(first, dict) else first
        raise SourceError(f"Slurm reported an error: {said}")
    value = doc.get(key)
    if value is not None and not isinstance(value, list):
        raise SourceError(f"{key}: expected a list, got {type(value).__name__}")
    return value


def _node(raw: Any, i: int) -> NodeReading:
    if not isinstance(raw, dict):
        raise SourceError(f"nodes[{i}]: expected an object")
    name = text(raw.get("name"), f"nodes[{i}].name")
    if not name:
        raise SourceError(f"nodes[{i}].name: missing")
    where = f"node {name}"
    cpus = count(raw.get("cpus"), f"{where}: cpus")
    mem = count(raw.get("real_memory"), f"{where}: real_memory")
    gpus = gres_gpus(strings(raw.get("gres"), f"{where}: gres"))
    features = raw.get("active_features", raw.get("features"))
    node = Node(name, cpus, gpus, mem, None, frozenset(f for s in strings(features, f"{where}: features")
                                                       for f in s.split(",") if f),
                frozenset(p for s in strings(raw.get("partitions"), f"{where}: partitions") for p in s.split(",") if p))
    states = frozenset(s.upper() for s in strings(raw.get("state"), f"{where}: state")
                       + strings(raw.get("state_flags"), f"{where}: state_flags"))
    if not states:
        raise SourceError(f"{where}: state: missing")
    used = Resources(count(raw.get("alloc_cpus", 0), f"{where}: alloc_cpus"),
                     gres_gpus(strings(raw.get("gres_used"), f"{where}: gres_used")),
                     count(raw.get("alloc_memory", 0), f"{where}: alloc_memory"))
    free = Resources(max(0, cpus - used.cpus), max(0, gpus - used.gpus), max(0, mem - used.mem_mb))
    reading = NodeReading(node, free, states)
    return reading if reading.available else NodeReading(node, Resources(), states)


# -- jobs ------------------------------------------------------------------------------------
def parse_squeue(doc: Any) -> tuple[JobReading, ...]:
    """The running jobs of ``squeue --json`` (pending and ending ones hold nothing new)."""
    jobs = _document_list(doc, "jobs")
    if jobs is None:
        raise SourceError("jobs: missing from the document")
    out = []
    for i, raw in enumerate(jobs):
        if not isinstance(raw, dict):
            raise SourceError(f"jobs[{i}]: expected an object")
        if "RUNNING" in (s.upper() for s in strings(raw.get("job_state"), f"jobs[{i}].job_state")):
            out.append(_job(raw, i))
    return tuple(out)


def _job(raw: dict, i: int) -> JobReading:
    job_id = str(count(raw.get("job_id"), f"jobs[{i}].job_id"))
    where = f"job {job_id}"
    nodes = tuple(expand_hostlist(text(raw.get("nodes"), f"{where}: nodes")))
    if not nodes:
        raise SourceError(f"{where}: nodes: a running job must name its nodes")
    resources = raw.get("job_resources") or {}
    if not isinstance(resources, dict):
        raise SourceError(f"{where}: job_resources: expected an object")
    per_node = _allocation(resources, where)
    tres = text(raw.get("tres_alloc_str"), f"{where}: tres_alloc_str")
    gpus = gres_gpus(strings(raw.get("gres_detail"), f"{where}: gres_detail"))
    if not gpus and _tres(tres, "gres/gpu"):
        gpus = int(_tres(tres, "gres/gpu"))
    mem = sum(m for _, m in per_node.values()) or _tres_mem_mb(tres) or 0
    limit = number(raw.get("time_limit"), f"{where}: time_limit")
    return JobReading(job_id, text(raw.get("comment"), f"{where}: comment"),
                      text(raw.get("user_name"), f"{where}: user_name"), nodes,
                      count(raw.get("cpus"), f"{where}: cpus"), gpus, mem,
                      {n: c for n, (c, _) in per_node.items()},
                      float(number(raw.get("start_time"), f"{where}: start_time", default=0) or 0),
                      None if limit is None else float(limit) * 60.0)


def _allocation(resources: dict, where: str) -> dict[str, tuple[int, int]]:
    """node -> (CPUs, MB) the job holds there, from either per-node layout Slurm has used."""
    nodes = resources.get("nodes")
    if isinstance(nodes, dict):  # v0.0.41+: nodes.allocation[] with cpus.count, memory.allocated
        entries = nodes.get("allocation") or []
        return {text(e.get("name"), f"{where}: job_resources.nodes.allocation.name"):
                (count((e.get("cpus") or {}).get("count"), f"{where}: allocation cpus.count"),
                 count((e.get("memory") or {}).get("allocated", 0), f"{where}: allocation memory.allocated"))
                for e in _objects(entries, f"{where}: job_resources.nodes.allocation")}
    # 22.05 to v0.0.40: allocated_nodes[] with the allocated cores listed per socket
    entries = resources.get("allocated_nodes") or []
    return {text(e.get("nodename"), f"{where}: allocated_nodes.nodename"):
            (_cores(e.get("sockets"), where), count(e.get("memory_allocated", 0), f"{where}: memory_allocated"))
            for e in _objects(entries, f"{where}: job_resources.allocated_nodes")}


def _objects(value: Any, field: str) -> list[dict]:
    if not isinstance(value, list) or not all(isinstance(e, dict) for e in value):
        raise SourceError(f"{field}: expected a list of objects")
    return value


def _cores(sockets: Any, where: str) -> int:
    """Allocated cores in {"0": {"cores": {"0": "allocated", ...}}, ...}."""
    if not isinstance(sockets, dict):
        raise SourceError(f"{where}: allocated_nodes.sockets: expected an object")
    total = 0
    for socket in sockets.values():
        cores = socket.get("cores") if isinstance(socket, dict) else None
        if not isinstance(cores, dict):
            raise SourceError(f"{where}: allocated_nodes.sockets.cores: expected an object")
        total += sum(1 for status in cores.values() if str(status).startswith("allocated"))
    return total


# -- topology --------------------------------------------------------------------------------
def parse_topology(output: str) -> dict[str, str]:
    """node -> its leaf switch from ``scontrol show topology`` (topology/tree); empty without one.

    A node's switch is the lowest-level switch that lists it: the one its traffic leaves by.
    """
    best: dict[str, tuple[int, str]] = {}
    for line in output.splitlines():
        fields = dict(pair.partition("=")[::2] for pair in line.split())
        if "SwitchName" not in fields:
            continue  # "No topology information available", blank lines, topology/block lines
        name, level = fields["SwitchName"], fields.get("Level", "0")
        if not name or not level.isdigit():
            raise SourceError(f"scontrol show topology: bad switch line {line.strip()!r}")
        for node in expand_hostlist(fields.get("Nodes", "")):
            if node not in best or int(level) < best[node][0]:
                best[node] = (int(level), name)
    return {node: name for node, (_, name) in best.items()}


def read_blocks(output: str) -> Blocks | None:
    """The base blocks in ``scontrol show topology`` under topology/block (23.11+; from
    topology.conf or, on 25.05+, topology.yaml: printed alike), None without them
    (``slurm/blocks.py``); SourceError naming a line that does not read."""
    try:
        return Blocks.parse(output)
    except ValueError as exc:
        raise SourceError(str(exc)) from None


def describe_topology(switches: dict[str, str], blocks: Blocks | None) -> dict[str, Any]:
    """What the topology reading found, for ``status``: the plugin it shows (tree, block or none),
    each leaf switch or base block by name with its nodes, and how many nodes they hold."""
    if switches:
        members: dict[str, list[str]] = {}
        for node, switch in switches.items():
            members.setdefault(switch, []).append(node)
        return {"plugin": "tree", "nodes": len(switches),
                "switches": [{"name": name, "nodes": hostlist.compress(nodes)} for name, nodes in members.items()]}
    if blocks is not None:
        return {**blocks.describe(), "nodes": len(blocks.block_of())}
    return {"plugin": "none"}


def node_shares(total: int, weights: Sequence[int]) -> list[int]:
    """``total`` tasks split over nodes in proportion to ``weights`` (largest remainder, ties
    to the earlier node); equal weights when none are known."""
    if not weights:
        return []
    if sum(weights) <= 0:
        weights = [1] * len(weights)
    whole = sum(weights)
    shares = [total * w // whole for w in weights]
    rest = sorted(range(len(weights)), key=lambda i: (-(total * weights[i] % whole), i))
    for i in rest[: total - sum(shares)]:
        shares[i] += 1
    return shares
