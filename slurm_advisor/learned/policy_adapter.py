"""Load the learned policy for the registry (greedy, as deployed)."""
from __future__ import annotations

from pathlib import Path

from slurm_advisor.learned import checkpoint
from slurm_advisor.learned.agent import LearnedPolicy


def load_learned_policy(model_dir: Path | None) -> LearnedPolicy:
    ckpt = checkpoint.load(model_dir)
    return LearnedPolicy(ckpt.policy, ckpt.schema, mode="greedy")
