"""Candidate vs incumbent: the speed model's error on the held-out samples, and avg JCT of the
recent job mix in simulation under a judge that is neither model (``training.judge.for_retrain``).
"""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from slurm_advisor.domain import Job, Node, SpeedSample
from slurm_advisor.sim.engine import Simulation
from slurm_advisor.sim.runner import build_advisor
from slurm_advisor.training import checkpoint
from slurm_advisor.training.judge import Judge
from slurm_advisor.training.train import avg_jct


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
