"""One experiment as the live system would run it: log speeds, learn, then compare on new jobs.

1. Record speed samples while the site's current policies run the *training* trace
   (what the store holds after some weeks of operation), and, apart, while they run the
   *judge* trace (other jobs, other recording seeds): the promotion gate's judge is fitted on
   those only, so that it does not share the fitted model's data and with it its errors.
2. Fit the speed model on the training samples and train the policy (rewards from the fitted model).
3. Run every policy on a *different* test trace under the ground truth, side by side.
The speed model's error is also measured on samples from the test trace: placements and jobs
it never saw. One training, as Harmony's evaluation has it: the production loop (serve, log the
policy's own placements, retrain, promote only past the gate) is ``slurm_advisor.loop``
(``slurm-advisor loop``, ``benchmarks/closed_loop.py``), through the real daemon; this module
does not repeat it in-process.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from slurm_advisor.domain import Job, Node, SpeedSample
from slurm_advisor.learned.hyper import Hyper
from slurm_advisor.sim.engine import Simulation
from slurm_advisor.sim.metrics import SimResult
from slurm_advisor.sim.runner import build_advisor, compare
from slurm_advisor.speedmodels.base import SpeedModel
from slurm_advisor.training import checkpoint
from slurm_advisor.training.train import Ablation, train

RECORD_POLICIES = ("slurm-default", "random", "spread", "pack")
# The judge's samples are recorded with other seeds (other sample noise, other random placements).
JUDGE_SEED_OFFSET = 500


@dataclass
class ExperimentResult:
    results: dict[str, SimResult]
    speed_mape_unseen: float
    train_seconds: dict[str, float] = field(default_factory=dict)
    samples: int = 0
    teacher: str = ""
    deployed: dict[str, str] = field(default_factory=dict)  # variant -> "network" or the teacher, + patience
    validation: dict[str, dict] = field(default_factory=dict)  # variant -> replay JCT, network vs teacher
    models: dict[str, Path] = field(default_factory=dict)  # variant -> model directory (in the workdir)


def record(nodes: Sequence[Node], jobs: Sequence[Job], truth: SpeedModel, policies: Sequence[str],
           seed: int, noise: float = 0.02, model_dir: Path | None = None) -> list[SpeedSample]:
    """Speeds logged while each policy runs the jobs (``model_dir``: the learned policy's model)."""
    samples: list[SpeedSample] = []
    for i, name in enumerate(policies):
        advisor = build_advisor(name, truth, model_dir)
        Simulation(nodes, jobs, advisor, truth, seed=seed + i, recorder=samples.extend, sample_noise=noise).run()
    return samples


def run_experiment(nodes: Sequence[Node], train_jobs: Sequence[Job], test_jobs: Sequence[Job],
                   truth: SpeedModel, workdir: Path, hp: Hyper, *, judge_jobs: Sequence[Job],
                   baselines: Sequence[str], ablations: dict[str, Ablation] | None = None, seed: int = 0,
                   log=print, max_samples: int = 30000) -> ExperimentResult:
    """``judge_jobs``: the trace whose logged speeds the judge is fitted on (no job of the
    training or test traces). Each variant (``learned`` and the ``ablations``) is trained once
    on the same samples."""
    samples = _thin(record(nodes, train_jobs, truth, RECORD_POLICIES, seed), max_samples)
    judge_samples = _thin(record(nodes, judge_jobs, truth, RECORD_POLICIES, seed + JUDGE_SEED_OFFSET), max_samples)
    unseen = record(nodes, test_jobs, truth, ("slurm-default", "random"), seed + 100)
    variants = {"learned": Ablation(), **(ablations or {})}
    models, seconds, deployed, validation = {}, {}, {}, {}
    report = None
    for name, ablation in variants.items():
        log(f"training {name} on {len(samples)} samples, judge on {len(judge_samples)} others")
        report = train(samples, nodes, train_jobs, hp, ablation, log=log, judge_samples=judge_samples)
        models[name] = _save(Path(workdir) / name, report, ablation, hp, len(samples))
        seconds[name] = report.seconds
        deployed[name] = report.deploy + (f" (patience {report.patience})" if report.patience else "")
        validation[name] = {"network": report.best_validation_jct,
                            "teacher": report.teacher_scores[report.teacher],
                            "chosen": report.candidates[report.chosen], "chosen_as": list(report.chosen),
                            "judge": report.judge_scores, "judge_fitted_on": report.judge}
    mape = report.speed.mape(unseen) if report else float("nan")
    results = evaluate(nodes, test_jobs, truth, baselines, models, seed)
    return ExperimentResult(results, mape, seconds, len(samples), report.teacher if report else "",
                            deployed, validation, models)


def evaluate(nodes: Sequence[Node], jobs: Sequence[Job], truth: SpeedModel, baselines: Sequence[str],
             models: dict[str, Path], seed: int) -> dict[str, SimResult]:
    """Every baseline and every trained variant (by name, from its model directory) on ``jobs``.
    `lif` uses the interference profile saved beside the ``learned`` model: fitted on the same
    training samples (never on the test trace); neutral (= spread) when there is no such model."""
    profile_dir = models.get("learned")
    results = {}
    for name in baselines:
        results[name] = compare(nodes, jobs, truth, [name], seed=seed,
                                model_dir=profile_dir if name == "lif" else None)[name]
    for name, directory in models.items():
        results[name] = compare(nodes, jobs, truth, ["learned"], seed=seed, model_dir=directory)["learned"]
    return results


def _thin(samples: list[SpeedSample], most: int) -> list[SpeedSample]:
    """At most ``most`` samples, evenly spread over time and policies."""
    return samples[:: len(samples) // most + 1] if len(samples) > most else samples


def _save(directory: Path, report, ablation: Ablation, hp: Hyper, n_samples: int) -> Path:
    meta = {"ablation": vars(ablation), **report.deployment_meta(),
            "speed_model": {"holdout_mape": report.speed_metrics["holdout_mape"], "samples": n_samples},
            "curve": report.curve}
    return checkpoint.save(directory, report.policy, report.speed, report.schema, hp, meta,
                           lif_profile=report.lif_profile)
