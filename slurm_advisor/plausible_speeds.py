"""Which speeds are plausible: one rule for the report the daemon takes and the sample training reads.

A speed is iterations per second. It must be finite and within a fixed absolute range
(``MIN_SPEED`` to ``MAX_SPEED``): a report of 1e-300 iterations over 1e300 s gave a stored speed
of 0.0, and three such samples among 114 made every later retrain end in a traceback (log 0).
Once a job type has ``TYPE_MIN_KNOWN`` known speeds (the daemon seeds them from the store's newest
live samples at start, then adds each report it takes), a new one may also be at most
``TYPE_FACTOR`` times off their median (per worker, so that a 64-worker job and a 1-worker job of
the same type compare). Pure: no I/O, no clock, and no numpy (outside ``domain``, whose package
imports it): the protocol, which job-side reporters import, uses ``speed_problem``.
"""
from __future__ import annotations

import math
import statistics
import threading
from collections import Counter, deque
from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from slurm_advisor.domain.observation import SpeedSample

MIN_SPEED = 1e-6       # it/s: a job slower than one iteration in 11.6 days is not training
MAX_SPEED = 1e6        # it/s: beyond this a report is a bug or a lie, not a speed
TYPE_FACTOR = 100.0    # at most this far from the type's median per-worker speed ...
TYPE_MIN_KNOWN = 20    # ... once the type has this many known speeds
TYPE_WINDOW = 256      # the most recent speeds kept per type


def speed_problem(speed: float) -> str | None:
    """Why ``speed`` (it/s) is not plausible; None when it is."""
    if not math.isfinite(speed):
        return f"speed {speed} it/s is not finite"
    if speed < MIN_SPEED:  # 0.0 included: what 1e-300 iterations over 1e300 s gives
        return f"speed {speed:.3g} it/s is below {MIN_SPEED:g} (plausible: {MIN_SPEED:g} to {MAX_SPEED:g} it/s)"
    if speed > MAX_SPEED:
        return f"speed {speed:.3g} it/s is above {MAX_SPEED:g} (plausible: {MIN_SPEED:g} to {MAX_SPEED:g} it/s)"
    return None


class TypeSpeeds:
    """The recent per-worker speeds of each job type, and whether a new one is plausible beside them.
    Thread-safe: the report port and the socket may both report."""

    def __init__(self, factor: float = TYPE_FACTOR, min_known: int = TYPE_MIN_KNOWN, window: int = TYPE_WINDOW):
        self.factor, self.min_known, self.window = factor, min_known, window
        self._speeds: dict[str, deque[float]] = {}
        self._lock = threading.Lock()

    def problem(self, job_type: str, per_worker: float) -> str | None:
        """Why ``per_worker`` it/s is implausible for ``job_type`` (None: plausible, or too few known)."""
        with self._lock:
            known = list(self._speeds.get(job_type, ()))
        if len(known) < self.min_known:
            return None
        median = statistics.median(known)
        low, high = median / self.factor, median * self.factor
        if low <= per_worker <= high:
            return None
        return (f"{per_worker:.3g} it/s per worker is more than {self.factor:g}x from the median {median:.3g} of "
                f"the {len(known)} known {job_type} speeds (plausible: {low:.3g} to {high:.3g} it/s per worker)")

    def add(self, job_type: str, per_worker: float) -> None:
        with self._lock:
            self._speeds.setdefault(job_type, deque(maxlen=self.window)).append(per_worker)

    def known(self, job_type: str) -> int:
        with self._lock:
            return len(self._speeds.get(job_type, ()))

    def seed(self, samples: Iterable[SpeedSample]) -> int:
        """Add the usable ``samples`` (oldest first) as known speeds; returns how many."""
        added = 0
        for sample in samples:
            if sample_problem(sample) is None:
                self.add(sample.subject.job.type, sample.speed / sample.subject.job.num_workers)
                added += 1
        return added


def sample_problem(sample: SpeedSample) -> str | None:
    """Why training cannot use ``sample`` (a short reason, the key it is counted under); None: usable."""
    speed = sample.speed
    if not isinstance(speed, (int, float)) or not math.isfinite(speed):
        return "non-finite speed"
    if speed <= 0:
        return "non-positive speed"
    if not MIN_SPEED <= speed <= MAX_SPEED:
        return f"speed outside {MIN_SPEED:g} to {MAX_SPEED:g} it/s"
    if sample.subject.job.num_workers < 1:
        return "no workers"
    return None


def usable_samples(samples: Iterable[SpeedSample]) -> tuple[list[SpeedSample], Counter[str]]:
    """(the samples training can use, how many of the others were skipped for each reason)."""
    kept, skipped = [], Counter()
    for sample in samples:
        problem = sample_problem(sample)
        if problem is None:
            kept.append(sample)
        else:
            skipped[problem] += 1
    return kept, skipped


def describe_skipped(skipped: Counter[str] | dict[str, int], verb: str = "skipped ") -> str:
    """One line: ``skipped 5 samples training cannot use: 3 non-positive speed, 2 unreadable``."""
    total = sum(skipped.values())
    reasons = ", ".join(f"{n} {why}" for why, n in sorted(skipped.items(), key=lambda kv: (-kv[1], kv[0])))
    return f"{verb}{total} sample{'s' if total != 1 else ''} training cannot use: {reasons}"
