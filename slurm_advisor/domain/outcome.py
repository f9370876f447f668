"""How an advised job ended (or where it stands): what Slurm says of it, kept per Slurm job id."""
from __future__ import annotations

from dataclasses import dataclass

#: Slurm's final job states: once in one of these a job never runs again.
FINAL_STATES = frozenset({"COMPLETED", "FAILED", "TIMEOUT", "CANCELLED", "NODE_FAIL", "PREEMPTED",
                          "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE", "REVOKED", "SPECIAL_EXIT"})


@dataclass(frozen=True, slots=True)
class Outcome:
    """Job ``job_id`` in ``state``; times in seconds since the epoch, None while Slurm has none.
    ``tasks``: Slurm's task count on each of ``nodes`` (same order), read from Slurm, and
    ``tasks_from`` where (``scontrol show job -d``, ...); () and "" where not read."""

    job_id: str
    state: str
    decision_id: str | None = None
    submit_time: float | None = None
    start_time: float | None = None
    end_time: float | None = None
    nodes: tuple[str, ...] = ()
    tasks: tuple[int, ...] = ()
    tasks_from: str = ""

    @property
    def final(self) -> bool:
        return self.state in FINAL_STATES
