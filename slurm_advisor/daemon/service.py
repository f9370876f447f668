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
"""
from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import numpy as np

from slurm_advisor.advisor import Advice, Advisor
from slurm_advisor.daemon.protocol import ProtocolError, format_layout, parse_marker, task_shape
from slurm_advisor.domain import ClusterSnapshot, Job, Placement
from slurm_advisor.domain.decision import Decision
from slurm_advisor.domain.resources import Resources
from slurm_advisor.policies.cons_tres import select

Express = Callable[[ClusterSnapshot, Job, Placement], Placement | None]
SLURMS_CHOICE = "slurm's own choice: not pinned, Slurm places it there itself"


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


def job_from_request(fields: dict[str, Any], job_id: str) -> Job:
    """The domain's Job for the hook's descriptor fields; ProtocolError names a bad field."""
    if not isinstance(fields, dict):
        raise ProtocolError("job must be an object")
    marker = parse_marker(_text(fields, "comment"))
    if marker is None:
        raise ProtocolError("job.comment carries no 'slurm-advisor:' marker")
    shape = task_shape(fields)
    num_tasks = fields.get("num_tasks")
    if num_tasks is not None and num_tasks != marker.ps + marker.workers:
        raise ProtocolError(f"job.num_tasks is {num_tasks} but the marker says ps={marker.ps} "
                            f"workers={marker.workers}")
    limit = fields.get("time_limit")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit <= 0):
        raise ProtocolError(f"job.time_limit must be a positive number of minutes, not {limit!r}")
    demand = Resources(shape.cpus, shape.gpus, shape.mem_mb)
    user = fields.get("user_id")
    return Job(job_id, marker.type, marker.ps, marker.workers, demand, demand, marker.iters or 1.0,
               user="" if user is None else str(user), model_size_mb=marker.model_mb,
               batch_size=marker.batch, time_limit_s=None if limit is None else limit * 60.0)


def _text(fields: dict[str, Any], name: str) -> str | None:
    value = fields.get(name)
    if value is not None and not isinstance(value, str):
        raise ProtocolError(f"job.{name} must be a string")
    return value


class AdviceService:
    def __init__(self, advisor: Advisor, express: Express, *, model_version: str | None = None,
                 has_switches: bool = False, hold_wait_s: float = 600.0, pins: bool = True,
                 default_partition: str | None = None, model_problem: str | None = None, seed: int = 0):
        self.advisor = advisor
        self.model_problem = model_problem  # why the configured model is not the one serving
        # Slurm rejects at submission a job pinned to a node outside its partition: the policy
        # sees only the nodes of the partition the job runs in (the default one when unset).
        self.default_partition = default_partition
        self._partition_masks: dict[tuple[int, str], np.ndarray] = {}
        # False under topology/block (Slurm 23.11+), where -w conflicts with block placement (the
        # topology wins and the job gets no allocation): a placement is then sent as a node-count
        # cap, Slurm picks the nodes inside its blocks.
        self.pins = pins
        self.express = express
        self.model_version = model_version
        self.has_switches = has_switches
        self.hold_wait_s = hold_wait_s
        self._rng = np.random.default_rng(seed)

    def advise(self, snapshot: ClusterSnapshot, fields: dict[str, Any], mode: str,
               decision_id: str | None = None, rng: np.random.Generator | None = None,
               ) -> tuple[dict[str, Any], Decision, Job, Placement | None]:
        """(reply, decision, job, placement to claim or None). ProtocolError on a bad request.
        ``rng``: another thread's (the ready answers'); numpy's generators are not thread-safe."""
        started = time.perf_counter()
        decision_id = decision_id or new_decision_id()
        job = job_from_request(fields, decision_id)
        snapshot, partition_issue = self._in_partition(snapshot, fields.get("partition"))
        advice = self.advisor.advise(snapshot, job, rng or self._rng) if partition_issue is None else \
            Advice(job.id, None, self.advisor.policy.name, reason=partition_issue)
        # Compared before expressing: pinned, Slurm lays tasks out by its own rule for pinned
        # nodes, which can differ from what it would choose unpinned (expressible.py), so an
        # advice equal to Slurm's own choice would be pinned into something else.
        own = advice.placement is not None and self.pins and slurms_choice(
            snapshot, job, fields, advice.placement, topology=self.has_switches)
        placement, reason = (advice.placement, "") if own else self._expressed(snapshot, job, advice)
        layout = _layout(placement)
        action = "observe" if own else self._action(mode, placement, advice, snapshot, job)
        cap_nodes = advice.max_nodes
        if action == "place" and not self.pins:
            action, cap_nodes = "cap", len(placement.nodes())
        reason = "; ".join(r for r in (reason or advice.reason, SLURMS_CHOICE if own else "") if r)
        reply: dict[str, Any] = {"ok": True, "decision": decision_id, "mode": mode, "action": action,
                                 "reason": reason}
        if action == "place":
            reply.update(nodes=",".join(placement.nodes()), min_nodes=len(placement.nodes()),
                         max_nodes=len(placement.nodes()), num_tasks=job.num_tasks, layout=format_layout(layout))
        elif action == "cap":
            held = advice.held
            reply.update(max_nodes=cap_nodes, switches=1 if self.has_switches and held else None,
                         wait4switch_s=int(self.hold_wait_s) if self.has_switches and held else None)
        decision = Decision(
            decision_id, datetime.now(UTC), mode, action, advice.policy, self.model_version, job.type,
            fields.get("user_id") if isinstance(fields.get("user_id"), int) else None, dict(fields),
            layout=tuple(layout) if action == "place" else (), would=tuple(layout) if action != "place" else (),
            max_nodes=cap_nodes, latency_ms=(time.perf_counter() - started) * 1e3,
            fallback=advice.fallback, reason=reply["reason"])
        claimed = action == "place" or (own and mode != "observe")
        return reply, decision, job, placement if claimed else None

    def _in_partition(self, snapshot: ClusterSnapshot, partition: Any) -> tuple[ClusterSnapshot, str | None]:
        """The snapshot with only the nodes of the job's partition free; or why it cannot say."""
        if partition is not None and not isinstance(partition, str):
            raise ProtocolError("job.partition must be a string")
        name = partition or self.default_partition
        if not any(n.partitions for n in snapshot.nodes[:1]):
            return snapshot, None  # no partitions known (a simulated cluster): every node
        if name is None:
            return snapshot, "the job names no partition and Slurm's default one is unknown: no pin"
        if "," in name:
            return snapshot, "several partitions requested: Slurm chooses one, so no pin"
        key = (id(snapshot.layout), name)
        mask = self._partition_masks.get(key)
        if mask is None:
            if len(self._partition_masks) > 64:
                self._partition_masks.clear()
            mask = np.array([name in n.partitions for n in snapshot.nodes], dtype=bool)
            self._partition_masks[key] = mask
        if mask.all():
            return snapshot, None
        if not mask.any():
            return snapshot, f"partition {name!r} holds none of the nodes the advisor knows"
        return snapshot.with_free(np.where(mask[:, None], snapshot.free_array(), 0)), None

    def _expressed(self, snapshot: ClusterSnapshot, job: Job, advice: Advice) -> tuple[Placement | None, str]:
        if advice.placement is None:
            return None, ""
        placement = self.express(snapshot, job, advice.placement)
        if placement is None or not snapshot.fits(job, placement):
            return None, "Slurm cannot lay the advised nodes out for this job now"
        return placement, ""

    @staticmethod
    def _action(mode: str, placement: Placement | None, advice: Advice, snapshot: ClusterSnapshot,
                job: Job) -> str:
        if mode == "observe":
            return "observe"  # the hook only stamps the decision id, so outcomes link back to it
        if placement is not None:
            return "place"
        if mode == "enforce" and advice.held and advice.max_nodes and _cap_feasible(snapshot, job, advice.max_nodes):
            return "cap"
        return "none"


def slurms_choice(snapshot: ClusterSnapshot, job: Job, fields: dict[str, Any], placement: Placement, *,
                  topology: bool = False) -> bool:
    """Whether Slurm, given the job's own request unmodified, would put exactly ``placement``'s
    tasks on exactly its nodes (select/cons_tres on ``snapshot``: ``policies/cons_tres.py``, the
    slurm-default policy's rule, ``_eval_nodes_topo`` when the cluster has switches), PS tasks
    counted as ``slurm-advisor layout`` counts them in an unpinned job (Slurm's first tasks).

    False where the model does not know Slurm's choice: a job that names its nodes (``-w``), asks
    for GPUs per node (``--gres``) or memory per node (``--mem``); it is then pinned as before."""
    if fields.get("req_nodes") or fields.get("tres_per_node") or \
            (fields.get("pn_min_memory") and not fields.get("mem_per_cpu")):
        return False
    min_nodes, max_nodes = fields.get("min_nodes"), fields.get("max_nodes")
    slurm = select(snapshot, job, topology=topology, min_nodes=_count_or(min_nodes, 1),
                   max_nodes=_count_or(max_nodes, None))
    return slurm is not None and sorted(slurm.per_node()) == sorted(placement.per_node())


def _count_or(value: Any, default: int | None) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 1 else default


def _cap_feasible(snapshot: ClusterSnapshot, job: Job, max_nodes: int) -> bool:
    """Whether the job fits in ``max_nodes`` nodes of the empty cluster. Slurm rejects at submission
    a job whose node cap no node configuration can meet ("Requested node configuration is not
    available"): a cap the job can never meet would cost the user the job."""
    return select(ClusterSnapshot.empty(snapshot.nodes), job, max_nodes=max_nodes) is not None


def _layout(placement: Placement | None) -> list[tuple[str, str]]:
    return [] if placement is None else [(t.role.value, t.node) for t in placement.tasks]
