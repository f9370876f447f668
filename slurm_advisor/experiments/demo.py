"""The demo: the whole method on the shipped default cluster, no Slurm needed.

Synthetic training, judge and test traces of large multi-node jobs, the contention model as
ground truth; then :func:`run_experiment` records speeds on the training trace (and, apart, on
the judge trace for the promotion gate's judge), fits the speed model, trains the policy and
compares it with the baselines on the unseen test trace.
"""
from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from slurm_advisor.domain import Job, Node
from slurm_advisor.experiments.experiment import ExperimentResult, run_experiment
from slurm_advisor.learned.hyper import Hyper
from slurm_advisor.sim.clusterfile import default_cluster
from slurm_advisor.sim.tables import plot_jct_cdf, summaries
from slurm_advisor.sim.workload import at_offered_load
from slurm_advisor.speedmodels import load_speed_model
from slurm_advisor.speedmodels.base import SpeedModel
from slurm_advisor.traces.synthetic import synthetic_jobs

BASELINES = ("slurm-default", "slurm-topo", "pack", "spread", "random", "tetris", "lif", "oracle")
MIX = "large"
TRUTH = "contention"
# Offered load: GPU-hours asked for per hour (jobs alone, consolidated) over the cluster's GPUs.
# Contention and fragmentation waste some capacity, so 0.6 already queues jobs for hours and
# makes placement matter, without a backlog that grows without end.
OFFERED_LOAD = 0.6


@dataclass(frozen=True)
class DemoConfig:
    episodes: int = 100  # RL episodes after the warm start
    jobs: int = 120      # jobs in each of the training, judge and test traces
    seed: int = 0        # seeds the traces, the simulations and the training

    def hyper(self) -> Hyper:
        """A small budget: the demo takes a few minutes on two cores."""
        return replace(Hyper(seed=self.seed), rl_episodes=self.episodes, episode_jobs=min(80, self.jobs),
                       speed_epochs=40, warm_episodes=2, warm_epochs=20)


@dataclass
class DemoResult:
    config: DemoConfig
    nodes: tuple[Node, ...]
    hyper: Hyper
    experiment: ExperimentResult


def run_demo(config: DemoConfig, model_dir: Path, log: Callable[[str], None] = print) -> DemoResult:
    """Train and compare on the default cluster; the trained model is saved under ``model_dir``."""
    nodes, truth = default_cluster(), load_speed_model(TRUTH)
    train_jobs = loaded_trace(nodes, truth, config.jobs, config.seed + 1)
    test_jobs = loaded_trace(nodes, truth, config.jobs, config.seed + 2)
    judge_jobs = loaded_trace(nodes, truth, config.jobs, config.seed + 3)
    hp = config.hyper()
    log(f"cluster: {len(nodes)} nodes, {sum(n.gpus for n in nodes)} GPUs; traces: {config.jobs} training, "
        f"{config.jobs} judge and {config.jobs} test jobs ({MIX} mix, offered load {OFFERED_LOAD}); ground truth: {TRUTH}")
    log(f"then {hp.rl_episodes} RL episodes of {hp.episode_jobs} jobs and the comparison: a few minutes")
    result = run_experiment(nodes, train_jobs, test_jobs, truth, model_dir, hp, judge_jobs=judge_jobs,
                            baselines=BASELINES, seed=config.seed, log=log, rounds=1)
    return DemoResult(config, nodes, hp, result)


def loaded_trace(nodes: Sequence[Node], truth: SpeedModel, n: int, seed: int) -> list[Job]:
    """``n`` synthetic jobs with arrivals scaled to give the cluster ``OFFERED_LOAD``."""
    return at_offered_load(synthetic_jobs(n, seed=seed, mix=MIX), nodes, truth, OFFERED_LOAD)


def to_json(demo: DemoResult) -> dict:
    exp = demo.experiment
    return {
        "cluster": {"nodes": len(demo.nodes), "gpus": sum(n.gpus for n in demo.nodes)},
        "traces": {"mix": MIX, "jobs": demo.config.jobs, "offered_load": OFFERED_LOAD,
                   "train_seed": demo.config.seed + 1, "test_seed": demo.config.seed + 2,
                   "judge_seed": demo.config.seed + 3},
        "ground_truth": TRUTH,
        "hyper": demo.hyper.to_dict(),
        "speed_samples": exp.samples,
        "speed_mape_unseen": _finite(exp.speed_mape_unseen),
        "teacher": exp.teacher,
        "deployed": exp.deployed,
        "train_seconds": {k: round(v, 1) for k, v in exp.train_seconds.items()},
        "policies": {name: {k: _finite(v) for k, v in s.items()} for name, s in summaries(exp.results).items()},
    }


def write_outputs(demo: DemoResult, out: Path) -> dict[str, Path]:
    """results.json and the JCT CDF plot in ``out``; returns what was written."""
    out.mkdir(parents=True, exist_ok=True)
    paths = {"results": out / "results.json", "plot": out / "jct_cdf.png"}
    paths["results"].write_text(json.dumps(to_json(demo), indent=2) + "\n")
    plot_jct_cdf(demo.experiment.results, paths["plot"],
                 title=f"demo: {demo.config.jobs} test jobs on {len(demo.nodes)}x8 GPUs ({TRUTH})")
    return paths


def _finite(x: float) -> float | int | None:
    """JSON has no NaN or infinity."""
    if isinstance(x, int):
        return x
    return float(x) if math.isfinite(x) else None
