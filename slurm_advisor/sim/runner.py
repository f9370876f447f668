"""Run several policies over the same cluster, trace and ground truth, side by side."""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from slurm_advisor.advisor import Advisor
from slurm_advisor.domain import Job, Node
from slurm_advisor.policies import FROM_MODEL, PolicyContext, make_policy
from slurm_advisor.policies.slurm_default import SlurmDefaultPolicy
from slurm_advisor.sim.engine import Recorder, Simulation
from slurm_advisor.sim.metrics import SimResult
from slurm_advisor.speedmodels.base import SpeedModel

# Policies that may decline to place a job Slurm could place; the site's default then decides,
# exactly as the daemon does (the hook fails open to Slurm's own choice).
_WITH_FALLBACK = {*FROM_MODEL, "search"}


def build_advisor(name: str, truth: SpeedModel, model_dir: Path | None = None, *, holds: bool = True,
                  caps: bool = False) -> Advisor:
    """``holds`` False: as the daemon serves it in advise mode (a held job is left to Slurm);
    ``caps``: as it serves it in enforce mode (a hold is a node-count cap Slurm keeps)."""
    policy = make_policy(name, PolicyContext(truth=truth, model_dir=model_dir))
    fallback = SlurmDefaultPolicy() if name in _WITH_FALLBACK or not holds or caps else None
    return Advisor(policy, fallback=fallback, holds=holds, caps=caps)


def compare(nodes: Sequence[Node], jobs: Sequence[Job], truth: SpeedModel, policies: Sequence[str],
            *, seed: int = 0, model_dir: Path | None = None, recorder: Recorder | None = None,
            sample_noise: float = 0.0, holds: bool = True, caps: bool = False) -> dict[str, SimResult]:
    """Every policy on the same inputs and seed; the recorder sees every policy's samples.
    ``holds`` False, ``caps``: each as the daemon serves it in advise, enforce mode (``build_advisor``)."""
    results = {}
    for name in policies:
        advisor = build_advisor(name, truth, model_dir, holds=holds, caps=caps)
        sim = Simulation(nodes, jobs, advisor, truth, seed=seed, recorder=recorder,
                         sample_noise=sample_noise)
        results[name] = sim.run()
    return results
