"""Candidate vs incumbent: the speed model's error on the held-out samples, and avg JCT of the
recent job mix in simulation under a judge that is neither model.

The judge is a speed model fitted on the held-out samples alone (the most recent speeds, which
neither the candidate nor, usually, the active model trained on) when there are at least
``JUDGE_MIN_SAMPLES`` of them; with fewer, a fit would be noise, so the judge is the
parametric ``contention`` model, which no model here was fitted to.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from slurm_advisor.domain import Job, Node, SpeedSample
from slurm_advisor.learned.hyper import Hyper
from slurm_advisor.learned.speed.fit import fit_site_model
from slurm_advisor.sim.engine import Simulation
from slurm_advisor.sim.runner import build_advisor
from slurm_advisor.speedmodels import load_speed_model
from slurm_advisor.training import checkpoint
from slurm_advisor.training.train import avg_jct

JUDGE_MIN_SAMPLES = 100
_JUDGE_SEED_OFFSET = 7  # the judge's fit differs from the candidate's even on similar data


@dataclass(frozen=True)
class Judge:
    model: object  # a SpeedModel
    description: str


#: The judge that read no report: the gate's second opinion (retrain/gate.py), and the judge itself
#: when too few samples are held out to fit one.
PRIOR = Judge(load_speed_model("contention"), "the contention model (fitted on no report)")


def make_judge(holdout: Sequence[SpeedSample], hp: Hyper) -> Judge:
    if len(holdout) >= JUDGE_MIN_SAMPLES:
        model, _ = fit_site_model(holdout, replace(hp, seed=hp.seed + _JUDGE_SEED_OFFSET))
        return Judge(model,
                     f"a speed model fitted on the {len(holdout)} held-out samples alone (neither model trained on them)")
    return Judge(PRIOR.model,
                 f"the contention model: only {len(holdout)} held-out samples, {JUDGE_MIN_SAMPLES} "
                 "needed to fit a judge on them")


def holdout_mape(model_dir: Path, holdout: Sequence[SpeedSample]) -> float:
    """The model directory's speed model's mean absolute percentage error on ``holdout``."""
    ckpt = checkpoint.load(model_dir)
    return ckpt.speed_model.mape(holdout)


def replay_jct(nodes: Sequence[Node], jobs: Sequence[Job], judge: Judge, model_dir: Path | None,
               seed: int, *, holds: bool = True) -> float:
    """Avg JCT of the job mix under the judge: the model in ``model_dir`` as the daemon deploys it
    (with slurm-default as its fallback; ``holds`` False: in advise mode, where a hold is left to
    Slurm), or slurm-default itself when ``model_dir`` is None."""
    name = "slurm-default" if model_dir is None else "learned"
    advisor = build_advisor(name, judge.model, model_dir, holds=holds, caps=holds)  # enforce: a hold is a cap
    return avg_jct(Simulation(nodes, jobs, advisor, judge.model, seed=seed).run())
