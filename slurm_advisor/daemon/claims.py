"""Capacity promised to advised jobs that Slurm has not started yet.

Between the hook's answer and the job's start, Slurm's own view (sinfo) does not show the job,
so without claims two quick submissions would both be pinned to the same free GPUs. A claim
holds an advised job's demand per node until the job shows up running (its allocation is then in
the snapshot itself), leaves the queue, or the bound passes.
"""
from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from slurm_advisor.domain import ClusterSnapshot, Job, Placement


@dataclass(frozen=True)
class Claim:
    decision: str
    rows: np.ndarray      # node indices
    demand: np.ndarray    # (len(rows), 3): cpus, gpus, mem_mb on each
    expires: float


class Claims:
    """Thread-safe claims by decision id. Every operation is O(claims x nodes they touch)."""

    def __init__(self, ttl_s: float):
        self.ttl_s = ttl_s
        self._claims: dict[str, Claim] = {}
        self._lock = threading.Lock()

    def add(self, decision: str, snapshot: ClusterSnapshot, job: Job, placement: Placement, now: float) -> None:
        per_node = placement.demand_per_node(job)
        rows = np.array([snapshot.index(n) for n in per_node], dtype=np.int64)
        demand = np.array([[d.cpus, d.gpus, d.mem_mb] for d in per_node.values()], dtype=np.int64).reshape(-1, 3)
        with self._lock:
            self._claims[decision] = Claim(decision, rows, demand, now + self.ttl_s)

    def apply(self, free: np.ndarray, now: float) -> np.ndarray:
        """``free`` less every live claim (never below zero: Slurm's view may already show some)."""
        with self._lock:
            live = [c for c in self._claims.values() if c.expires > now]
        if not live:
            return free
        out = np.array(free, dtype=np.int64)
        for claim in live:
            np.subtract.at(out, claim.rows, claim.demand)
        np.maximum(out, 0, out=out)
        return out

    def settle(self, started: Iterable[str], now: float) -> int:
        """Drop the claims of jobs now started (or gone) and the expired ones; returns how many."""
        done = set(started)
        with self._lock:
            drop = [d for d, c in self._claims.items() if d in done or c.expires <= now]
            for decision in drop:
                del self._claims[decision]
        return len(drop)

    def __len__(self) -> int:
        with self._lock:
            return len(self._claims)
