"""Capacity promised to advised jobs that Slurm has not started yet.

Between the hook's answer and the job's start, Slurm's own view (sinfo) does not show the job,
so without claims two quick submissions would both be pinned to the same free GPUs. A claim
holds an advised job's demand per node until the job shows up running (its allocation is then in
the snapshot itself), leaves the queue, or the bound passes.

A claim whose job Slurm never lists (it rejected the job after the hook's answer, or the user
cancelled it at once) would otherwise hold its capacity for the whole bound and skew every
decision meanwhile: :meth:`Claims.drop_unseen` drops it once enough queue reads have missed it.

The claims are also kept summed per node, so subtracting them costs one vectorised O(nodes)
step per request however many there are (a burst of submissions makes hundreds).
"""
from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from slurm_advisor.domain import ClusterSnapshot, Job, Placement

#: Queue reads, each begun after a claim was made, that must all miss its job before the claim is
#: dropped as never seen. The job record exists once slurmctld's submit call returns, a few ms
#: after the hook's answer, so one read begun just after the answer may still miss it; three
#: misses in a row also ride out a read that raced the job's submission and one that Slurm
#: answered from a stale view.
UNSEEN_READS = 3
#: ... and at least this long after the claim: with a fast refresh (tests use 50 ms), three reads
#: could all fall inside the submission itself.
UNSEEN_MIN_S = 2.0


@dataclass(frozen=True)
class Claim:
    decision: str
    nodes: tuple[str, ...]
    demand: np.ndarray    # (len(nodes), 3): cpus, gpus, mem_mb on each
    expires: float
    added: float = 0.0    # when it was made (the same monotonic clock as ``expires``)


class Claims:
    """Thread-safe claims by decision id, in expiry order (one bound for all: insertion order)."""

    def __init__(self, ttl_s: float):
        self.ttl_s = ttl_s
        self._claims: OrderedDict[str, Claim] = OrderedDict()
        self._missed: dict[str, int] = {}  # decision -> queue reads in a row that did not list its job
        self._lock = threading.Lock()
        self._layout = None           # the node layout ``_total`` is indexed by
        self._total: np.ndarray | None = None

    def add(self, decision: str, snapshot: ClusterSnapshot, job: Job, placement: Placement, now: float) -> None:
        per_node = placement.demand_per_node(job)
        demand = np.array([[d.cpus, d.gpus, d.mem_mb] for d in per_node.values()], dtype=np.int64).reshape(-1, 3)
        claim = Claim(decision, tuple(per_node), demand, now + self.ttl_s, now)
        with self._lock:
            self._drop(self._claims.pop(decision, None))
            self._claims[decision] = claim
            if self._layout is snapshot.layout and self._total is not None:
                self._sum(claim, +1)

    def apply(self, snapshot: ClusterSnapshot, now: float) -> np.ndarray:
        """The snapshot's free capacity less every live claim (never below zero: Slurm's view may
        already show some of them)."""
        free = snapshot.free_array()
        with self._lock:
            self._expire(now)
            if not self._claims:
                return free
            if self._layout is not snapshot.layout or self._total is None:
                self._rebuild(snapshot)
            return np.maximum(free - self._total, 0)

    def settle(self, started: Iterable[str], now: float) -> int:
        """Drop the claims of jobs now started (or gone) and the expired ones; returns how many."""
        with self._lock:
            before = len(self._claims)
            for decision in set(started):
                self._drop(self._claims.pop(decision, None))
            self._expire(now)
            return before - len(self._claims)

    def drop_unseen(self, listed: set[str], read_at: float, now: float) -> list[str]:
        """Count one miss for every claim made before ``read_at`` (when the queue read began)
        whose decision is not in ``listed`` (the decisions of the jobs that read found, in any
        state); drop the claims missed :data:`UNSEEN_READS` times in a row and older than
        :data:`UNSEEN_MIN_S`. Returns the decisions dropped."""
        dropped = []
        with self._lock:
            for decision, claim in list(self._claims.items()):
                if decision in listed or claim.added >= read_at:
                    self._missed.pop(decision, None)
                    continue
                missed = self._missed[decision] = self._missed.get(decision, 0) + 1
                if missed >= UNSEEN_READS and now - claim.added >= UNSEEN_MIN_S:
                    del self._claims[decision]
                    self._drop(claim)
                    dropped.append(decision)
        return dropped

    def __len__(self) -> int:
        with self._lock:
            return len(self._claims)

    # -- under the lock ---------------------------------------------------------------------
    def _expire(self, now: float) -> None:
        while self._claims:
            decision, claim = next(iter(self._claims.items()))
            if claim.expires > now:
                return
            del self._claims[decision]
            self._drop(claim)

    def _drop(self, claim: Claim | None) -> None:
        if claim is None:
            return
        self._missed.pop(claim.decision, None)
        if self._total is not None:
            self._sum(claim, -1)

    def _sum(self, claim: Claim, sign: int) -> None:
        index = self._layout.index
        rows = [index.get(n) for n in claim.nodes]
        keep = [i for i, r in enumerate(rows) if r is not None]  # a node gone from the cluster
        np.add.at(self._total, np.array([rows[i] for i in keep], dtype=np.int64), sign * claim.demand[keep])

    def _rebuild(self, snapshot: ClusterSnapshot) -> None:
        self._layout = snapshot.layout
        self._total = np.zeros((len(snapshot.nodes), 3), dtype=np.int64)
        for claim in self._claims.values():
            self._sum(claim, +1)
