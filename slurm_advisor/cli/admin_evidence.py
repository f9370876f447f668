"""`shadow`: each decision judged by what it recorded then, against what Slurm did. Pure: the
store is read through its API, nothing is predicted here.

A decision records (``daemon/evidence.py``) the layouts it weighed on its own snapshot, each with
its speed predicted then by the model that decided: the advised one, Slurm's own choice as the
daemon models it, a few feasible alternatives. Slurm's own per-node task counts are read from
Slurm while the job runs (``daemon/allocation.py``: ``scontrol show job -d``, or the node list
where it fixes them). A job counts in the figure when

- its decision recorded evidence (older decisions: "not recorded", listed, not counted);
- Slurm's per-node counts are known (else "not read", listed, not counted);
- the advised layout honours the job's request as submitted (-N, -w, -x, partition, ...) on the
  site's nodes (else "impossible", listed, never counted);
- Slurm's layout is one of the recorded ones up to identical nodes, so that both speeds were
  predicted on the same snapshot by the same model (else "not predicted then": Slurm placed it
  otherwise than any layout weighed, e.g. later, on another snapshot).

So the figure is what was predicted when each decision was made: a promotion since changes
nothing. What nobody can know is how long the job would have run on the advisor's layout.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from slurm_advisor.daemon.allocation import from_node_list
from slurm_advisor.daemon.evidence import (
    ADVISED,
    SLURM,
    layouts,
    node_kind,
    placement_of,
    signature,
    tasks_of,
)
from slurm_advisor.domain import ClusterSnapshot, Job
from slurm_advisor.domain.decision import Decision
from slurm_advisor.domain.outcome import Outcome

CANNOT_KNOW = ("how long each job would have run on the advisor's layout: the speed-up is a prediction, "
               "made when the job was decided, by the model that decided it")
NOT_RECORDED = "not recorded (decided before decisions stored their evidence)"


def slurm_tasks(decision: Decision, outcome: Outcome | None, job: Job) -> tuple[list[list] | None, str]:
    """Slurm's per-node ``[node, ps, workers]`` and where they were read; (None, why) if unknown.
    Roles: a job pinned to the advised layout runs it (``SLURM_ADVISOR_LAYOUT``) where Slurm's
    counts agree with it; any other runs its first tasks, in node order, as PS."""
    if outcome is None or not outcome.nodes:
        return None, "Slurm has not started it"
    counts = outcome.tasks or from_node_list(outcome.nodes, job.num_tasks)
    if not counts or len(counts) != len(outcome.nodes) or sum(counts) != job.num_tasks:
        return None, "Slurm's per-node task counts were not read while it ran"
    where = outcome.tasks_from or "node list"
    if decision.layout:
        advised = tasks_of(placement_of(job, _per_node(decision.layout)))
        if {n: p + w for n, p, w in advised} == dict(zip(outcome.nodes, counts)):
            return advised, where
    out, ps = [], job.num_ps
    for node, count in zip(outcome.nodes, counts):
        here = min(ps, count)
        out.append([node, here, count - here])
        ps -= here
    return out, where


def _per_node(layout) -> list[list]:
    counts: dict[str, list[int]] = {}
    for role, node in layout:
        counts.setdefault(node, [0, 0])[0 if role == "ps" else 1] += 1
    return [[n, p, w] for n, (p, w) in counts.items()]


def impossible(view: ClusterSnapshot, job: Job, tasks: list[list]) -> str:
    """Why the advised layout was impossible for the job as submitted ('' : it was not)."""
    placement = placement_of(job, tasks)
    if len(placement.tasks) != job.num_tasks:
        return f"{len(placement.tasks)} tasks, the job has {job.num_tasks}"
    broken = [] if job.request is None else job.request.violations(view, placement)
    return "; ".join(broken)


def judge(decision: Decision, outcome: Outcome | None, job: Job, view: ClusterSnapshot) -> dict[str, Any]:
    """One shadow row: the advised layout, Slurm's, their predictions then, and why not counted."""
    recorded = layouts(decision.evidence)
    advised = recorded.get(ADVISED)
    actual, read_from = slurm_tasks(decision, outcome, job)
    row: dict[str, Any] = {
        "decision": decision.id, "job_id": outcome.job_id if outcome else None, "job_type": job.type,
        "evidence": "recorded" if decision.evidence is not None else NOT_RECORDED,
        "model": (decision.evidence or {}).get("model"),
        "advisor_tasks": advised["tasks"] if advised else _per_node(decision.would or decision.layout),
        "advisor_predicted": advised["predicted"] if advised else None,
        "slurm_tasks": actual, "slurm_read_from": read_from if actual else None,
        "slurm_predicted": None, "slurm_as": None, "slurm_as_modelled": None,
        "differs": None, "predicted_speedup": None, "not_counted": None}
    row["impossible"] = impossible(view, job, row["advisor_tasks"]) or None
    kind = node_kind(view)
    if actual is not None:
        row["differs"] = signature(row["advisor_tasks"], kind) != signature(actual, kind)
        match = next((e for e in slurm_first(recorded) if signature(e["tasks"], kind) == signature(actual, kind)), None)
        if match is not None:
            row["slurm_predicted"], row["slurm_as"] = match["predicted"], match["name"]
        if isinstance(recorded.get(SLURM), dict):
            row["slurm_as_modelled"] = signature(recorded[SLURM]["tasks"], kind) == signature(actual, kind)
    row["not_counted"] = _why_not_counted(row, actual, read_from)
    if row["not_counted"] is None and row["differs"]:
        row["predicted_speedup"] = row["advisor_predicted"] / row["slurm_predicted"]
    return row


def slurm_first(recorded: dict[str, dict]) -> list[dict]:
    """Slurm's modelled choice first: where it equals the advised one, Slurm's name is kept."""
    return sorted(recorded.values(), key=lambda e: (e["name"] != SLURM, e["name"] != ADVISED))


def _why_not_counted(row: dict[str, Any], actual, read_from: str) -> str | None:
    if row["impossible"]:
        return f"impossible for the job as submitted: {row['impossible']}"
    if row["evidence"] != "recorded":
        return NOT_RECORDED
    if actual is None:
        return read_from
    if row["advisor_predicted"] is None:
        return "no speed model predicted it (a heuristic policy without a model)"
    if row["differs"] and row["slurm_predicted"] is None:
        return "Slurm's layout was not among those predicted then (it placed the job otherwise)"
    return None


def summary(rows: list[dict[str, Any]], decisions: int) -> dict[str, Any]:
    """The rows' totals: the geometric-mean predicted speed-up where the layouts differ, its
    interval, and how many rows each reason left out."""
    counted = [r for r in rows if r["not_counted"] is None]
    differ = [r for r in counted if r["differs"]]
    speedups = [r["predicted_speedup"] for r in differ]
    left_out: dict[str, int] = {}
    for r in rows:
        if r["not_counted"] is not None:
            key = r["not_counted"].split(":")[0]
            left_out[key] = left_out.get(key, 0) + 1
    known = [r["slurm_as_modelled"] for r in rows if r["slurm_as_modelled"] is not None]
    return {"decisions": decisions, "with_slurm_placement": sum(r["slurm_tasks"] is not None for r in rows),
            "counted": len(counted), "placed_differently": len(differ), "not_counted": left_out,
            "geomean_predicted_speedup": float(np.exp(np.mean(np.log(speedups)))) if speedups else None,
            "geomean_predicted_speedup_ci95": bootstrap_ci(speedups),
            "slurm_as_modelled": {"agreed": sum(known), "known": len(known)},
            "measured_jobs": sum(r["measured"] is not None for r in rows),
            "models": sorted({r["model"] for r in rows if r["model"]}),
            "cannot_know": CANNOT_KNOW}


def bootstrap_ci(speedups: list[float], draws: int = 2000) -> list[float] | None:
    """A 95 % interval for the geometric mean of ``speedups``: the percentile bootstrap over the
    jobs (seeded: the same rows, the same interval). None with fewer than 5 jobs."""
    if len(speedups) < 5:
        return None
    logs = np.log(np.asarray(speedups, dtype=float))
    means = np.random.default_rng(0).choice(logs, size=(draws, len(logs))).mean(axis=1)
    low, high = np.exp(np.percentile(means, [2.5, 97.5]))
    return [round(float(low), 4), round(float(high), 4)]


def shadow(store, nodes, decisions: list[Decision]) -> dict[str, Any]:
    """Observe mode's evidence over ``decisions`` (see the module's doc), judged on ``nodes``:
    the site's nodes, whose kinds say which nodes are interchangeable."""
    from slurm_advisor.cli.admin_explain import measured, rebuild_job
    from slurm_advisor.cli.admin_views import outcomes_by_decision

    outcomes = outcomes_by_decision(store)
    view = ClusterSnapshot.empty(tuple(nodes))
    rows = []
    for decision in decisions:
        outcome = outcomes.get(decision.id)
        row = judge(decision, outcome, rebuild_job(decision), view)
        row["measured"] = measured(store, outcome.job_id if outcome else None)
        rows.append(row)
    return {**summary(rows, len(decisions)), "jobs": rows}
