"""A speed report a running job sent the daemon: how many iterations it did in how many seconds."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class SpeedReport:
    """Job ``job_id`` (Slurm's id) did ``iterations`` in the ``seconds`` before ``window_end``.

    Times are seconds since the epoch. ``decision_id`` is the advice the job ran under, None for
    a job the daemon did not advise; ``uid`` is the reporter's (from the socket's peer credentials).
    """

    job_id: str
    uid: int
    iterations: float
    seconds: float
    window_end: float
    decision_id: str | None = None
    received_at: float | None = None  # when the daemon took it; None: window_end

    @property
    def window_start(self) -> float:
        return self.window_end - self.seconds

    @property
    def speed(self) -> float:
        """Iterations per second over the window."""
        return self.iterations / self.seconds
