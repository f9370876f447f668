"""A truth in which placement does not matter: every job runs at one fixed speed.

With 1 iteration/s, a job's iterations are its seconds: the reference for checking the
simulator's scheduling against a real Slurm running ``sleep`` jobs.
"""
from __future__ import annotations

from collections.abc import Collection, Sequence

from slurm_advisor.domain import Node, RunningJob


class ConstantSpeed:
    name = "constant"
    local = True

    def __init__(self, speed: float = 1.0):
        if not speed > 0:
            raise ValueError("speed must be positive")
        self.speed = speed

    def speeds(self, nodes: Sequence[Node], running: Sequence[RunningJob],
               only: Collection[str] | None = None) -> dict[str, float]:
        return {rj.job.id: self.speed for rj in running if only is None or rj.job.id in only}
