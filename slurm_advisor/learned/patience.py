"""Whether to start a job now: hold it when the fitted speed model expects it to crawl.

Every placement rule starts a job as soon as it fits somewhere. When the cluster is busy,
"somewhere" can be a placement scattered over many shared nodes, on which the job runs a
fraction of its speed for its whole life, and slows its neighbours. Waiting for room that
holds it on few quiet nodes is often worth more than starting now (Slurm users do this by
hand with ``--nodes``).

``PatientPolicy`` wraps any placement rule (the network or a heuristic): it asks the fitted
speed model for the job's speed on the proposed placement and for its speed alone on its most
consolidated placement, and holds the job when the ratio is below ``patience``. It holds only
proposals that span more nodes than the job needs: on Slurm a hold is a node-count cap, which
can consolidate a job but cannot choose its neighbours (and the speed model's verdicts on
interference alone are the ones most prone to error). It never holds a job on an idle cluster
(nothing would free up), and it uses only the learned speed model, never the ground truth:
training picks ``patience`` by replaying the training trace.

A hold must also pay for the job itself: the time until running jobs are expected to leave
room for the consolidated placement, plus the run there, must be shorter than the run on the
proposal now. A running job is expected to end after its iterations at its predicted speed
alone (it is usually slower, so waits come out short: the check errs towards holding, which
``patience`` already bounds). Without this check a fixed threshold holds jobs just as long on
a cluster that frees up in minutes as on one that stays full for hours.
"""
from __future__ import annotations

import math

import numpy as np

from slurm_advisor.advisor import SpeedPredictor
from slurm_advisor.domain import ClusterSnapshot, Job, Placement, RunningJob
from slurm_advisor.policies.base import Hold, Policy
from slurm_advisor.policies.slurm_default import SlurmDefaultPolicy

# Candidate patience levels training chooses from (0: never hold, the plain rule).
PATIENCE_LEVELS = (0.0, 0.3, 0.5, 0.7, 0.85)


class PatientPolicy:
    def __init__(self, inner: Policy, speed: SpeedPredictor, patience: float):
        self.inner, self.speed, self.patience = inner, speed, patience
        self.name = inner.name
        self._alone: dict[tuple, tuple[float, int]] = {}

    def place(self, snapshot: ClusterSnapshot, job: Job, rng: np.random.Generator) -> Placement | Hold | None:
        placement = self.inner.place(snapshot, job, rng)
        if self.patience <= 0 or not snapshot.running or isinstance(placement, Hold):
            return placement
        if placement is None:
            # The inner rule found nothing, so the advisor's fallback will start the job where
            # Slurm would: that placement gets the same check (None lets the fallback place it).
            fallback = SlurmDefaultPolicy().place(snapshot, job)
            return None if fallback is None else self.hold(snapshot, job, fallback)
        return self.hold(snapshot, job, placement) or placement

    def hold(self, snapshot: ClusterSnapshot, job: Job, placement: Placement) -> Hold | None:
        """A Hold if waiting for a consolidated placement pays, else None (start on ``placement``)."""
        alone, fewest = self.alone(snapshot, job)
        if not math.isfinite(alone) or len(placement.nodes()) <= fewest:
            return None  # already as consolidated as it can be: a node cap could not do better
        now_speed = self.speed.predict(snapshot, job, placement)
        share = now_speed / alone
        if share >= self.patience:
            return None
        wait, later_speed = self.consolidated_later(snapshot, job, fewest)
        if not wait + job.iterations / later_speed < job.iterations / now_speed:
            return None  # waiting would not pay even for this job
        return Hold(f"predicted speed on {placement.node_list()} is {share:.0%} of the job's speed "
                    f"alone (patience {self.patience:.0%}); on {fewest} node(s) in about {wait / 60:.0f} min "
                    f"it would finish sooner: waits for that placement")

    def consolidated_later(self, snapshot: ClusterSnapshot, job: Job, fewest: int) -> tuple[float, float]:
        """How long until running jobs (in order of their expected ends) leave room for the job on
        ``fewest`` nodes, and its predicted speed there then."""
        slurm = SlurmDefaultPolicy()
        later = snapshot
        for end, rj in sorted(((self.expected_end(snapshot, rj), rj) for rj in snapshot.running),
                              key=lambda pair: pair[0]):
            later = later.without_job(rj.job.id)
            placement = slurm.place(later, job)
            if placement is not None and len(placement.nodes()) <= fewest:
                return max(0.0, end - snapshot.time), self.speed.predict(later, job, placement)
        return math.inf, 1.0  # nothing running frees the room (other allocations hold it)

    def expected_end(self, snapshot: ClusterSnapshot, rj: RunningJob) -> float:
        """When a running job should end: its iterations at its predicted speed alone."""
        return rj.start_time + rj.job.iterations / self.alone(snapshot, rj.job)[0]

    def alone(self, snapshot: ClusterSnapshot, job: Job) -> tuple[float, int]:
        """Predicted speed of the job by itself on an empty cluster, on as few nodes as possible,
        and that number of nodes."""
        key = (job.type, job.num_ps, job.num_workers, job.ps_demand, job.worker_demand,
               job.model_size_mb, job.batch_size)
        if key not in self._alone:
            empty = ClusterSnapshot.empty(snapshot.nodes, snapshot.time)
            placement = SlurmDefaultPolicy().place(empty, job)
            self._alone[key] = ((self.speed.predict(empty, job, placement), len(placement.nodes()))
                                if placement else (float("inf"), 0))
        return self._alone[key]

    def score_nodes(self, snapshot: ClusterSnapshot, job: Job) -> dict[str, float]:
        return self.inner.score_nodes(snapshot, job)
