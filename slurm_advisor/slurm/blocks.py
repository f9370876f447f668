"""topology/block as Slurm places under it: which node sets a pin may name. Pure.

Under topology/block (``BlockName=`` lines in topology.conf, 23.11+; or a ``block:`` topology in
topology.yaml, 25.05+, where ``scontrol show config`` still says topology/flat) Slurm keeps a job
inside one block of the smallest configured size that holds its node count. ``scontrol show
topology`` prints the same lines on 24.11 and 26.05 whichever file they came from
(``topology/block/topology_block.c:_print_topo_record``)::

    BlockName=b1 BlockIndex=0 Nodes=n[1-2] BlockSize=2
    BlockName=b2 BlockIndex=1 Nodes=n[3-4] BlockSize=2
    AggregatedBlock=b[1-2] BlockIndex=2 Nodes=n[1-4] BlockSize=4

The base blocks' BlockSize is the base block size (``bblock_node_cnt``); the aggregated lines'
sizes are the configured levels (BlockSizes), printed up to the first that spans every block.

:meth:`Blocks.allows` is ``topology/block/eval_nodes_block.c``'s test of required nodes (read at
slurm-24-11-7-1 and slurm-26-05-3-1, the same there): for a job of N nodes, ``_get_block_level``
gives the level of ceil(N / base size) base blocks, rounded up to a configured level (past the
last: the whole topology); the required nodes must all lie in one aligned block of that level
("requires nodes that do not have shared block"), touch no more lower-level blocks than N needs
("exceed maximum llblock limit"), and lie in blocks at all. On the 24.11 and 26.05 testbeds (two
blocks of two nodes) ``-w n1,n2`` and ``-w n1,n2,n3`` run, ``-w n2,n3`` is refused at submission.

:meth:`Blocks.segment` is the 26.05 path for a pin across blocks: with ``segment_size`` S the job
is S-node segments each placed by that rule, chosen among the required nodes (26.05.5 testbed:
``-N 2 -w n1,n3 --segment=1`` runs on n1 and n3; 24.11.5 refuses it, and its job_submit/lua
cannot set ``segment_size``: job_submit_lua.c gained it in 26.05, commit ae5a0d6d77).
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from slurm_advisor.slurm import hostlist


@dataclass(frozen=True)
class Blocks:
    """The base blocks in Slurm's order (BlockIndex), their nodes, the base block size in nodes
    and the configured levels (level L: blocks of 2**L base blocks)."""

    names: tuple[str, ...]
    nodes: tuple[tuple[str, ...], ...]
    base_size: int
    levels: tuple[int, ...]

    @classmethod
    def parse(cls, text: str) -> Blocks | None:
        """The blocks ``scontrol show topology`` printed; None without BlockName lines.
        ValueError naming the line for a line that does not read."""
        base: list[tuple[int, str, tuple[str, ...], int]] = []
        sizes: set[int] = set()
        for line in text.splitlines():
            fields = dict(pair.partition("=")[::2] for pair in line.split())
            if "BlockName" not in fields and "AggregatedBlock" not in fields:
                continue
            try:
                index, size = int(fields["BlockIndex"]), int(fields["BlockSize"])
                nodes = tuple(hostlist.expand(fields.get("Nodes", ""), "block nodes")) if fields.get("Nodes") else ()
            except (KeyError, ValueError):
                raise ValueError(f"scontrol show topology: bad block line {line.strip()!r}") from None
            if "BlockName" in fields:
                if not fields["BlockName"] or size < 1:
                    raise ValueError(f"scontrol show topology: bad block line {line.strip()!r}")
                base.append((index, fields["BlockName"], nodes, size))
            sizes.add(size)
        if not base:
            return None
        base.sort()
        base_size = base[0][3]
        levels = sorted({int(math.log2(s // base_size)) for s in sizes if s % base_size == 0 and s >= base_size
                         and (s // base_size) & (s // base_size - 1) == 0})
        return cls(tuple(b[1] for b in base), tuple(b[2] for b in base), base_size, tuple(levels))

    @cached_property
    def _where(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for i, nodes in enumerate(self.nodes):
            for node in nodes:
                out.setdefault(node, i)
        return out

    def block_of(self) -> Mapping[str, int]:
        """node -> the index of its base block (the first that lists it). Built once: a decision's
        test costs the nodes it names, not the cluster's."""
        return self._where

    def allows(self, nodes: Iterable[str]) -> bool:
        """Whether Slurm accepts a job of exactly these nodes required (``-w``, min = max nodes)."""
        where = self.block_of()
        chosen = set(nodes)
        if not chosen or any(n not in where for n in chosen):
            return False
        blocks = sorted({where[n] for n in chosen})
        level, low = self._levels(len(chosen))
        if level is not None and len({b >> level for b in blocks}) > 1:
            return False
        most = math.ceil(len(chosen) / (self.base_size << low))
        return len({b >> low for b in blocks}) <= most

    def _levels(self, count: int) -> tuple[int | None, int]:
        """(``_get_block_level``'s level for ``count`` nodes, None for the whole topology;
        the lower level whose blocks count against the limit)."""
        wanted = math.ceil(math.log2(max(1, math.ceil(count / self.base_size))))
        lower = [lv for lv in self.levels if lv <= wanted - 1]
        low = max(lower) if wanted > 0 and lower else 0
        level = next((lv for lv in self.levels if lv >= wanted), None)
        return level, low

    def segment(self, nodes: Iterable[str]) -> int | None:
        """The segment size under which 26.05 accepts exactly these nodes as a pin across blocks:
        the largest size that splits every base block's share of them evenly (each segment then
        inside one base block), when it is below the node count; None otherwise."""
        where = self.block_of()
        chosen = set(nodes)
        if not chosen or any(n not in where for n in chosen):
            return None
        counts: dict[int, int] = {}
        for n in chosen:
            counts[where[n]] = counts.get(where[n], 0) + 1
        size = math.gcd(*counts.values())
        return size if size < len(chosen) and len(chosen) % size == 0 else None

    def describe(self) -> dict[str, Any]:
        """For ``status``: each base block by name with its nodes, and the block sizes in nodes."""
        return {"plugin": "block", "base_block_nodes": self.base_size,
                "block_sizes": [self.base_size << lv for lv in self.levels],
                "blocks": [{"name": name, "nodes": hostlist.compress(nodes)}
                           for name, nodes in zip(self.names, self.nodes, strict=True)]}
