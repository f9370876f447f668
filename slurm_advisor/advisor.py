"""The one decision call. The simulator and the daemon both call :meth:`Advisor.advise`.

A policy proposes; the advisor checks the proposal against the snapshot (a policy bug must
never cost a user a job), falls back to the site's default placement when the policy cannot
or will not place, and attaches the explanation an admin sees.

A job that carries a request (``Job.request``: its -N, -w, -x, partition, ... as submitted) is
shown only the nodes the request allows, and a placement, the policy's or the fallback's, counts
only if it breaks nothing of the request (``JobRequest.violations``): a policy chooses among
placements that honour the whole request, or the job is Slurm's as submitted.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from slurm_advisor.domain import ClusterSnapshot, Job, Placement
from slurm_advisor.policies.base import Hold, Policy, warm


class SpeedPredictor(Protocol):
    def predict(self, snapshot: ClusterSnapshot, job: Job, placement: Placement) -> float:
        """Predicted iterations/s of ``job`` if it starts on ``placement`` now."""
        ...


@dataclass(frozen=True)
class Advice:
    job_id: str
    placement: Placement | None       # None: cannot place now (the job waits)
    policy: str                       # who decided: the policy or the fallback
    fallback: bool = False
    reason: str = ""
    node_scores: Mapping[str, float] = field(default_factory=dict)
    predicted_speed: float | None = None
    held: bool = False                # the policy chose to wait for a better placement
    max_nodes: int | None = None      # when held: the node-count cap it waits for


class Advisor:
    def __init__(self, policy: Policy, *, fallback: Policy | None = None,
                 predictor: SpeedPredictor | None = None, explain: bool = False):
        self.policy = policy
        self.fallback = fallback
        self.predictor = predictor
        self.explain = explain

    def advise(self, snapshot: ClusterSnapshot, job: Job, rng: np.random.Generator) -> Advice:
        snapshot = allowed(snapshot, job)
        placement, reason = self._propose(snapshot, job, rng)
        if isinstance(placement, Hold):  # a deliberate wait: the fallback must not undo it
            return Advice(job.id, None, self.policy.name, False, placement.reason, held=True,
                          max_nodes=placement.max_nodes)
        decided_by, used_fallback = self.policy.name, False
        if placement is None and self.fallback is not None:
            placement = self.fallback.place(snapshot, job, rng)
            if placement is not None and _valid(snapshot, job, placement) and not _broken(snapshot, job, placement):
                decided_by, used_fallback = self.fallback.name, True
            else:
                placement = None
        if placement is None:
            return Advice(job.id, None, decided_by, used_fallback, reason or "does not fit now")
        return Advice(job.id, placement, decided_by, used_fallback, reason,
                      self.policy.score_nodes(snapshot, job) if self.explain else {},
                      self._predict(snapshot, job, placement))

    def warm(self, snapshot: ClusterSnapshot) -> None:
        """Let the policy fill its caches for ``snapshot`` (the daemon's refresh thread: no
        request pays them); a no-op for policies that keep none."""
        warm(self.policy, snapshot)

    def _propose(self, snapshot, job, rng) -> tuple[Placement | Hold | None, str]:
        placement = self.policy.place(snapshot, job, rng)
        if isinstance(placement, Hold):
            return placement, placement.reason
        if placement is None:
            return None, f"{self.policy.name} found no placement"
        if not _valid(snapshot, job, placement):
            return None, f"{self.policy.name} proposed an invalid placement"
        broken = _broken(snapshot, job, placement)
        if broken:
            return None, f"{self.policy.name}'s placement does not honour the request: {'; '.join(broken)}"
        return placement, ""

    def _predict(self, snapshot, job, placement) -> float | None:
        if self.predictor is None or not self.explain:
            return None
        return self.predictor.predict(snapshot, job, placement)


def allowed(snapshot: ClusterSnapshot, job: Job) -> ClusterSnapshot:
    """``snapshot`` as ``job``'s request lets it see it (it itself when nothing is ruled out): no
    room on the nodes the request rules out, and with ``--ntasks-per-node`` t no more CPUs on a
    node than t tasks take, so that any policy that fits tasks into free room keeps to t (as
    cons_tres does: ``_allocate_sc`` caps a node's CPUs for the job the same way)."""
    request = job.request
    if request is None:
        return snapshot
    mask = request.eligible(snapshot)
    per_node = request.max_tasks_per_node
    if (mask is None or mask.all()) and per_node is None:
        return snapshot
    free = snapshot.free_array()
    if mask is not None and not mask.all():
        free = np.where(mask[:, None], free, 0)
    if per_node is not None:
        free = free.copy() if free is snapshot.free_array() else free
        cpus = max(job.worker_demand.cpus, job.ps_demand.cpus if job.num_ps else 0, 1)
        np.minimum(free[:, 0], per_node * cpus, out=free[:, 0])
    return snapshot.with_free(free)


def _valid(snapshot: ClusterSnapshot, job: Job, placement: Placement) -> bool:
    return (placement.job_id == job.id and len(placement.tasks) == job.num_tasks
            and tuple(t.role for t in placement.tasks) == job.roles()
            and snapshot.fits(job, placement))


def _broken(snapshot: ClusterSnapshot, job: Job, placement: Placement) -> list[str]:
    """What ``placement`` breaks of ``job``'s request (none without one)."""
    return [] if job.request is None else job.request.violations(snapshot, placement)
