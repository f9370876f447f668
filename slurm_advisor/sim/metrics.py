"""What a simulation reports: one record per finished job and the summary figures."""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True, slots=True)
class JobRecord:
    job_id: str
    type: str
    submit: float
    start: float
    end: float
    isolated_runtime: float  # the job's run time alone, consolidated, under the same truth
    num_nodes: int
    gpus: int
    state: str = "COMPLETED"   # or "TIMEOUT": Slurm ended it at its time limit
    time_limit: float = math.inf

    @property
    def jct(self) -> float:
        return self.end - self.submit

    @property
    def slowdown(self) -> float:
        """How much slower the job ran than alone (queueing is reported separately)."""
        return (self.end - self.start) / self.isolated_runtime


@dataclass(frozen=True)
class SimResult:
    policy: str
    records: tuple[JobRecord, ...]
    total_gpus: int
    skipped: tuple[str, ...] = ()          # jobs that can never fit on this cluster
    fallbacks: int = 0                      # decisions the policy left to the fallback
    progress: tuple = field(default=(), repr=False)  # (job, t0, t1, fraction) when logged
    holds: int = 0                          # times the policy chose to wait for a better placement

    @property
    def makespan(self) -> float:
        if not self.records:
            return 0.0
        return max(r.end for r in self.records) - min(r.submit for r in self.records)

    def queue_growth(self) -> float:
        """How much the queue grew over the arrivals, in jobs per job submitted: the least-squares
        trend of the number of waiting jobs, sampled at every arrival, times the arrival window,
        over the number of jobs. About 0 while the cluster keeps up (the queue comes and goes);
        it approaches ``1 - capacity / load`` when arrivals outpace what the policy can serve
        and the queue grows without bound."""
        if len(self.records) < 3:
            return 0.0
        submit = np.array(sorted(r.submit for r in self.records))
        start = np.sort(np.array([r.start for r in self.records]))
        # waiting at time t: submitted by t (inclusive) minus started by t (inclusive)
        waiting = np.searchsorted(submit, submit, side="right") - np.searchsorted(start, submit, side="right")
        span = submit[-1] - submit[0]
        if span <= 0:
            return 0.0
        slope = np.polyfit(submit - submit[0], waiting.astype(float), 1)[0]
        return float(slope * span / len(self.records))

    def summary(self) -> dict[str, float]:
        if not self.records:
            return {"jobs": 0}
        jct = np.array([r.jct for r in self.records])
        wait = np.array([r.start - r.submit for r in self.records])
        slow = np.array([r.slowdown for r in self.records])
        busy = sum(r.gpus * (r.end - r.start) for r in self.records)
        span = self.makespan
        return {
            "jobs": len(self.records),
            "avg_jct": float(jct.mean()),
            "p95_jct": float(np.percentile(jct, 95)),
            "makespan": float(span),
            "avg_queueing": float(wait.mean()),
            "mean_slowdown": float(slow.mean()),
            "utilization": float(busy / (self.total_gpus * span)) if self.total_gpus and span else 0.0,
            "timeouts": sum(r.state == "TIMEOUT" for r in self.records),
            "skipped": len(self.skipped),
            "fallbacks": self.fallbacks,
            "holds": self.holds,
        }
