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
from slurm_advisor.speedmodels.base import SpeedModel

#: The baselines whose placements on the empty cluster the floor takes the fastest of
#: (lif needs a fitted profile; on an empty cluster it places as the packers do).
FLOOR_POLICIES = ("slurm-default", "slurm-topo", "pack", "spread", "tetris", "random")


def solo_runtime(nodes: Sequence[Node], job: Job, truth: SpeedModel, *, seed: int = 0) -> float:
    """The job's shortest run time alone on an empty cluster over the baselines' placements
    (seconds); ValueError when none of them can place it there."""
    empty = ClusterSnapshot.empty(tuple(nodes))
    rng = np.random.default_rng(seed)
    best = np.inf
    seen = set()
    for name in FLOOR_POLICIES:
        placement = make_policy(name, PolicyContext(truth=truth)).place(empty, job, rng)
        if placement is None or tuple(sorted(placement.per_node())) in seen:
            continue
        seen.add(tuple(sorted(placement.per_node())))
        speed = truth.speeds(empty.nodes, [RunningJob(job, placement)], only=[job.id])[job.id]
        best = min(best, job.iterations / speed)
    if not np.isfinite(best):
        raise ValueError(f"job {job.id} fits nowhere on the empty cluster")
    return float(best)


def floor_avg_jct(nodes: Sequence[Node], jobs: Sequence[Job], truth: SpeedModel, *, seed: int = 0) -> float:
    """Mean over ``jobs`` (those that fit the cluster) of :func:`solo_runtime`: no wait, no
    neighbour, the best of the baselines' placements. Jobs of the same shape are timed once."""
    cache: dict[tuple, float] = {}
    times = []
    for job in jobs:
        key = (job.type, job.num_ps, job.num_workers, job.ps_demand, job.worker_demand,
               job.iterations, job.model_size_mb, job.batch_size)
        if key not in cache:
            try:
                cache[key] = solo_runtime(nodes, job, truth, seed=seed)
            except ValueError:
                cache[key] = np.nan  # never fits: the simulator skips it too
        if not np.isnan(cache[key]):
            times.append(cache[key])
    return float(np.mean(times)) if times else 0.0
