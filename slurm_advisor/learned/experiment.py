"""One experiment as the live system would run it: log speeds, learn, then compare on new jobs.

1. Record speed samples while the site's current policies run the *training* trace
   (what the store holds after some weeks of operation).
2. Fit the speed model on those samples and train the policy (rewards from the fitted model).
3. Run every policy on a *different* test trace under the ground truth, side by side.
The speed model's error is also measured on samples from the test trace: placements and jobs
it never saw.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from slurm_advisor.advisor import Advisor
from slurm_advisor.domain import Job, Node, SpeedSample
from slurm_advisor.learned import checkpoint
from slurm_advisor.learned.hyper import Hyper
from slurm_advisor.learned.speed_model import LearnedSpeedModel
from slurm_advisor.learned.train import Ablation, train
from slurm_advisor.policies import make_policy
from slurm_advisor.sim.engine import Simulation
from slurm_advisor.sim.metrics import SimResult
from slurm_advisor.sim.runner import compare
from slurm_advisor.speedmodels.base import SpeedModel

RECORD_POLICIES = ("slurm-default", "random", "spread", "pack")


@dataclass
class ExperimentResult:
    results: dict[str, SimResult]
    speed_mape_unseen: float
    train_seconds: dict[str, float] = field(default_factory=dict)
    samples: int = 0
    teacher: str = ""
    deployed: dict[str, str] = field(default_factory=dict)  # variant -> "network" or the teacher


def record(nodes: Sequence[Node], jobs: Sequence[Job], truth: SpeedModel, policies: Sequence[str],
           seed: int, noise: float = 0.02) -> list[SpeedSample]:
    samples: list[SpeedSample] = []
    for i, name in enumerate(policies):
        advisor = Advisor(make_policy(name))
        Simulation(nodes, jobs, advisor, truth, seed=seed + i, recorder=samples.extend, sample_noise=noise).run()
    return samples


def run_experiment(nodes: Sequence[Node], train_jobs: Sequence[Job], test_jobs: Sequence[Job],
                   truth: SpeedModel, workdir: Path, hp: Hyper, *, baselines: Sequence[str],
                   ablations: dict[str, Ablation] | None = None, seed: int = 0, log=print,
                   max_samples: int = 30000) -> ExperimentResult:
    samples = record(nodes, train_jobs, truth, RECORD_POLICIES, seed)
    if len(samples) > max_samples:  # keep an even spread over time and policies
        samples = samples[:: len(samples) // max_samples + 1]
    unseen = record(nodes, test_jobs, truth, ("slurm-default", "random"), seed + 100)
    variants = {"learned": Ablation(), **(ablations or {})}
    models, seconds, deployed = {}, {}, {}
    report = None
    for name, ablation in variants.items():
        log(f"training {name} on {len(samples)} samples")
        report = train(samples, nodes, train_jobs, hp, ablation, log=log)
        meta = {"ablation": vars(ablation), "teacher": report.teacher,
                "speed_model": {"holdout_mape": report.speed_metrics["holdout_mape"], "samples": len(samples)},
                "best_validation_jct": report.best_validation_jct, "train_seconds": round(report.seconds, 1),
                "deploy": report.deploy, "curve": report.curve}
        models[name] = checkpoint.save(Path(workdir) / name, report.policy, report.speed, report.schema, hp, meta)
        seconds[name] = report.seconds
        deployed[name] = report.deploy
    mape = LearnedSpeedModel(report.speed, report.schema).mape(unseen) if report else float("nan")
    results = compare(nodes, test_jobs, truth, list(baselines), seed=seed)
    for name, directory in models.items():
        learned = compare(nodes, test_jobs, truth, ["learned"], seed=seed, model_dir=directory)["learned"]
        results[name] = learned
    return ExperimentResult(results, mape, seconds, len(samples), report.teacher if report else "", deployed)
