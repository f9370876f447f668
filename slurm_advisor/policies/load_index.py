"""Co-located load per node, kept in step with the snapshots of one cluster (numpy; no torch).

The policy's node features and the speed model's placement context need, per node, what the
running jobs put there (their demands, their types' published usage, how many jobs, how many
of them span nodes). Summing that from every running job for every decision costs
O(running jobs) Python: tens of milliseconds on a 10,000-node cluster. A ``LoadIndex`` is kept
once per ``NodeLayout`` (shared by every snapshot of a cluster) and brought to a snapshot by
the difference between the jobs it holds and the snapshot's running jobs (by identity: from the
chunks of ``RunningJobs`` the two snapshots do not share, else a set difference in C): only the
jobs that started or ended since are added or removed in Python.

The sums are integers (demands as they are, usage quantized to 2**-24), so the state does not
depend on the order in which jobs came and went: the same snapshot always gives the same
features, whatever was synced before. Results equal the float sums of ``NodeLoad`` to ~1e-7.
"""
from __future__ import annotations

import functools
import threading
import weakref
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np

from slurm_advisor.domain import ClusterSnapshot, Role, RunningJob
from slurm_advisor.domain.cluster import NodeLayout
from slurm_advisor.domain.jobtypes import profile_for
from slurm_advisor.domain.running_jobs import RunningJobs

Q = float(1 << 24)  # usage quantum
# columns of the per-node sums
_DEMAND, _USAGE, _JOBS, _SPANNING, _TASKS = slice(0, 3), slice(3, 6), 6, 7, 8
_WIDTH = 9


@dataclass(frozen=True, slots=True)
class _Entry:
    """One running job's contribution: its nodes (indices) and a row of sums per node."""

    nodes: np.ndarray        # [k] int
    rows: np.ndarray         # [k, _WIDTH] int64
    type_col: int


@functools.lru_cache(maxsize=4096)
def _quantized_usage(job_type: str, model_size_mb, batch_size, role: Role) -> tuple[int, int, int]:
    p = profile_for(job_type, model_size_mb, batch_size)
    light = 0.5 if role is Role.PS else 1.0  # as features.task_usage
    return (round(p.cpu * light * Q), round(p.membw * Q), round(p.pcie * Q) if role is Role.WORKER else 0)


class LoadIndex:
    """Per-node sums of the running jobs of the snapshot last synced (see the module doc)."""

    def __init__(self, layout: NodeLayout):
        self.layout = layout
        n = len(layout.nodes)
        self.sums = np.zeros((n, _WIDTH), dtype=np.int64)
        self.type_counts = np.zeros((n, 4), dtype=np.int64)  # tasks per job type, a column per type
        self.types: list[str] = []
        self._type_col: dict[str, int] = {}
        self._jobs: dict[int, tuple[RunningJob, _Entry]] = {}  # id(rj) -> (rj, entry); keeps rj alive
        self._others: np.ndarray | None = None
        self._last: RunningJobs | None = None  # the running jobs last synced
        self.lock = threading.RLock()

    @classmethod
    @contextmanager
    def synced(cls, snapshot: ClusterSnapshot) -> Iterator[LoadIndex]:
        """The cluster's index, synced to ``snapshot`` and locked while the block reads it."""
        # An idle snapshot (a job alone on the empty cluster) gets an index of its own: syncing
        # the shared one to it would drop and later re-add every running job.
        indexes = _INDEXES if snapshot.running_jobs else _IDLE
        index = indexes.get(snapshot.layout)
        if index is None:
            index = indexes.setdefault(snapshot.layout, cls(snapshot.layout))
        with index.lock:
            index.sync(snapshot.running_jobs)
            yield index

    def sync(self, running: RunningJobs) -> None:
        with self.lock:
            if running is self._last:  # the same snapshot's jobs (kept alive by _last)
                return
            changes = running.changes_since(self._last) if self._last is not None else None
            gone, new = changes if changes is not None else self._difference(running)
            self._last = running
            held = self._jobs
            for rj in gone:
                self._apply(held.pop(id(rj))[1], -1)
            for rj in new:
                entry = self._entry(rj)
                held[id(rj)] = (rj, entry)
                self._apply(entry, +1)

    def _difference(self, running: RunningJobs) -> tuple[list[RunningJob], list[RunningJob]]:
        """(jobs held but not running, running jobs not held) by set difference, for maps that
        share few chunks with the last one synced (O(running) in C, no Python loop over them)."""
        held = self._jobs
        ids = set(map(id, running.values()))
        gone = [held[key][0] for key in held.keys() - ids]
        new_ids = ids - held.keys()
        return gone, [rj for rj in running.values() if id(rj) in new_ids] if new_ids else []

    def _entry(self, rj: RunningJob) -> _Entry:
        job, index = rj.job, self.layout.index
        per_node = [(index[n], ps, w) for n, ps, w in rj.placement.per_node() if n in index]
        spanning = int(len(rj.placement.per_node()) > 1)
        uw = _quantized_usage(job.type, job.model_size_mb, job.batch_size, Role.WORKER)
        up = _quantized_usage(job.type, job.model_size_mb, job.batch_size, Role.PS)
        d_ps, d_w = job.ps_demand, job.worker_demand
        rows = np.array([(ps * d_ps.cpus + w * d_w.cpus, ps * d_ps.gpus + w * d_w.gpus,
                          ps * d_ps.mem_mb + w * d_w.mem_mb, ps * up[0] + w * uw[0], ps * up[1] + w * uw[1],
                          ps * up[2] + w * uw[2], 1, spanning, ps + w) for _, ps, w in per_node],
                        dtype=np.int64).reshape(-1, _WIDTH)
        return _Entry(np.array([i for i, _, _ in per_node], dtype=np.int64), rows, self._column(job.type))

    def _column(self, job_type: str) -> int:
        col = self._type_col.get(job_type)
        if col is None:
            col = self._type_col[job_type] = len(self.types)
            self.types.append(job_type)
            if col >= self.type_counts.shape[1]:
                self.type_counts = np.concatenate([self.type_counts, np.zeros_like(self.type_counts)], axis=1)
        return col

    def _apply(self, entry: _Entry, sign: int) -> None:
        self.sums[entry.nodes] += sign * entry.rows  # a job's nodes are distinct
        self.type_counts[entry.nodes, entry.type_col] += sign * entry.rows[:, _TASKS]
        if self._others is not None:  # kept in step for the job's nodes only
            self._others[entry.nodes] = others_rows(self.sums[entry.nodes], self.layout.capacity[entry.nodes])

    # -- reading ---------------------------------------------------------------------------
    def others(self) -> np.ndarray:
        """[nodes, 8] float32: ``NodeLoad.others`` of every node (usage(6), jobs/4, spanning/4)."""
        with self.lock:
            if self._others is None:
                self._others = others_rows(self.sums, self.layout.capacity)
            return self._others  # callers must not write to it (it is updated in place on sync)

    def local(self, nodes: np.ndarray, exclude: Iterable[RunningJob] = ()) -> tuple[np.ndarray, np.ndarray]:
        """(sums [k, 9], type counts [k, types]) on ``nodes`` (distinct indices), leaving out the
        jobs in ``exclude`` (running jobs of the synced snapshot): O(nodes + excluded jobs)."""
        with self.lock:
            sums, types = self.sums[nodes].copy(), self.type_counts[nodes].copy()
            if len(nodes):
                where = {int(i): k for k, i in enumerate(nodes)}
                for rj in exclude:
                    entry = self._jobs[id(rj)][1]
                    for i, row in zip(entry.nodes.tolist(), entry.rows):
                        k = where.get(i)
                        if k is not None:
                            sums[k] -= row
                            types[k, entry.type_col] -= row[_TASKS]
            return sums, types

    def entry(self, rj: RunningJob) -> _Entry:
        """The contribution of a running job of the synced snapshot."""
        return self._jobs[id(rj)][1]


def others_rows(sums: np.ndarray, capacity: np.ndarray) -> np.ndarray:
    out = np.empty((len(sums), 8), dtype=np.float32)
    cap = capacity.astype(np.float64)
    out[:, :3] = np.divide(sums[:, _DEMAND], cap, out=np.zeros_like(cap), where=cap > 0)
    out[:, 3:6] = sums[:, _USAGE] / Q
    out[:, 6] = sums[:, _JOBS] / 4.0
    out[:, 7] = np.maximum(0, sums[:, _SPANNING]) / 4.0
    return out


_INDEXES: weakref.WeakKeyDictionary[NodeLayout, LoadIndex] = weakref.WeakKeyDictionary()
_IDLE: weakref.WeakKeyDictionary[NodeLayout, LoadIndex] = weakref.WeakKeyDictionary()
