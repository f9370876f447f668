"""How low a trace's avg JCT could go: the floor a placement policy is judged against.

A policy's avg JCT is its wait plus its run time. The floor takes both away: every job starts
when it arrives and runs alone on an empty cluster, on the fastest of the placements every
baseline makes of it there (consolidated by Slurm's rule and by topology, packed, spread,
Tetris, random fits). So ``floor / slurm-default`` is about the lowest ratio any policy can
reach on that trace: a ratio target below it asks for more than the trace holds. It is not a
proof — a placement faster than all of these, or one sped up by a neighbour, could go lower —
but under every shipped truth sharing only slows a job, and these placements span packed to
spread, so a policy beats the floor by little if at all.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from slurm_advisor.domain import ClusterSnapshot, Job, Node, RunningJob
from slurm_advisor.policies import PolicyContext, make_policy
from slurm_advisor.policies.isolated import speed_signature
from slurm_advisor.speedmodels.base import SpeedModel

#: The baselines whose placements on the empty cluster the floor takes the fastest of (lif
#: needs a fitted profile, and on an empty cluster it has no neighbours to weigh).
FLOOR_POLICIES = ("slurm-default", "slurm-topo", "pack", "spread", "tetris", "random")


class SoloSpeeds:
    """Each job's best speed alone on the empty cluster over the baselines' placements, cached
    by ``speed_signature`` (as ``IsolatedSpeeds`` caches its consolidated one)."""

    def __init__(self, nodes: Sequence[Node], truth: SpeedModel, *, seed: int = 0):
        self.empty, self.truth, self.seed = ClusterSnapshot.empty(tuple(nodes)), truth, seed
        self.policies = [make_policy(name, PolicyContext(truth=truth)) for name in FLOOR_POLICIES]
        self._best: dict[tuple, float] = {}

    def __call__(self, job: Job) -> float:
        """Iterations per second; 0.0 when no baseline can place the job on the empty cluster."""
        key = speed_signature(job)
        if key not in self._best:
            self._best[key] = self._fastest(job)
        return self._best[key]

    def _fastest(self, job: Job) -> float:
        rng = np.random.default_rng(self.seed)
        best, seen = 0.0, set()
        for policy in self.policies:
            placement = policy.place(self.empty, job, rng)
            layout = None if placement is None else tuple(sorted(placement.per_node()))
            if layout is None or layout in seen:
                continue
            seen.add(layout)
            run = RunningJob(job, placement)
            best = max(best, self.truth.speeds(self.empty.nodes, [run], only=[job.id])[job.id])
        return best


def solo_runtime(nodes: Sequence[Node], job: Job, truth: SpeedModel, *, seed: int = 0) -> float:
    """The job's shortest run time alone on an empty cluster over the baselines' placements
    (seconds); ValueError when none of them can place it there."""
    speed = SoloSpeeds(nodes, truth, seed=seed)(job)
    if speed <= 0:
        raise ValueError(f"job {job.id} fits nowhere on the empty cluster")
    return job.iterations / speed


def floor_avg_jct(nodes: Sequence[Node], jobs: Sequence[Job], truth: SpeedModel, *, seed: int = 0) -> float:
    """Mean over ``jobs`` (those that fit the cluster, as the simulator skips the others) of
    their shortest run time alone: no wait, no neighbour, the best of the baselines' placements."""
    solo = SoloSpeeds(nodes, truth, seed=seed)
    times = [job.iterations / speed for job in jobs if (speed := solo(job)) > 0]
    return float(np.mean(times)) if times else 0.0
