"""The simulated site as the daemon reads it: the cluster (``LoopSource``) and Slurm's queue
(``LoopQueue``), both kept by the loop in step with the simulator.

The source shows the snapshot the loop publishes: at an advise request the very snapshot the
simulator hands its policy (Slurm's backfill reservations already taken out), so the daemon
decides on what the in-process policy would have seen. The queue lists the simulated jobs as
``squeue`` would: owner, state, submit/start/end times and nodes, and for the advised ones the
decision id the hook stamped into admin_comment. Its times are the simulator's clock plus
``origin`` (epoch seconds), so outcomes read like a site's.
"""
from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass

from slurm_advisor.daemon.queue import AdvisedJob, Listing, QueueError
from slurm_advisor.domain import ClusterSnapshot, Node


class LoopSource:
    name = "simulated"

    def __init__(self, nodes: Sequence[Node]):
        self._lock = threading.Lock()
        self._snapshot = ClusterSnapshot.empty(tuple(nodes))

    def show(self, snapshot: ClusterSnapshot) -> None:
        with self._lock:
            self._snapshot = snapshot

    def snapshot(self) -> ClusterSnapshot:
        with self._lock:
            return self._snapshot


@dataclass
class _Entry:
    job_id: str
    uid: int
    submit: float
    tasks: int
    decision: str | None = None  # set for advised jobs (place, cap) and observed ones
    observed: bool = False       # observe mode: stamped, never constrained
    released: bool = False
    state: str = "PENDING"
    start: float = 0.0
    end: float = 0.0
    nodes: tuple[str, ...] = ()


class LoopQueue:
    """The queue interface the daemon's refresher uses (``read``, ``advised``, ``release``)."""

    def __init__(self, origin: float = 0.0):
        self.origin = origin
        self._jobs: dict[str, _Entry] = {}
        self._lock = threading.Lock()
        self.releases = 0

    def clear(self) -> None:
        """A new trace: the previous one's jobs have left squeue (their outcomes are final)."""
        with self._lock:
            self._jobs.clear()

    def submit(self, job_id: str, uid: int, submit: float, tasks: int, decision: str | None = None,
               observed: bool = False) -> None:
        with self._lock:
            self._jobs[job_id] = _Entry(job_id, uid, self.origin + submit, tasks, decision, observed)

    def started(self, job_id: str, time: float, nodes: Sequence[str]) -> None:
        with self._lock:
            entry = self._jobs[job_id]
            entry.state, entry.start, entry.nodes = "RUNNING", self.origin + time, tuple(nodes)

    def ended(self, job_id: str, time: float, state: str) -> None:
        with self._lock:
            entry = self._jobs[job_id]
            entry.state, entry.end = state, self.origin + time

    def read(self) -> Listing:
        with self._lock:
            entries = list(self._jobs.values())
        owners = {e.job_id: e.uid for e in entries if e.state != "PENDING"}
        advised = [AdvisedJob(e.job_id, e.decision, e.state, e.submit, "", e.observed or e.released, e.tasks,
                              e.uid, e.start, e.end, e.nodes)
                   for e in entries if e.decision is not None]
        return Listing(advised, owners)

    def advised(self) -> list[AdvisedJob]:
        return self.read().advised

    def release(self, job: AdvisedJob, min_nodes: int | None, max_nodes: int | None) -> None:
        with self._lock:
            entry = self._jobs.get(job.job_id)
            if entry is None:
                raise QueueError(f"job {job.job_id} is not in the simulated queue")
            entry.released = True
            self.releases += 1

    def released(self, job_id: str) -> bool:
        with self._lock:
            entry = self._jobs.get(job_id)
            return entry is not None and entry.released
