"""`explain`: a decision's layouts and their predicted speeds, and where Slurm put the job.

A decision made since migration 0005 carries its evidence (``daemon/evidence.py``): the layouts
weighed on its own snapshot (the advised one, Slurm's own choice as modelled, a few feasible
alternatives), each with the speed the deciding model predicted then. `explain` shows those as
recorded. An older decision has none: it is judged again on the **empty** cluster of the site's
nodes (a cluster file, or the daemon's source: ``sinfo``) by the active model's speed model,
rebuilt from the request the hook sent, and the output says so. Slurm's layout is its per-node
task counts as read from Slurm (``daemon/allocation.py``), never rebuilt; the reported speeds
(what the job measured) are shown beside them. `shadow`: ``admin_evidence.py``.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from slurm_advisor.domain import ClusterSnapshot, Job, Node, Placement, Role, TaskAssignment
from slurm_advisor.domain.decision import Decision
from slurm_advisor.domain.outcome import Outcome
from slurm_advisor.errors import InputError

ALTERNATIVES = ("slurm-default", "pack")
_DECISION_ID = "d-"


@dataclass(frozen=True)
class Judged:
    """One layout of a job and its predicted speed (None: it does not fit the cluster view)."""

    name: str
    nodes: tuple[str, ...]
    layout: str
    predicted: float | None

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "nodes": list(self.nodes), "layout": self.layout, "predicted": self.predicted}


class Judge:
    """Predicts layouts of a job on the empty cluster of ``nodes`` with ``speed`` (a SpeedPredictor)."""

    def __init__(self, nodes: tuple[Node, ...], speed, model: str):
        self.snapshot = ClusterSnapshot.empty(tuple(nodes))
        self.speed = speed
        self.model = model  # where the speed model came from, for the output

    def layout(self, name: str, job: Job, tasks: list[tuple[str, str]] | tuple[tuple[str, str], ...]) -> Judged:
        """A recorded (role, node) layout as it stands."""
        placement = Placement(job.id, tuple(TaskAssignment(Role(r), n) for r, n in tasks)) if tasks else None
        return self._judged(name, job, placement)

    def alternatives(self, job: Job) -> list[Judged]:
        from slurm_advisor.policies import make_policy

        out = []
        for name in ALTERNATIVES:
            placement = make_policy(name).place(self.snapshot, job, np.random.default_rng(0))
            if placement is not None and not isinstance(placement, Placement):
                placement = None  # a hold
            out.append(self._judged(name, job, placement and (self._express(job, placement) or placement)))
        return out

    def _express(self, job: Job, placement: Placement) -> Placement | None:
        from slurm_advisor.slurm.expressible import express

        try:
            return express(self.snapshot, job, placement)
        except ValueError:
            return None

    def _judged(self, name: str, job: Job, placement: Placement | None) -> Judged:
        if placement is None:
            return Judged(name, (), "", None)
        from slurm_advisor.cli.admin_views import layout_text

        text = layout_text([(t.role.value, t.node) for t in placement.tasks])
        if any(n not in self.snapshot.layout.index for n in placement.nodes()) or \
                not self.snapshot.fits(job, placement):
            return Judged(name, placement.nodes(), text, None)
        return Judged(name, placement.nodes(), text, float(self.speed.predict(self.snapshot, job, placement)))


def make_judge(nodes: tuple[Node, ...], model_dir: Path | None, where: str) -> Judge:
    """The judge with the speed model of the model in ``model_dir`` (None: the packaged one)."""
    from slurm_advisor.models import served

    return Judge(nodes, served.load(model_dir).speed_model, where)


def rebuild_job(decision: Decision) -> Job:
    from slurm_advisor.daemon.protocol import ProtocolError
    from slurm_advisor.daemon.service import job_from_request

    try:
        return job_from_request(decision.request, decision.id)
    except ProtocolError as exc:
        raise InputError(f"decision {decision.id}: cannot rebuild its job from the request: {exc}") from None


def find_decision(store, key: str) -> tuple[Decision, Outcome | None]:
    """The decision ``key`` names (a decision id, or a Slurm job id via its outcome or reports)."""
    if key.startswith(_DECISION_ID):
        decision = store.decision(key)
        if decision is None:
            raise InputError(f"no decision {key} in the store")
        outcome = next((o for o in store.load_outcomes() if o.decision_id == key), None)
        return decision, outcome
    outcome = store.outcome(key)
    decision_id = outcome.decision_id if outcome else next(
        (r.decision_id for r in store.load_reports(job_id=key) if r.decision_id), None)
    decision = store.decision(decision_id) if decision_id else None
    if decision is None:
        raise InputError(f"job {key}: no decision in the store names it (an outcome or a report links a job "
                         "to its decision; give the decision id d-... instead)")
    return decision, outcome


def measured(store, job_id: str | None) -> dict[str, Any] | None:
    """The job's reported speed: reports, mean it/s weighted by their seconds, last it/s."""
    reports = store.load_reports(job_id=job_id) if job_id else []
    if not reports:
        return None
    seconds = sum(r.seconds for r in reports)
    return {"reports": len(reports), "mean_speed": sum(r.iterations for r in reports) / seconds,
            "last_speed": reports[-1].speed, "seconds": seconds}


def explain(store, judge: Judge, key: str) -> dict[str, Any]:
    """A decision, its layouts and their predicted speeds, and where Slurm put the job. With the
    decision's evidence (``daemon/evidence.py``): what was predicted then, on its snapshot, by
    the model that decided; without (an older decision): rebuilt on the empty cluster by
    ``judge``'s speed model, and said so. Slurm's layout is its per-node counts read from Slurm."""
    from slurm_advisor.cli.admin_evidence import NOT_RECORDED
    from slurm_advisor.daemon.evidence import ADVISED, layouts

    decision, outcome = find_decision(store, key)
    job = rebuild_job(decision)
    recorded = layouts(decision.evidence)
    out: dict[str, Any] = {
        "decision": decision.id, "time": decision.time.isoformat(), "mode": decision.mode,
        "action": decision.action, "policy": decision.policy, "model_version": decision.model_version,
        "fallback": decision.fallback, "reason": decision.reason, "job_type": job.type,
        "tasks": job.num_tasks, "advised": bool(decision.layout),
        "job_id": outcome.job_id if outcome else None, "state": outcome.state if outcome else None,
        "measured": measured(store, outcome.job_id if outcome else None)}
    if recorded:
        ev_model = decision.evidence.get("model")
        out.update(evidence="recorded", chosen=_entry(job, recorded[ADVISED]),
                   alternatives=[_entry(job, e) for name, e in recorded.items() if name != ADVISED],
                   speed_model=f"model {ev_model}, which decided" if ev_model else "no speed model (not predicted)",
                   cluster_view="snapshot of the decision")
        if decision.evidence.get("slurm") and not isinstance(decision.evidence["slurm"], dict):
            out["slurm_choice"] = decision.evidence["slurm"]
    else:
        out.update(evidence=NOT_RECORDED, chosen=judge.layout("advisor", job, decision.layout or decision.would).to_dict(),
                   alternatives=[a.to_dict() for a in judge.alternatives(job)], speed_model=judge.model,
                   cluster_view=f"empty cluster of {len(judge.snapshot.nodes)} nodes, rebuilt now "
                                "(the decision recorded no evidence)")
    out["slurm"] = _slurm_row(judge, decision, outcome, job, recorded)
    return out


def _entry(job: Job, entry: dict[str, Any]) -> dict[str, Any]:
    from slurm_advisor.daemon.evidence import placement_of

    placement = placement_of(job, entry["tasks"])
    return Judged(entry["name"], placement.nodes(), _text(placement), entry["predicted"]).to_dict()


def _text(placement: Placement) -> str:
    from slurm_advisor.cli.admin_views import layout_text

    return layout_text([(t.role.value, t.node) for t in placement.tasks])


def _slurm_row(judge: Judge, decision: Decision, outcome: Outcome | None, job: Job,
               recorded: dict[str, dict]) -> dict[str, Any] | None:
    """Where Slurm put the job (its per-node counts, read from Slurm) and, where that layout is
    one the decision recorded, its speed predicted then; None before it started."""
    from slurm_advisor.cli.admin_evidence import slurm_first, slurm_tasks
    from slurm_advisor.daemon.evidence import node_kind, placement_of, signature

    if outcome is None or not outcome.nodes:
        return None
    tasks, where = slurm_tasks(decision, outcome, job)
    if tasks is None:
        return {"name": "slurm", "nodes": list(outcome.nodes), "layout": "", "predicted": None, "note": where}
    placement = placement_of(job, tasks)
    kind = node_kind(judge.snapshot)
    match = next((e for e in slurm_first(recorded) if signature(e["tasks"], kind) == signature(tasks, kind)), None)
    if recorded:
        predicted = match["predicted"] if match else None
        note = f"read from {where}; " + (f"as recorded layout {match['name']}" if match else
                                         "not among the layouts predicted then")
    else:
        predicted, note = judge.layout("slurm", job, [(t.role.value, t.node) for t in placement.tasks]).predicted, \
            f"read from {where}; predicted now (no evidence recorded)"
    return {"name": "slurm", "nodes": list(placement.nodes()), "layout": _text(placement), "predicted": predicted,
            "note": note}
