"""Slurm's queue discipline: FIFO by submit time, with EASY backfill.

When the first waiting job cannot start, it gets a reservation at the *shadow time*: the
earliest moment enough resources free up (by the running jobs' expected ends). A later job
may jump ahead only if it fits now and either ends before the shadow time or uses only what
the reserved job will leave over ("extra"). Resources are compared cluster-wide (Slurm
checks nodes; our aggregate check is a documented simplification). A job's expected run
time is its run time alone, which stands in for the user's --time limit.
"""
from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from slurm_advisor.domain import Job, Resources


@dataclass
class Reservation:
    shadow_time: float
    extra: Resources

    def admits(self, job: Job, now: float, expected_runtime: float) -> bool:
        """May ``job`` start now without delaying the reserved job? Consumes extra if needed."""
        if now + expected_runtime <= self.shadow_time:
            return True
        need = job.total_demand()
        if need.fits_in(self.extra):
            self.extra = self.extra - need
            return True
        return False


def reserve(job: Job, free_total: Resources, ends: Iterable[tuple[float, Resources]]) -> Reservation:
    """``ends``: (expected end time, resources released) of every running job."""
    need = job.total_demand()
    available = free_total
    for end, released in sorted(ends, key=lambda e: e[0]):
        available = available + released
        if need.fits_in(available):
            return Reservation(end, available - need)
    return Reservation(math.inf, Resources())
