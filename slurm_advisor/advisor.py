"""The one decision call. The simulator and the daemon both call :meth:`Advisor.advise`.

A policy proposes; the advisor checks the proposal against the snapshot (a policy bug must
never cost a user a job), falls back to the site's default placement when the policy cannot
or will not place, and attaches the explanation an admin sees.

A job that carries a request (``Job.request``: its -N, -w, -x, partition, ... as submitted) is
shown only the nodes the request allows, and a placement, the policy's or the fallback's, counts
only if it breaks nothing of the request (``JobRequest.violations``): a policy chooses among
placements that honour the whole request, or the job is Slurm's as submitted.

A policy that raises (a model that loaded but breaks on some input) costs the request nothing:
the fallback places, the failure is counted (``Advisor.errors``) and logged; the daemon also
tries every model once on a small probe job before it serves it (:func:`self_check`).

**Played as the daemon serves it** (``holds=False``: advise mode; ``caps=True``: enforce mode;
the simulator's ``--served-as``, retrain's judge): job_submit.lua asks once per job, so the
policy decides a job once, at its first decision point. A placement Slurm would choose itself
runs as it is; any other runs as Slurm lays a pin on its nodes out (``slurm/expressible.py``:
the node set is the daemon's, the tasks per node are Slurm's), and where Slurm would not start
that pin now, or the policy placed nothing, the job is left to Slurm: from then on Slurm's own
choice (the fallback) starts it wherever and whenever that fits; the policy is not asked again.
"""
from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from slurm_advisor.domain import ClusterSnapshot, Job, Node, Placement, Resources
from slurm_advisor.policies.base import Hold, Policy, warm
from slurm_advisor.policies.speed import SpeedPredictor
from slurm_advisor.slurm.cons_tres import select
from slurm_advisor.slurm.expressible import express
from slurm_advisor.slurm.release import DEFAULT

log = logging.getLogger("slurm_advisor.advisor")
NOT_EXPRESSIBLE = "Slurm cannot lay the advised nodes out for this job now"


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
                 predictor: SpeedPredictor | None = None, explain: bool = False, holds: bool = True,
                 caps: bool = False):
        self.policy = policy
        # False: play the daemon's advise mode, where the hook cannot delay a job: a hold is left
        # to Slurm, which starts the job at once where it fits (the fallback's placement). The
        # simulator's default keeps holds: the job waits and the policy decides it again later.
        self.holds = holds
        # True: play enforce mode, where a hold is a node-count cap the job is submitted with
        # (``cap_feasible``, as the daemon decides it): from then on Slurm's own rule (the
        # fallback, Slurm's choice) starts it within the cap when it fits; the policy is not
        # asked again. A cap Slurm would refuse is left to Slurm uncapped.
        self.caps = caps
        self._capped: dict[str, int] = {}  # job id -> its cap, until it starts
        # Played as served (the module doc): a fallback stands for Slurm, the policy decides a job once.
        self.served = (caps or not holds) and fallback is not None
        self._left: dict[str, str] = {}    # job id -> why it was left to Slurm, until it starts
        self.fallback = fallback
        self.predictor = predictor
        self.explain = explain
        self.errors = 0  # proposals the policy raised on (each answered by the fallback)

    def advise(self, snapshot: ClusterSnapshot, job: Job, rng: np.random.Generator) -> Advice:
        snapshot = allowed(snapshot, job)
        if job.id in self._capped:
            return self._within_cap(snapshot, job, rng)
        if job.id in self._left:
            return self._left_to_slurm(snapshot, job, rng)
        placement, reason = self._propose(snapshot, job, rng)
        if isinstance(placement, Hold) and not self.holds:
            placement, reason = None, f"held ({placement.reason}), which advise mode cannot serve: left to Slurm"
        if isinstance(placement, Hold) and self.caps:
            if placement.max_nodes and self.fallback is not None and cap_feasible(snapshot, job, placement.max_nodes):
                self._capped[job.id] = placement.max_nodes
                return self._within_cap(snapshot, job, rng)
            placement, reason = None, f"held ({placement.reason}) with no cap Slurm takes: left to Slurm"
        if isinstance(placement, Hold):  # a deliberate wait: the fallback must not undo it
            return Advice(job.id, None, self.policy.name, False, placement.reason, held=True,
                          max_nodes=placement.max_nodes)
        if self.served:
            return self._as_served(snapshot, job, placement, reason, rng)
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

    def _as_served(self, snapshot: ClusterSnapshot, job: Job, placement: Placement | None, reason: str,
                   rng: np.random.Generator) -> Advice:
        """The policy's one decision as the daemon serves it (the module doc)."""
        if placement is not None:
            pinned = self._pinned(snapshot, job, placement, rng)
            if pinned is not None:
                return Advice(job.id, pinned, self.policy.name, False, reason,
                              self.policy.score_nodes(snapshot, job) if self.explain else {},
                              self._predict(snapshot, job, pinned))
            reason = NOT_EXPRESSIBLE
        self._left[job.id] = reason or "does not fit now"
        return self._left_to_slurm(snapshot, job, rng)

    def _pinned(self, snapshot: ClusterSnapshot, job: Job, placement: Placement,
                rng: np.random.Generator) -> Placement | None:
        """What Slurm runs when the daemon serves ``placement``: itself where it is Slurm's own
        choice (the daemon does not pin that), else Slurm's layout of a pin on its nodes, or None
        where Slurm would not start that pin now (the daemon then leaves the job to Slurm)."""
        slurm = self.fallback.place(snapshot, job, rng)
        if slurm is not None and same_layout(slurm, placement):
            return placement
        if job.num_ps and job.ps_demand != job.worker_demand:
            return placement  # no one Slurm job asks this (a trace's job, not a submitted one): as placed
        release = getattr(self.fallback, "release", DEFAULT)  # the Slurm the fallback stands for
        pinned = express(snapshot, job, placement, release)
        if pinned is None or not snapshot.fits(job, pinned) or _broken(snapshot, job, pinned):
            return None
        return pinned

    def _left_to_slurm(self, snapshot: ClusterSnapshot, job: Job, rng: np.random.Generator) -> Advice:
        """Slurm's own choice for a job the daemon left to Slurm: where it fits now, or not yet."""
        advice = self._slurms_choice(snapshot, job, rng, f"left to Slurm: {self._left[job.id]}")
        if advice.placement is not None:
            del self._left[job.id]
        return advice

    def _within_cap(self, snapshot: ClusterSnapshot, job: Job, rng: np.random.Generator) -> Advice:
        """Slurm's own choice for a capped job: on at most its cap of nodes, or not yet (pending
        under its cap, as the loop's Slurm holds a capped job: loop.hook.DaemonPolicy)."""
        cap = self._capped[job.id]
        advice = self._slurms_choice(snapshot, job, rng, f"capped at {cap} node(s)", cap)
        if advice.placement is not None:
            del self._capped[job.id]
        return advice

    def _slurms_choice(self, snapshot: ClusterSnapshot, job: Job, rng: np.random.Generator, reason: str,
                       cap: int | None = None) -> Advice:
        """The fallback's (Slurm's) placement within ``cap`` nodes, or a wait: held under a cap."""
        placement = self.fallback.place(snapshot, job, rng) if cap is None else \
            self.fallback.place(snapshot, job, rng, max_nodes=cap)
        if placement is None or not _valid(snapshot, job, placement) or _broken(snapshot, job, placement):
            return Advice(job.id, None, self.fallback.name, True, f"{reason}: does not fit now",
                          held=cap is not None, max_nodes=cap)
        return Advice(job.id, placement, self.fallback.name, True, reason)

    def warm(self, snapshot: ClusterSnapshot) -> None:
        """Let the policy fill its caches for ``snapshot`` (the daemon's refresh thread: no
        request pays them); a no-op for policies that keep none."""
        warm(self.policy, snapshot)

    def _propose(self, snapshot, job, rng) -> tuple[Placement | Hold | None, str]:
        try:
            placement = self.policy.place(snapshot, job, rng)
        except Exception as exc:
            self.errors += 1
            if self.errors & (self.errors - 1) == 0:  # the 1st, 2nd, 4th, 8th, ...: a bounded log
                log.error("policy %s failed on job %s (%d failures so far): %s: %s", self.policy.name, job.id,
                          self.errors, type(exc).__name__, exc, exc_info=self.errors == 1)
            return None, f"{self.policy.name} failed ({type(exc).__name__})"
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


_PROBE_NODES = tuple(Node(f"probe{i}", 8, 4, 64000, switch=f"probe-sw{i // 2}") for i in range(4))


def self_check(policy: Policy) -> None:
    """ValueError unless ``policy`` places a small PS job (one PS, three one-GPU workers) on an
    empty cluster of four nodes, or holds it: what a model that loads but cannot decide (a network
    that breaks on real inputs) fails, before it serves a request."""
    snapshot = ClusterSnapshot.empty(_PROBE_NODES)
    job = Job("probe", "resnet50", 1, 3, Resources(1, 0, 1000), Resources(2, 1, 4000), 1000.0)
    try:
        placement = policy.place(snapshot, job, np.random.default_rng(0))
    except Exception as exc:  # noqa: BLE001 -- whatever it is, the policy cannot serve
        raise ValueError(f"policy {policy.name} fails on a probe job: {type(exc).__name__}: {exc}") from None
    if isinstance(placement, Hold):
        return
    if placement is None or not _valid(snapshot, job, placement):
        raise ValueError(f"policy {policy.name} finds no valid placement for a probe job on an empty cluster")


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


def same_layout(a: Placement, b: Placement) -> bool:
    """The same tasks of each role on the same nodes (the order of the tasks aside)."""
    return sorted(a.per_node()) == sorted(b.per_node())


def cap_feasible(snapshot: ClusterSnapshot, job: Job, max_nodes: int) -> bool:
    """Whether a node-count cap keeps inside the job's own request and lets it fit in ``max_nodes``
    nodes of the empty cluster. Slurm rejects at submission a job whose node cap no node
    configuration can meet ("Requested node configuration is not available"), and one below its
    own minimum: a cap the job can never meet would cost the user the job."""
    request = job.request
    if request is not None and (max_nodes < request.min_nodes or request.narrows()
                                or (request.max_nodes is not None and max_nodes > request.max_nodes)):
        return False  # a cap outside the user's own -N range narrows or widens what they asked
    empty = allowed(ClusterSnapshot.empty(snapshot.nodes), job)  # its partition, features, -x
    return select(empty, job, max_nodes=max_nodes) is not None
