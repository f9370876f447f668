"""The cluster-state source contract: something that can tell the advisor what the cluster holds now.

The daemon and the benchmarks depend only on this Protocol, so a test swaps the real Slurm for
the simulated source without an ``if simulating:`` anywhere (STYLE.md, rule 1).
"""
from __future__ import annotations

from typing import Protocol

from slurm_advisor.domain import ClusterSnapshot


class SourceError(RuntimeError):
    """The source could not read the cluster; the message is one line naming what failed."""


class ClusterSource(Protocol):
    name: str

    def snapshot(self) -> ClusterSnapshot:
        """The cluster now: nodes in Slurm's order, free capacity, the advisor's running jobs.

        May do I/O (run Slurm's commands); raises :class:`SourceError` when it cannot read.
        """
        ...
