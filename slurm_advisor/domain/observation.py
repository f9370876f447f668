"""An observed speed: what the live system logs and what the learned speed model trains on."""
from __future__ import annotations

from dataclasses import dataclass

from slurm_advisor.domain.cluster import Node, RunningJob


@dataclass(frozen=True, slots=True)
class SpeedSample:
    """Job ``subject`` ran at ``speed`` iterations/s at ``time``, next to ``neighbours``.

    ``neighbours`` are the running jobs sharing at least one node with the subject, and
    ``nodes`` the nodes the subject or its neighbours use: everything a local speed model
    may look at, and nothing the simulator knows that a real cluster would not log.
    """

    time: float
    subject: RunningJob
    neighbours: tuple[RunningJob, ...]
    nodes: tuple[Node, ...]
    speed: float
    source: str = "sim"
