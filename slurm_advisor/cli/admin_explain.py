"""`explain` and `shadow`: a decision's placement, Slurm's, and the alternatives, under the active
model's speed model (`shadow`: under the speed model of the model that made each decision).

The daemon does not store the cluster snapshot a decision saw (it would cost every request a
copy of the cluster). So a decision is judged again on the **empty** cluster of the site's nodes
(a cluster file, or the daemon's cluster source: ``sinfo`` on a real Slurm): the job is rebuilt
from the request the hook sent (``service.job_from_request``), each layout is the one Slurm
produces for its node set (``expressible.express``), and the speed model predicts its it/s with
no neighbours. Those predictions compare layouts (how many nodes and switches, tasks per node),
not the contention of the moment; the reported speeds (what the job measured) are shown beside
them.
"""
from __future__ import annotations

from collections.abc import Callable
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

    def kinds(self, nodes) -> list[tuple]:
        """The nodes as their kinds (CPUs, GPUs, memory, switch), sorted: equal for layouts that
        differ only by interchangeable nodes (a node this view lacks is its own kind)."""
        return sorted(self._kind(name) for name in nodes)

    def _kind(self, name: str) -> tuple:
        if name not in self.snapshot.layout.index:
            return (name,)
        n = self.snapshot.node(name)
        return (n.cpus, n.gpus, n.mem_mb, n.switch or "")

    def on_nodes(self, name: str, job: Job, nodes: tuple[str, ...]) -> Judged:
        """Slurm's layout of ``job`` on the node set ``nodes`` (where Slurm put it)."""
        nodes = tuple(n for n in nodes if n in self.snapshot.layout.index)
        if not nodes or len(nodes) > job.num_tasks:
            return Judged(name, nodes, "", None)
        spread = Placement.of(job, [nodes[i % len(nodes)] for i in range(job.num_tasks)])
        return self._judged(name, job, self._express(job, spread) or spread)

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


def bootstrap_ci(speedups: list[float], draws: int = 2000) -> list[float] | None:
    """A 95 % interval for the geometric mean of ``speedups``: the percentile bootstrap over the
    jobs (seeded: the same rows, the same interval). None with fewer than 5 jobs."""
    if len(speedups) < 5:
        return None
    logs = np.log(np.asarray(speedups, dtype=float))
    means = np.random.default_rng(0).choice(logs, size=(draws, len(logs))).mean(axis=1)
    low, high = np.exp(np.percentile(means, [2.5, 97.5]))
    return [round(float(low), 4), round(float(high), 4)]


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
    decision, outcome = find_decision(store, key)
    job = rebuild_job(decision)
    chosen = judge.layout("advisor", job, decision.layout or decision.would)
    out: dict[str, Any] = {
        "decision": decision.id, "time": decision.time.isoformat(), "mode": decision.mode,
        "action": decision.action, "policy": decision.policy, "model_version": decision.model_version,
        "fallback": decision.fallback, "reason": decision.reason, "job_type": job.type,
        "tasks": job.num_tasks, "advised": bool(decision.layout), "chosen": chosen.to_dict(),
        "alternatives": [a.to_dict() for a in judge.alternatives(job)], "speed_model": judge.model,
        "cluster_view": f"empty cluster of {len(judge.snapshot.nodes)} nodes (the decision's snapshot is not stored)",
        "job_id": outcome.job_id if outcome else None, "state": outcome.state if outcome else None,
        "slurm": None, "measured": measured(store, outcome.job_id if outcome else None)}
    if outcome is not None and outcome.nodes:
        out["slurm"] = judge.on_nodes("slurm", job, outcome.nodes).to_dict()
    return out


def shadow(store, judge_of: Callable[[Decision], Judge], decisions: list[Decision]) -> dict[str, Any]:
    """Observe-mode evidence: for each decision whose job Slurm started, the advisor's layout vs
    Slurm's, their predicted speeds by the speed model of the model that made the decision (so a
    promotion since does not change the figure), and what the job reported. Layouts that differ
    only by nodes of the same kind (CPUs, GPUs, memory, switch) are the same layout: the judge
    predicts them alike on its empty cluster."""
    from slurm_advisor.cli.admin_views import outcomes_by_decision

    outcomes = outcomes_by_decision(store)
    rows, unlinked, models = [], 0, set()
    for decision in decisions:
        outcome = outcomes.get(decision.id)
        if outcome is None or not outcome.nodes:
            unlinked += 1
            continue
        judge = judge_of(decision)
        models.add(judge.model)
        job = rebuild_job(decision)
        advisor = judge.layout("advisor", job, decision.would or decision.layout)
        slurm = judge.on_nodes("slurm", job, outcome.nodes)
        speedup = advisor.predicted / slurm.predicted if advisor.predicted and slurm.predicted else None
        rows.append({"decision": decision.id, "job_id": outcome.job_id, "job_type": job.type,
                     "differs": judge.kinds(advisor.nodes) != judge.kinds(outcome.nodes),
                     "advisor_nodes": list(advisor.nodes),
                     "slurm_nodes": list(outcome.nodes), "advisor_predicted": advisor.predicted,
                     "slurm_predicted": slurm.predicted, "predicted_speedup": speedup,
                     "measured": measured(store, outcome.job_id)})
    differ = [r for r in rows if r["differs"]]
    speedups = [r["predicted_speedup"] for r in differ if r["predicted_speedup"]]
    return {"decisions": len(decisions), "with_slurm_placement": len(rows), "without_slurm_placement": unlinked,
            "placed_differently": len(differ),
            "geomean_predicted_speedup": float(np.exp(np.mean(np.log(speedups)))) if speedups else None,
            "geomean_predicted_speedup_ci95": bootstrap_ci(speedups),
            "measured_jobs": sum(r["measured"] is not None for r in rows),
            "speed_model": "; ".join(sorted(models)) or None,
            "cluster_view": "the empty cluster (the decision's snapshot is not stored)", "jobs": rows,
            "cannot_know": "how long each job would have run on the advisor's layout: the speed-up is a prediction"}
