"""Measured outcomes decide a canary, and keep watching the model after it (pure).

**The canary.** A model the gate accepts does not go live at once: the daemon serves it to a
share of the marked jobs (``canary_share``; the arm is a hash of the decision id, so anyone can
recompute which arm a decision was in) and the active model to the rest. Every decision records
the model that made it, so the two arms are the decisions of each version, every action
counted (intention to treat: a job both models would leave to Slurm is in its arm too).

**The measure** is each completed job's speed as its reports give it (iterations over seconds
summed), on a log scale, minus the median of its *shape* (job type, PS and worker counts) over
both arms: only shapes both arms ran are compared, so that a mix that differs by chance between
the arms does not decide. **The test** is a one-sided Mann-Whitney U test (normal approximation,
ties corrected) of "the canary's jobs run slower": with ``canary_jobs`` comparable jobs or more in
each arm, the canary is rolled back when p < ``alpha`` and its median speed is more than
``tolerance`` below the active model's; otherwise it becomes the active model.

**The watch.** After a promotion the same test runs between the active model's jobs it placed
itself and the jobs Slurm placed anyway (Slurm's own choice, or left to Slurm), from the
promotion on; a regression beyond ``regression`` with p < ``alpha`` rolls the model back.
Both are decided by ``slurm-advisor canary`` (retrain/canary_run.py), run every few minutes.
"""
from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from slurm_advisor.domain.decision import Decision
from slurm_advisor.domain.outcome import Outcome
from slurm_advisor.domain.speed_report import SpeedReport
from slurm_advisor.slurm.marker import parse_marker


@dataclass(frozen=True)
class CanaryRules:
    jobs: int = 20            # comparable completed jobs per arm before a verdict
    alpha: float = 0.05       # the test's level
    tolerance: float = 0.05   # a canary this much slower (median speed) is still acceptable
    regression: float = 0.10  # after promotion: this much slower than Slurm's own placements rolls back


@dataclass(frozen=True)
class Measured:
    """One completed job: which arm, its shape, log of its reported speed."""
    arm: str
    shape: tuple
    log_speed: float


@dataclass(frozen=True)
class Verdict:
    state: str          # "waiting", "promote" / "keep", or "rollback"
    reason: str
    jobs: dict          # arm -> comparable completed jobs
    effect: float | None = None   # median speed ratio - 1, treated over control
    p_value: float | None = None

    def to_dict(self) -> dict:
        return {"state": self.state, "reason": self.reason, "jobs": self.jobs,
                "effect": None if self.effect is None else round(self.effect, 4),
                "p_value": None if self.p_value is None else round(self.p_value, 4)}


def measured(decisions: Iterable[Decision], reports: Iterable[SpeedReport], outcomes: Iterable[Outcome],
             arm_of) -> list[Measured]:
    """The completed, reported jobs of ``decisions`` that ``arm_of(decision)`` puts in an arm (None: none)."""
    by_decision: dict[str, list[SpeedReport]] = defaultdict(list)
    for r in reports:
        if r.decision_id:
            by_decision[r.decision_id].append(r)
    completed = {o.decision_id for o in outcomes if o.decision_id and o.state == "COMPLETED"}
    out = []
    for d in decisions:
        arm, rs = arm_of(d), by_decision.get(d.id)
        if arm is None or not rs or d.id not in completed:
            continue
        iterations, seconds = sum(r.iterations for r in rs), sum(r.seconds for r in rs)
        if iterations <= 0 or seconds <= 0:
            continue
        out.append(Measured(arm, _shape(d), math.log(iterations / seconds)))
    return out


def _shape(d: Decision) -> tuple:
    try:
        marker = parse_marker(d.request.get("comment"))
        return (d.job_type, marker.ps, marker.workers)
    except ValueError:
        return (d.job_type, d.request.get("num_tasks"))


def compare(jobs: Sequence[Measured], treated: str, control: str, *, min_jobs: int, alpha: float,
            allowed: float, verdicts: tuple[str, str]) -> Verdict:
    """``treated`` against ``control`` on comparable shapes: ``verdicts`` = (pass, fail)."""
    shapes = {a: {j.shape for j in jobs if j.arm == a} for a in (treated, control)}
    common = shapes[treated] & shapes[control]
    pooled: dict[tuple, list[float]] = defaultdict(list)
    for j in jobs:
        if j.shape in common:
            pooled[j.shape].append(j.log_speed)
    centre = {s: statistics.median(v) for s, v in pooled.items()}
    arms = {a: np.array([j.log_speed - centre[j.shape] for j in jobs if j.arm == a and j.shape in common])
            for a in (treated, control)}
    counts = {a: len(v) for a, v in arms.items()}
    if min(counts.values()) < min_jobs:
        return Verdict("waiting", f"{counts[treated]} and {counts[control]} comparable completed jobs "
                                  f"({treated}, {control}); {min_jobs} each needed", counts)
    effect = math.exp(float(np.median(arms[treated]) - np.median(arms[control]))) - 1.0
    p = mann_whitney_less(arms[treated], arms[control])
    said = (f"{treated} jobs' median speed {100 * effect:+.1f} % against {control}'s on "
            f"{len(common)} shapes, one-sided Mann-Whitney U p = {p:.3f} ({counts[treated]} vs {counts[control]} jobs)")
    if p < alpha and effect < -allowed:
        return Verdict(verdicts[1], f"{said}: slower beyond {100 * allowed:.0f} %", counts, effect, p)
    return Verdict(verdicts[0], f"{said}: not slower beyond {100 * allowed:.0f} % at p < {alpha:g}", counts, effect, p)


def mann_whitney_less(x: np.ndarray, y: np.ndarray) -> float:
    """P-value of the one-sided Mann-Whitney U test that ``x`` tends to be smaller than ``y``
    (normal approximation with continuity and tie corrections)."""
    n1, n2 = len(x), len(y)
    values = np.concatenate([x, y])
    order = values.argsort(kind="mergesort")
    ranks = np.empty(len(values))
    sorted_values = values[order]
    i = 0
    while i < len(values):  # average ranks over ties
        j = i
        while j + 1 < len(values) and sorted_values[j + 1] == sorted_values[i]:
            j += 1
        ranks[order[i:j + 1]] = (i + j) / 2 + 1
        i = j + 1
    u = ranks[:n1].sum() - n1 * (n1 + 1) / 2
    _, ties = np.unique(values, return_counts=True)
    n = n1 + n2
    variance = n1 * n2 / 12 * ((n + 1) - (ties ** 3 - ties).sum() / (n * (n - 1)))
    if variance <= 0:
        return 1.0
    z = (u - n1 * n2 / 2 + 0.5) / math.sqrt(variance)
    return 0.5 * math.erfc(-z / math.sqrt(2))


def judge_canary(decisions, reports, outcomes, canary: str, active: str | None, since: float,
                 rules: CanaryRules) -> Verdict:
    """The canary ``canary`` against the active model (``active``: its version; None: the daemon's
    default model, whatever version it has), on the decisions made since ``since`` in advise or
    enforce mode (in observe mode neither model places a job: nothing to measure)."""
    def arm(d: Decision) -> str | None:
        if d.mode == "observe" or d.time.timestamp() < since:
            return None
        if d.model_version == canary:
            return "canary"
        return "active" if active is None or d.model_version == active else None

    return compare(measured(decisions, reports, outcomes, arm), "canary", "active", min_jobs=rules.jobs,
                   alpha=rules.alpha, allowed=rules.tolerance, verdicts=("promote", "rollback"))


def watch_active(decisions, reports, outcomes, active: str, since: float, rules: CanaryRules) -> Verdict:
    """The active model's own placements against the jobs Slurm placed anyway, decided since ``since``."""
    def arm(d: Decision) -> str | None:
        if d.model_version != active or d.mode == "observe" or d.time.timestamp() < since:
            return None
        return "advised" if d.action in ("place", "cap") else "slurm"

    return compare(measured(decisions, reports, outcomes, arm), "advised", "slurm", min_jobs=rules.jobs,
                   alpha=rules.alpha, allowed=rules.regression, verdicts=("keep", "rollback"))
