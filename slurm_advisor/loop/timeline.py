"""The simulated jobs' speed reports and ends, sent to the daemon in simulated-time order.

The simulator's recorder says, at every step, each touched job's speed from then on; the
cluster at that moment (``sim.snapshot``) is the job's context until its next change. A job
reports once per such steady phase, at its end, the iterations it did and the seconds it took
(as ``Reporter`` would at the end of a phase), while the daemon's view of the cluster still
shows the phase's neighbours; its last phase ends with the job (the simulator's record).

Reports go after the trace has run, not while it runs: the engine tells a job's end only in
its result (a per-step or on-end callback in sim/engine.py would let them flow live). Nothing
the daemon decides in a cycle depends on them: the model changes only at retrain.
"""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from slurm_advisor.domain import ClusterSnapshot, SpeedSample
from slurm_advisor.sim.metrics import SimResult


@dataclass(frozen=True)
class Phase:
    job_id: str
    start: float
    end: float
    speed: float
    context: ClusterSnapshot  # the cluster during the phase

    @property
    def seconds(self) -> float:
        return self.end - self.start


class Timeline:
    """Bind to a simulation (``bind``), pass ``record`` as its recorder, then ``phases(result)``."""

    def __init__(self) -> None:
        self._points: dict[str, list[tuple[float, float, ClusterSnapshot]]] = defaultdict(list)
        self._sim = None

    def bind(self, sim) -> None:
        self._sim = sim

    def record(self, samples: list[SpeedSample]) -> None:
        context = self._sim.snapshot
        for s in samples:
            self._points[s.subject.job.id].append((s.time, s.speed, context))

    def phases(self, result: SimResult) -> list[Phase]:
        """Every job's steady phases, ordered by their end (then job id)."""
        out = []
        for record in result.records:
            points = self._points.get(record.job_id, [])
            for i, (t, speed, context) in enumerate(points):
                end = points[i + 1][0] if i + 1 < len(points) else record.end
                if end > t:
                    out.append(Phase(record.job_id, t, end, speed, context))
        return sorted(out, key=lambda p: (p.end, p.job_id))


def replay(phases: Sequence[Phase], result: SimResult, *, show: Callable[[ClusterSnapshot], None],
           report: Callable[[Phase], bool], ended: Callable[[str, float, str], None]) -> tuple[int, int]:
    """In simulated-time order: for each moment, the phases ending then are reported with their
    context shown (``show`` publishes a snapshot to the daemon), then the jobs ending then end.
    Returns (reports sent, reports the daemon took)."""
    ends: dict[float, list] = defaultdict(list)
    for r in result.records:
        ends[r.end].append(r)
    by_time: dict[float, list[Phase]] = defaultdict(list)
    for p in phases:
        by_time[p.end].append(p)
    sent = taken = 0
    for t in sorted(set(ends) | set(by_time)):
        groups: dict[int, list[Phase]] = defaultdict(list)
        for p in by_time.get(t, []):
            groups[id(p.context)].append(p)
        for group in groups.values():
            show(group[0].context)
            for p in group:
                sent += 1
                taken += report(p)
        for r in ends.get(t, []):
            ended(r.job_id, r.end, r.state)
    return sent, taken
