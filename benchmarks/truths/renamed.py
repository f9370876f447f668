"""A project truth seen as a new site sees it: the published job types under names of the
site's own (``team-00`` ...), which ``jobtypes`` does not know, while the speeds still follow
the published type. The speed model then learns every type from the logged samples alone.
Not frozen: this is the project's truth, on which a speed model's settings may be tuned.
"""
from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import replace

from slurm_advisor.domain import Node, RunningJob
from slurm_advisor.domain.jobtypes import KNOWN_TYPES

ALIASES: dict[str, str] = {f"team-{i:02d}": name for i, name in enumerate(sorted(KNOWN_TYPES))}


class RenamedTypes:
    """``inner`` judging jobs whose types are aliases (``ALIASES``) as the types they stand for."""

    def __init__(self, inner):
        self.inner, self.name, self.local = inner, f"{inner.name}/renamed", inner.local

    @staticmethod
    def _published(rj: RunningJob) -> RunningJob:
        job = rj.job
        return RunningJob(replace(job, type=ALIASES.get(job.type, job.type)), rj.placement, rj.start_time)

    def speeds(self, nodes: Sequence[Node], running: Sequence[RunningJob],
               only: Collection[str] | None = None) -> dict[str, float]:
        return self.inner.speeds(nodes, [self._published(rj) for rj in running], only)
