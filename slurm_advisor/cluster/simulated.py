"""A cluster file plus simulated running jobs: the source for the daemon's tests and benchmarks.

The running load is whatever the caller starts and finishes (``start``, ``finish``) or draws
(``fill``: synthetic jobs placed as Slurm would place them until about a given share of the
GPUs is busy). Every change makes a new immutable snapshot under a lock, so the daemon's
refresher thread and a test driving the load never see half an update.
"""
from __future__ import annotations

import dataclasses
import threading
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from slurm_advisor.domain import ClusterSnapshot, Job, Placement, RunningJob
from slurm_advisor.policies.slurm_default import SlurmDefaultPolicy
from slurm_advisor.sim.clusterfile import default_cluster, read_cluster
from slurm_advisor.traces.synthetic import synthetic_jobs

#: fill() gives up after this many drawn jobs in a row that do not fit (the cluster is
#: fragmented, or only jobs above the target are left).
_MAX_MISSES = 50


class SimulatedSource:
    name = "simulated"

    def __init__(self, cluster_file: str | Path | None = None, running: Iterable[RunningJob] = ()):
        nodes = default_cluster() if cluster_file is None else read_cluster(cluster_file)
        self._lock = threading.Lock()
        self._snapshot = ClusterSnapshot.empty(nodes)
        self._drawn = 0  # ids of fill()'s jobs: fill-0, fill-1, ...
        for rj in running:
            self.start(rj.job, rj.placement, rj.start_time)

    def snapshot(self) -> ClusterSnapshot:
        with self._lock:
            return self._snapshot

    def start(self, job: Job, placement: Placement, time: float | None = None) -> None:
        """``job`` runs on ``placement`` from now on; ValueError if it does not fit."""
        with self._lock:
            self._snapshot = self._snapshot.with_job(job, placement, time)

    def finish(self, job_id: str, time: float | None = None) -> None:
        """``job_id`` has ended and its capacity is free; KeyError if it is not running."""
        with self._lock:
            self._snapshot = self._snapshot.without_job(job_id, time)

    def gpu_share(self) -> float:
        """The share of the cluster's GPUs held by running jobs."""
        snap = self.snapshot()
        total = int(snap.layout.capacity[:, 1].sum())
        return 1.0 - int(snap.free_array()[:, 1].sum()) / total if total else 0.0

    def fill(self, fraction: float, rng: np.random.Generator, mix: str = "large") -> list[str]:
        """Start synthetic jobs (``mix`` of ``synthetic_jobs``), each where slurm-default puts
        it, until about ``fraction`` of the GPUs is busy; never past it. Returns the new ids."""
        if not 0.0 <= fraction <= 1.0:
            raise ValueError(f"fraction must be within [0, 1], not {fraction!r}")
        policy, started, misses = SlurmDefaultPolicy(), [], 0
        with self._lock:
            snap = self._snapshot
            total = int(snap.layout.capacity[:, 1].sum())
            target = fraction * total
            while misses < _MAX_MISSES and total - int(snap.free_array()[:, 1].sum()) < target:
                job = self._draw(rng, mix)
                room = target - (total - int(snap.free_array()[:, 1].sum()))
                placement = policy.place(snap, job) if job.total_demand().gpus <= room else None
                if placement is None:
                    misses += 1
                    continue
                snap, misses = snap.with_job(job, placement), 0
                started.append(job.id)
            self._snapshot = snap
        return started

    def _draw(self, rng: np.random.Generator, mix: str) -> Job:
        job = synthetic_jobs(1, seed=int(rng.integers(2**31)), mix=mix)[0]
        self._drawn += 1
        return dataclasses.replace(job, id=f"fill-{self._drawn - 1}")
