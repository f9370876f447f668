"""From one `advise` request to the hook's reply and the decision record. No sockets, no Slurm.

The daemon's server calls :meth:`AdviceService.advise` with the current snapshot (claims already
subtracted); this module turns the hook's job fields into the domain's ``Job``, calls the one
``Advisor.advise`` the simulator calls too, maps its advice onto what Slurm can express in one
job, and applies the mode:

- **observe**: the reply is always ``none`` (the hook changes nothing); the decision records the
  layout it would have advised.
- **advise**: ``place`` when the policy's placement can start now; otherwise ``none`` — the job
  is Slurm's as if the advisor did not exist. A policy's hold is not applied.
- **enforce**: as advise, and a hold becomes ``cap``: a node-count cap (``max_nodes``) and, on a
  cluster with switches, ``--switches=1@hold_wait_s``, so Slurm itself bounds the wait.

**Under topology/block** (``blocks``, read at start) a placement is pinned only where Slurm's
blocks take the pin; across blocks it goes as segments where the release's hook can set
``segment_size`` (26.05+), else as a node-count cap (``slurm/blocks.py``).

**Slurm's own choice is not pinned.** When the placement to pin is exactly what select/cons_tres
gives the user's unmodified request on the same snapshot (:func:`slurms_choice`: the same nodes,
the same PS and worker tasks on each), pinning would buy nothing and cost the pin's own rules
(Slurm's per-node counts on pinned nodes, the release bound). In advise and enforce mode the
reply is then ``observe``: the hook only stamps the decision id into ``admin_comment``, so Slurm
places the job itself, and the daemon still finds it in the queue. The placement is still
claimed (Slurm starts the job at once, but the snapshot shows it only after the next refresh, and
a claim left there would hold back GPUs for the next submission until then); the stamp is what
lets the claim end when the job starts and the job's outcome and reports link to its decision.
``none`` would give neither: a job without the stamp is invisible to the daemon. The decision is
recorded in every mode with the reason :data:`SLURMS_CHOICE` and the layout in ``would``.

**The advisor never narrows what the user asked for.** The hook's fields become one typed
request (``slurm/request.py``); the policy sees only the nodes it allows and a placement counts
only if it honours all of it (``advisor.py``); the pin Slurm would really make of it
(``slurm/expressible.py``) is checked again. Whatever cannot be honoured exactly -- an option the
advisor does not model, a layout it cannot express, a job that cannot start now, no room now --
leaves the job to Slurm as submitted: the reply is ``observe`` (the hook only appends the
decision id to ``admin_comment``), so every marked job leaves a decision with its reason, and
``explain``, ``shadow`` and the retrain see it. ``none`` remains only for a daemon with no
snapshot yet.

**Exact layouts for jobs submitted with ``-m arbitrary``.** Where the release allocates arbitrary
layouts (``Release.allocates_arbitrary``, 23.11+) and no topology plugin chooses nodes, the pin
is the policy's layout itself (``slurm/expressible.py:exact``): the reply's ``task_nodes`` names
each task's node and the hook writes it as ``req_nodes``, so Slurm allocates exactly those tasks
per node. Such a job is only ever pinned this way or left to Slurm: never capped (its node count
is fixed by its list) and never "Slurm's own choice" (that is its own ``-w`` list).
"""
from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

import numpy as np

from slurm_advisor.advisor import NOT_EXPRESSIBLE, Advice, Advisor, allowed, cap_feasible, same_layout
from slurm_advisor.daemon import evidence
from slurm_advisor.daemon.protocol import ProtocolError, format_layout
from slurm_advisor.domain import ClusterSnapshot, Job, Placement
from slurm_advisor.domain.decision import LEFT_TO_SLURM, Decision
from slurm_advisor.slurm import hostlist
from slurm_advisor.slurm.blocks import Blocks
from slurm_advisor.slurm.cons_tres import slurm_choice
from slurm_advisor.slurm.expressible import arbitrary_nodes, exact
from slurm_advisor.slurm.marker import MAX_TASKS, MarkerError
from slurm_advisor.slurm.release import DEFAULT, Release
from slurm_advisor.slurm.request import Mismatch, Submission, read

Express = Callable[[ClusterSnapshot, Job, Placement], Placement | None]
SLURMS_CHOICE = "slurm's own choice: not pinned, Slurm places it there itself"
BLOCKS = "topology/block"
NO_ARBITRARY = ("-m arbitrary: Slurm {release} allocates its own tasks per node and lays the batch step "
                "out from the job's -w list (exact layouts from 23.11)")
ARBITRARY_TOPOLOGY = ("-m arbitrary under a topology plugin: its node choice ignores the per-task list "
                      "(topology/tree) or refuses it (topology/block)")


class DecisionIds:
    """``d-`` + 12 hex digits: milliseconds since the epoch (44 bits) and a 4-bit sequence, kept
    strictly increasing. Unique across restarts as long as the clock does not run back, and cheap:
    ``secrets`` costs a getrandom() call (~40 us on a VM) per request."""

    def __init__(self) -> None:
        self._last = 0
        self._lock = threading.Lock()

    def __call__(self) -> str:
        with self._lock:
            value = max(int(time.time() * 1000) << 4, self._last + 1) & (1 << 48) - 1
            self._last = value
        return f"d-{value:012x}"


new_decision_id = DecisionIds()


def submission(fields: Any) -> Submission:
    """The hook's fields read (``slurm/request.py``); ProtocolError names what the daemon refuses."""
    try:
        return read(fields)
    except (Mismatch, MarkerError) as exc:
        raise ProtocolError(str(exc)) from None


def job_from_request(fields: dict[str, Any], job_id: str, sub: Submission | None = None) -> Job:
    """The domain's Job for the hook's descriptor fields (``sub``: them read already);
    ProtocolError names a bad field."""
    sub = sub or submission(fields)
    limit = fields.get("time_limit")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit <= 0):
        raise ProtocolError(f"job.time_limit must be a positive number of minutes, not {limit!r}")
    user = fields.get("user_id")
    return sub.job(job_id, user="" if user is None else str(user),
                   time_limit_s=None if limit is None else limit * 60.0)


@dataclass(frozen=True)
class Canary:
    version: str
    advisor: Advisor
    share: float


def in_canary(decision_id: str, share: float) -> bool:
    """Whether a decision is in the canary's arm: the first 8 bytes of its id's SHA-256 as a share."""
    digest = hashlib.sha256(decision_id.encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2.0 ** 64 < share


@dataclass(frozen=True)
class Decided:
    """One request decided: the reply, the decision (no evidence yet), the job, the placement to
    claim (None: nothing), and the decision's evidence to compute (None: nothing to weigh)."""

    reply: dict[str, Any]
    decision: Decision
    job: Job
    claim: Placement | None
    evidence: evidence.Pending | None


class AdviceService:
    def __init__(self, advisor: Advisor, express: Express, *, model_version: str | None = None,
                 has_switches: bool = False, hold_wait_s: float = 600.0, pins: bool = True,
                 default_partition: str | None = None, model_problem: str | None = None, seed: int = 0,
                 max_tasks: int = MAX_TASKS, release: Release | None = None, blocks: Blocks | None = None,
                 speed: tuple[Any, str | None] = (None, None), alternatives: int = evidence.MAX_ALTERNATIVES):
        self.advisor = advisor
        # (speed model, its model's version) that predicts the evidence of a heuristic policy's
        # decisions (a model-backed advisor's own ``predictor`` predicts its own)
        self.speed = speed
        self.alternatives = alternatives  # feasible alternatives each decision's evidence weighs (config)
        self.release = release  # the Slurm release read at start (None: not read, 22.05 modelled)
        self.max_tasks = max_tasks  # the site's bound on one job's tasks (config max_tasks)
        self.model_problem = model_problem  # why the configured model is not the one serving
        # Slurm rejects at submission a job pinned to a node outside its partition: the policy
        # sees only the nodes of the partition the job runs in (the default one when unset).
        self.default_partition = default_partition
        # False under topology/block (Slurm 23.11+), where -w conflicts with block placement (the
        # topology wins and the job gets no allocation): a placement is then sent as a node-count
        # cap, Slurm picks the nodes inside its blocks.
        self.pins = pins
        # topology/block's blocks read at start (None: no topology/block): a pin goes where the
        # blocks allow it, in segments where the release's hook can set them, else as a cap.
        self.blocks = blocks
        self.express = express
        self.model_version = model_version
        self.has_switches = has_switches
        self.hold_wait_s = hold_wait_s
        self._rng = np.random.default_rng(seed)
        self.canary: Canary | None = None  # a model the gate accepted, serving its share (retrain/canary.py)

    def _arm(self, decision_id: str) -> tuple[Advisor, str | None]:
        """The advisor for this decision and its model's version: the canary's for its share of
        the decisions, by a hash of the decision id (anyone can recompute the arm), else the active one."""
        canary = self.canary
        if canary is not None and in_canary(decision_id, canary.share):
            return canary.advisor, canary.version
        return self.advisor, self.model_version

    def advise(self, snapshot: ClusterSnapshot, fields: dict[str, Any], mode: str,
               decision_id: str | None = None, rng: np.random.Generator | None = None,
               ) -> tuple[dict[str, Any], Decision, Job, Placement | None]:
        """(reply, decision with its evidence, job, placement to claim or None): :meth:`decide`
        with the evidence computed at once (tests, the CLI's fixtures; the daemon computes it after
        the reply: daemon/evidence_worker.py)."""
        decided = self.decide(snapshot, fields, mode, decision_id, rng)
        decision = decided.decision if decided.evidence is None else \
            replace(decided.decision, evidence=decided.evidence())
        return decided.reply, decision, decided.job, decided.claim

    def decide(self, snapshot: ClusterSnapshot, fields: dict[str, Any], mode: str,
               decision_id: str | None = None, rng: np.random.Generator | None = None) -> Decided:
        """The reply and the decision (its evidence still to compute: ``Decided.evidence``).
        ProtocolError on a bad request. ``rng``: another thread's (the ready answers'); numpy's
        generators are not thread-safe."""
        started = time.perf_counter()
        decision_id = decision_id or new_decision_id()
        sub = submission(fields)
        job = job_from_request(fields, decision_id, sub)
        job, left = self._in_partition(snapshot, job, sub, fields.get("partition"))
        advisor, model_version = self._arm(decision_id)
        advice = Advice(job.id, None, advisor.policy.name, reason=left) if left else \
            advisor.advise(snapshot, job, rng or self._rng)
        view = allowed(snapshot, job)  # what the advice was made on
        # Slurm's own choice as modelled (not under topology/block: the model does not know blocks),
        # on the request path only where a pin depends on it; else the evidence worker finds it.
        modelled = advice.placement is not None and self.blocks is None
        slurm = slurm_choice(view, job, topology=self.has_switches, release=self.release or DEFAULT) \
            if modelled and self.pins and not sub.unpinnable and not sub.arbitrary else \
            (evidence.LATER if modelled else None)
        own = isinstance(slurm, Placement) and same_layout(slurm, advice.placement)
        placement, reason = (advice.placement, "") if own else self._expressed(view, job, advice, sub)
        layout = _layout(placement)
        action = "observe" if own else self._action(mode, placement, advice, snapshot, job)
        cap_nodes, segment, why = advice.max_nodes, None, ""
        if action == "cap" and sub.arbitrary:
            action = "observe"  # a cap below its list's node count: Slurm refuses the job
        if action == "place":
            action, cap_nodes, segment, why = self._pin_or_cap(placement, cap_nodes)
        reason = "; ".join(r for r in (left or reason or advice.reason, why, SLURMS_CHOICE if own else "") if r)
        if action == "observe" and not own and mode != "observe" and not sub.unmodelled:
            reason = f"{LEFT_TO_SLURM}: {reason or 'no placement to advise'}"
        reply: dict[str, Any] = {"ok": True, "decision": decision_id, "mode": mode, "action": action,
                                 "reason": reason}
        if action == "place":
            nodes = sorted(placement.nodes(), key=snapshot.index)
            reply.update(nodes=hostlist.compress(nodes), min_nodes=len(nodes), max_nodes=len(nodes),
                         num_tasks=job.num_tasks, layout=format_layout(layout))
            if segment is not None:
                reply["segment_size"] = segment
            if sub.arbitrary:
                reply["task_nodes"] = arbitrary_nodes(placement)
        elif action == "cap":
            held = advice.held
            reply.update(max_nodes=cap_nodes, switches=1 if self.has_switches and held else None,
                         wait4switch_s=int(self.hold_wait_s) if self.has_switches and held else None)
        pending = None if placement is None else self._evidence(view, job, placement, slurm, advisor, model_version)
        decision = Decision(
            decision_id, datetime.now(UTC), mode, action, advice.policy, model_version, job.type,
            fields.get("user_id") if isinstance(fields.get("user_id"), int) else None, dict(fields),
            layout=tuple(layout) if action == "place" else (), would=tuple(layout) if action != "place" else (),
            max_nodes=cap_nodes, latency_ms=(time.perf_counter() - started) * 1e3,
            fallback=advice.fallback, reason=reply["reason"])
        # What Slurm will run where: a pin, or its own choice; observe mode claims what advise
        # would, so that a burst's later decisions see its earlier ones.
        claimed = action == "place" or own or (mode == "observe" and placement is not None and not left)
        return Decided(reply, decision, job, placement if claimed else None, pending)

    def _evidence(self, view: ClusterSnapshot, job: Job, placement: Placement, slurm: Placement | str | None,
                  advisor: Advisor, model_version: str | None) -> evidence.Pending:
        """What the decision is judged by later (daemon/evidence.py), to be predicted by the
        deciding model's speed model (a heuristic policy's: the daemon's default model, ``speed``),
        captured now: a model swapped in meanwhile changes nothing in it."""
        speed, model = (advisor.predictor, model_version) if advisor.predictor is not None else self.speed
        return evidence.Pending(view, job, placement, slurm, speed, model, self.has_switches,
                                self.release or DEFAULT, self.alternatives)

    def _pin_or_cap(self, placement: Placement, cap: int | None) -> tuple[str, int | None, int | None, str]:
        """(action, node cap, segment size, why) for a placement to pin: a pin where Slurm takes
        one (no topology/block, or nodes its blocks allow), a pin in segments where the release's
        hook can set them and they fit the blocks, else a node-count cap: Slurm refuses at
        submission a pin its blocks do not allow, and picks a cap's nodes inside its blocks."""
        nodes = placement.nodes()
        if not self.pins:
            return "cap", len(nodes), None, ""
        if self.blocks is None or self.blocks.allows(nodes):
            return "place", cap, None, ""
        if self.release is not None and self.release.hook_sets_segment_size:
            size = self.blocks.segment(nodes)
            if size is not None:
                return "place", cap, size, f"{BLOCKS}: pinned in segments of {size} node(s), each in one block"
        return "cap", len(nodes), None, f"{BLOCKS}: the nodes span blocks, so a node-count cap, not a pin"

    def _in_partition(self, snapshot: ClusterSnapshot, job: Job, sub: Submission,
                      partition: Any) -> tuple[Job, str]:
        """The job with its request's partition made explicit, or why the advisor leaves it to Slurm:
        an unmodelled option, a job that cannot start now, a partition it cannot place in."""
        if sub.unmodelled:
            return job, sub.unmodelled
        beyond = self._beyond_bounds(snapshot, job)
        if beyond:
            return job, beyond
        if sub.not_now:
            return job, f"wait: the job {sub.not_now}"
        if partition is not None and not isinstance(partition, str):
            raise ProtocolError("job.partition must be a string")
        if not snapshot.layout.has_partitions:
            return job, ""  # no partitions known (a simulated cluster): every node
        if partition and "," in partition:
            return job, "several partitions requested: Slurm chooses one, so no pin"
        name = partition or self.default_partition
        if name is None:
            return job, "the job names no partition and Slurm's default one is unknown: no pin"
        job = replace(job, request=replace(job.request, partition=name))
        mask = job.request.eligible(snapshot)
        if mask is not None and not mask.any():
            return job, f"no node of partition {name!r} can take it under its request"
        return job, ""

    def _beyond_bounds(self, snapshot: ClusterSnapshot, job: Job) -> str:
        """Why no placement of ``job`` is worth looking for: more tasks than the site lets the
        advisor weigh, or more than the whole cluster holds (Slurm itself refuses that one at
        submission; the policies' cost grows with the tasks)."""
        if job.num_tasks > self.max_tasks:
            return f"the marker asks for {job.num_tasks} tasks; the advisor weighs at most {self.max_tasks} (max_tasks)"
        if not job.total_demand().fits_in(snapshot.layout.total):
            return f"the job's {job.num_tasks} tasks need more than the whole cluster holds"
        return ""

    def _expressed(self, snapshot: ClusterSnapshot, job: Job, advice: Advice,
                   sub: Submission) -> tuple[Placement | None, str]:
        if advice.placement is None:
            return None, ""
        if sub.unpinnable:
            return None, sub.unpinnable
        if sub.arbitrary:
            return self._exact(snapshot, job, advice.placement)
        return _honoured(snapshot, job, self.express(snapshot, job, advice.placement))

    def _exact(self, snapshot: ClusterSnapshot, job: Job, advised: Placement) -> tuple[Placement | None, str]:
        """The policy's own layout for a job submitted with -m arbitrary, where Slurm allocates it."""
        release = self.release or DEFAULT
        if not release.allocates_arbitrary:
            return None, NO_ARBITRARY.format(release=release)
        if self.has_switches or self.blocks is not None or not self.pins:
            return None, ARBITRARY_TOPOLOGY
        return _honoured(snapshot, job, exact(snapshot, job, advised, release))

    @staticmethod
    def _action(mode: str, placement: Placement | None, advice: Advice, snapshot: ClusterSnapshot,
                job: Job) -> str:
        if mode == "observe":
            return "observe"  # the hook only stamps the decision id, so outcomes link back to it
        if placement is not None:
            return "place"
        if mode == "enforce" and advice.held and advice.max_nodes and cap_feasible(snapshot, job, advice.max_nodes):
            return "cap"
        return "observe"  # left to Slurm as submitted, stamped: the decision links to its outcome


def slurms_choice(snapshot: ClusterSnapshot, job: Job, placement: Placement, *, topology: bool = False,
                  release: Release = DEFAULT) -> bool:
    """Whether Slurm, given the job's own request unmodified, would put exactly ``placement``'s
    tasks on exactly its nodes (select/cons_tres on ``snapshot``, the nodes its request allows:
    ``slurm/cons_tres.py``, the slurm-default policy's rule, ``_eval_nodes_topo`` when the cluster
    has switches), PS tasks counted as ``slurm-advisor layout`` counts them in an unpinned job
    (Slurm's first tasks).

    False where the model does not know Slurm's choice: a request that names its nodes, fixes
    tasks, GPUs or memory per node, or asks for whole, contiguous nodes or few switches; it is then
    pinned where the pin honours it."""
    slurm = slurm_choice(snapshot, job, topology=topology, release=release)
    return slurm is not None and same_layout(slurm, placement)


def _honoured(snapshot: ClusterSnapshot, job: Job, placement: Placement | None) -> tuple[Placement | None, str]:
    """``placement`` and no reason where Slurm starts it now and it honours the job's request."""
    if placement is None or not snapshot.fits(job, placement):
        return None, NOT_EXPRESSIBLE
    broken = job.request.violations(snapshot, placement) if job.request is not None else []
    if broken:
        return None, f"{NOT_EXPRESSIBLE}: {'; '.join(broken)}"
    return placement, ""


def _layout(placement: Placement | None) -> list[tuple[str, str]]:
    return [] if placement is None else [(t.role.value, t.node) for t in placement.tasks]
