"""The cluster file (TOML): groups of identical nodes.

    [[nodes]]
    prefix = "gpu"      # nodes gpu01 .. gpu16 (zero-padded to the width of count)
    count = 16
    cpus = 32
    gpus = 8
    mem_mb = 256000
    switch = "s1"       # optional: nodes on different switches pay for cross-switch traffic
    features = ["v100"] # optional

The file must be UTF-8 (as TOML requires). A node must have some CPUs, GPUs or memory.

Bounds, so that no file can hang a command or overflow numpy's arrays (sites run up to ~10,000
nodes): at most ``MAX_NODES`` nodes in all, a node at most ``MAX_NODE`` of each resource, a
``start`` at most 1e9, a file at most ``MAX_CLUSTER_BYTES``. Each is refused naming the file,
the group and the key.
"""
from __future__ import annotations

import tomllib
from collections import Counter
from importlib.resources import files
from pathlib import Path

from slurm_advisor.domain import Node
from slurm_advisor.errors import InputError

_KEYS = {"prefix", "count", "cpus", "gpus", "mem_mb", "switch", "features", "start"}
_REQUIRED = ("prefix", "count", "cpus", "gpus", "mem_mb")
DEFAULT_CLUSTER = "default_cluster.toml"
MAX_NODES = 100_000                  # count = 10^8 took simulate to 2.9 GB with no message
MAX_NODE = {"count": MAX_NODES, "cpus": 65_536, "gpus": 1_024, "mem_mb": 10**9}  # mem: 1 PB
MAX_START = 10**9
MAX_CLUSTER_BYTES = 16 * 1024 * 1024


def read_cluster(path: str | Path) -> tuple[Node, ...]:
    path = Path(path)
    try:
        data = tomllib.loads(read_bounded(path, MAX_CLUSTER_BYTES).decode("utf-8"))
    except OSError as e:
        raise InputError(f"{path}: cannot read cluster file: {e.strerror}") from None
    except UnicodeDecodeError as e:
        raise InputError(f"{path}: not UTF-8 text (byte {e.start}); TOML files must be UTF-8") from None
    except ValueError as e:  # TOMLDecodeError, or int() of a literal of more than 4,300 digits
        raise InputError(f"{path}: not valid TOML: {e}") from None
    return parse_cluster(data, str(path))


def read_bounded(path: Path, limit: int, what: str = "cluster") -> bytes:
    """The file's bytes; InputError naming it when it holds more than ``limit``."""
    with path.open("rb") as f:
        data = f.read(limit + 1)
    if len(data) > limit:
        raise InputError(f"{path}: more than {limit:,} bytes; a {what} file may hold at most {limit:,}")
    return data


def parse_cluster(data: dict, source: str = "<cluster>") -> tuple[Node, ...]:
    groups = data.get("nodes")
    unknown = set(data) - {"nodes"}
    if unknown:
        raise InputError(f"{source}: unknown top-level key(s) {sorted(unknown)}; expected [[nodes]]")
    if not isinstance(groups, list) or not groups:
        raise InputError(f"{source}: needs at least one [[nodes]] group")
    nodes: list[Node] = []
    for i, group in enumerate(groups, start=1):
        nodes.extend(_parse_group(group, f"{source}: [[nodes]] #{i}"))
        if len(nodes) > MAX_NODES:  # checked per group: no more than one group's nodes are built
            total = len(nodes) + sum(g.get("count", 0) for g in groups[i:] if isinstance(g, dict)
                                     and isinstance(g.get("count"), int))
            raise InputError(f"{source}: {total:,} nodes; a cluster may have at most {MAX_NODES:,}")
    dupes = sorted(name for name, k in Counter(n.name for n in nodes).items() if k > 1)
    if dupes:
        raise InputError(f"{source}: node name(s) defined twice: {', '.join(dupes[:5])}")
    return tuple(nodes)


def _parse_group(group: dict, where: str) -> list[Node]:
    if not isinstance(group, dict):
        raise InputError(f"{where}: must be a table of keys, got {group!r}")
    unknown = set(group) - _KEYS
    if unknown:
        raise InputError(f"{where}: unknown key(s) {sorted(unknown)}; valid keys: {sorted(_KEYS)}")
    for key in _REQUIRED:
        if key not in group:
            raise InputError(f"{where}: missing key '{key}'")
    for key, most in MAX_NODE.items():
        value = group[key]
        if not isinstance(value, int) or isinstance(value, bool) or not (1 if key == "count" else 0) <= value <= most:
            raise InputError(f"{where}: '{key}' must be a {'positive' if key == 'count' else 'non-negative'} "
                             f"integer, at most {most:,}, got {value!r}")
    if not isinstance(group["prefix"], str) or not group["prefix"]:
        raise InputError(f"{where}: 'prefix' must be a non-empty string")
    switch = group.get("switch")
    if switch is not None and not isinstance(switch, str):
        raise InputError(f"{where}: 'switch' must be a string")
    features = group.get("features", [])
    if not isinstance(features, list) or not all(isinstance(f, str) for f in features):
        raise InputError(f"{where}: 'features' must be a list of strings")
    if not any(group[key] > 0 for key in ("cpus", "gpus", "mem_mb")):
        raise InputError(f"{where}: a node needs some 'cpus', 'gpus' or 'mem_mb'; all are 0")
    count, start = group["count"], group.get("start", 1)
    if not isinstance(start, int) or isinstance(start, bool) or not 0 <= start <= MAX_START:
        raise InputError(f"{where}: 'start' must be a non-negative integer, at most {MAX_START:,}, got {start!r}")
    width = max(2, len(str(start + count - 1)))
    return [Node(f"{group['prefix']}{i:0{width}d}", group["cpus"], group["gpus"], group["mem_mb"],
                 switch, frozenset(features)) for i in range(start, start + count)]


def default_cluster() -> tuple[Node, ...]:
    """The cluster shipped with the package (``data/default_cluster.toml``): 8 nodes x 8 GPUs."""
    resource = files("slurm_advisor") / "data" / DEFAULT_CLUSTER
    return parse_cluster(tomllib.loads(resource.read_text()), f"<package>/data/{DEFAULT_CLUSTER}")
