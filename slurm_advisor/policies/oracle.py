"""`oracle`: a reference, never deployable. It may ask the ground-truth speed model.

It builds candidate placements (every heuristic's, plus random ones) and keeps the one with
the best immediate effect under the *true* speeds: the new job's speed relative to running
alone, minus the slowdown it inflicts on the jobs it joins. It is myopic: it does not see
fragmentation or future arrivals, so plain packing can beat it over a whole trace.
"""
from __future__ import annotations

import numpy as np

from slurm_advisor.domain import ClusterSnapshot, Job, Placement, RunningJob
from slurm_advisor.policies.isolated import IsolatedSpeeds
from slurm_advisor.policies.pack import PackPolicy
from slurm_advisor.policies.random_fit import RandomPolicy
from slurm_advisor.policies.slurm_default import SlurmDefaultPolicy
from slurm_advisor.policies.spread import SpreadPolicy
from slurm_advisor.policies.tetris import TetrisPolicy
from slurm_advisor.speedmodels.base import SpeedModel


class OraclePolicy:
    name = "oracle"

    def __init__(self, truth: SpeedModel, random_candidates: int = 4):
        self.truth = truth
        self.random_candidates = random_candidates
        self._heuristics = (SlurmDefaultPolicy(), PackPolicy(), SpreadPolicy(), TetrisPolicy())
        self._isolated: IsolatedSpeeds | None = None

    def place(self, snapshot: ClusterSnapshot, job: Job, rng: np.random.Generator) -> Placement | None:
        candidates = {p for p in self._candidates(snapshot, job, rng) if p is not None}
        if not candidates:
            return None
        # Sort for determinism: set order must not decide ties.
        ranked = sorted(candidates, key=lambda p: [(t.role.value, t.node) for t in p.tasks])
        return max(ranked, key=lambda p: self.gain(snapshot, job, p))

    def _candidates(self, snapshot, job, rng):
        for h in self._heuristics:
            yield h.place(snapshot, job, rng)
        rand = RandomPolicy()
        for _ in range(self.random_candidates):
            yield rand.place(snapshot, job, rng)

    def gain(self, snapshot: ClusterSnapshot, job: Job, placement: Placement) -> float:
        if self._isolated is None or (self._isolated.empty.layout is not snapshot.layout
                                      and self._isolated.empty.nodes != snapshot.nodes):
            self._isolated = IsolatedSpeeds(self.truth, snapshot.nodes)
        new = RunningJob(job, placement, snapshot.time)
        touched = _jobs_on(snapshot, placement.nodes())
        if self.truth.local:  # the touched jobs' speeds depend only on the jobs on their nodes
            context = dict(touched)
            for rj in touched.values():
                context.update(_jobs_on(snapshot, rj.placement.nodes()))
            running = [context[j] for j in sorted(context)]
        else:
            running = list(snapshot.running)
        before = self.truth.speeds(snapshot.nodes, running, set(touched)) if touched else {}
        now = self.truth.speeds(snapshot.nodes, [*running, new], set(touched) | {job.id})
        harm = sum(1.0 - now[j] / before[j] for j in sorted(touched))  # sorted: float sums must not follow hash order
        return now[job.id] / self._isolated(job) - harm

    def score_nodes(self, snapshot: ClusterSnapshot, job: Job) -> dict[str, float]:
        return {n.name: 0.0 for n in snapshot.nodes}


def _jobs_on(snapshot: ClusterSnapshot, nodes) -> dict[str, RunningJob]:
    """Running jobs with a task on any of ``nodes``, by id (the snapshot's per-node index)."""
    return {rj.job.id: rj for node in nodes for rj in snapshot.jobs_on(node)}
