"""The promotion decision: a pure function of the candidate's and the incumbent's scores.

The incumbent is the active model or, before the first promotion, slurm-default (which has no
speed model, so no MAPE). The candidate is promoted only if

1. its speed model is sane: its error on the held-out recent samples is finite and at most
   ``max_mape`` (a model fitted on garbage, such as randomised speeds, misses by far more);
2. its avg JCT under the judge is better than the incumbent's by at least ``margin`` (a share);
3. under the prior -- the parametric ``contention`` model, fitted on no site's reports -- its
   avg JCT is at most ``prior_tolerance`` (a share) worse than the incumbent's: reports that are
   wrong in a consistent way fool a judge fitted on them, not a judge that never read them
   (issue 40: a candidate trained on speeds inflated by node count^3 looked 87 % better to the
   fitted judge and ran 7-35x slower than slurm-default under the true speeds);
4. its speed model is not worse than the active one's on the same held-out samples.

Otherwise the incumbent stays, and ``Verdict.reason`` says why in one line.
"""
from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Scores:
    avg_jct: float           # seconds: the judge's simulation of the recent job mix
    mape: float | None       # speed model's error on the held-out samples; None: no speed model
    prior_jct: float | None = None  # seconds: the same mix under the prior; None: the judge is the prior


@dataclass(frozen=True)
class Verdict:
    promote: bool
    reason: str


def decide(candidate: Scores, incumbent: Scores, *, incumbent_name: str, margin: float,
           max_mape: float, prior_tolerance: float = 0.1) -> Verdict:
    """Promote ``candidate`` over ``incumbent`` (named ``incumbent_name`` in the reason) or not."""
    cand_mape = candidate.mape
    if cand_mape is None or not math.isfinite(cand_mape) or cand_mape > max_mape:
        return Verdict(False, f"the candidate's speed model misses the held-out speeds by {_pct(cand_mape)} "
                              f"(at most {_pct(max_mape)} allowed): its data look unreliable")
    if not math.isfinite(candidate.avg_jct):
        return Verdict(False, "the candidate finished no job of the recent mix in simulation")
    jct = f"avg JCT {_hours(candidate.avg_jct)} vs {_hours(incumbent.avg_jct)} for {incumbent_name}"
    bar = incumbent.avg_jct * (1.0 - margin)
    if not candidate.avg_jct <= bar:
        return Verdict(False, f"{jct}: not better by the margin of {_pct(margin)}")
    if candidate.prior_jct is not None and incumbent.prior_jct is not None \
            and not candidate.prior_jct <= incumbent.prior_jct * (1.0 + prior_tolerance):
        worse = candidate.prior_jct / incumbent.prior_jct - 1.0 if incumbent.prior_jct > 0 else math.inf
        return Verdict(False, f"{jct}, but under the prior (the contention model, fitted on no report) "
                              f"it is {_pct(worse)} worse ({_hours(candidate.prior_jct)} vs "
                              f"{_hours(incumbent.prior_jct)}; at most {_pct(prior_tolerance)} allowed): "
                              "the reports it learned from may be wrong in a consistent way")
    if incumbent.mape is not None and cand_mape > incumbent.mape:
        return Verdict(False, f"{jct}, but its speed model is worse on the held-out samples: "
                              f"MAPE {_pct(cand_mape)} vs {_pct(incumbent.mape)}")
    gain = 1.0 - candidate.avg_jct / incumbent.avg_jct if incumbent.avg_jct > 0 else 0.0
    mape = f"MAPE {_pct(cand_mape)}" + ("" if incumbent.mape is None else f" vs {_pct(incumbent.mape)}")
    return Verdict(True, f"{jct} ({_pct(gain)} better, margin {_pct(margin)}), {mape}")


def _pct(x: float | None) -> str:
    return "n/a" if x is None or not math.isfinite(x) else f"{100 * x:.1f} %"


def _hours(seconds: float) -> str:
    return f"{seconds / 3600:.2f} h" if math.isfinite(seconds) else "inf"
