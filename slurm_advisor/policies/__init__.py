"""Placement policies, registered by name in one explicit dict.

Each factory takes a :class:`PolicyContext` with what a policy may need beyond the snapshot
(the ground truth for the oracle, a model directory for the learned policy and for the
interference profile `lif` finds beside it).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from slurm_advisor.errors import InputError
from slurm_advisor.policies.base import Policy
from slurm_advisor.slurm.release import DEFAULT, Release
from slurm_advisor.speedmodels.base import SpeedModel


@dataclass(frozen=True)
class PolicyContext:
    truth: SpeedModel | None = None   # only the oracle may use it
    model_dir: Path | None = None     # the learned policy's checkpoint; lif: its lif_profile.json
    release: Release = DEFAULT        # the Slurm whose choice slurm-default and slurm-topo make


def _slurm_default(ctx: PolicyContext) -> Policy:
    from slurm_advisor.policies.slurm_default import SlurmDefaultPolicy
    return SlurmDefaultPolicy(ctx.release)


def _slurm_topo(ctx: PolicyContext) -> Policy:
    from slurm_advisor.policies.slurm_topo import SlurmTopoPolicy
    return SlurmTopoPolicy(ctx.release)


def _pack(ctx: PolicyContext) -> Policy:
    from slurm_advisor.policies.pack import PackPolicy
    return PackPolicy()


def _spread(ctx: PolicyContext) -> Policy:
    from slurm_advisor.policies.spread import SpreadPolicy
    return SpreadPolicy()


def _random(ctx: PolicyContext) -> Policy:
    from slurm_advisor.policies.random_fit import RandomPolicy
    return RandomPolicy()


def _tetris(ctx: PolicyContext) -> Policy:
    from slurm_advisor.policies.tetris import TetrisPolicy
    return TetrisPolicy()


def _lif(ctx: PolicyContext) -> Policy:
    from slurm_advisor.policies.lif import LifPolicy, profile_for_model
    return LifPolicy(profile_for_model(ctx.model_dir))  # neutral without a model dir or profile


def _oracle(ctx: PolicyContext) -> Policy:
    from slurm_advisor.policies.oracle import OraclePolicy
    if ctx.truth is None:
        raise InputError("policy 'oracle' needs the ground-truth speed model")
    return OraclePolicy(ctx.truth)


def _learned(ctx: PolicyContext) -> Policy:
    from slurm_advisor.policies.learned.adapter import load_learned_policy
    return load_learned_policy(ctx.model_dir)


def _learned_fast(ctx: PolicyContext) -> Policy:
    from slurm_advisor.policies.learned.adapter import load_learned_policy
    return load_learned_policy(ctx.model_dir, fast=True)


def _search(ctx: PolicyContext) -> Policy:
    from slurm_advisor.policies.learned.adapter import load_search_policy
    return load_search_policy(ctx.model_dir)


POLICIES: dict[str, Callable[[PolicyContext], Policy]] = {
    "slurm-default": _slurm_default,
    "slurm-topo": _slurm_topo,
    "pack": _pack,
    "spread": _spread,
    "random": _random,
    "tetris": _tetris,
    "lif": _lif,
    "oracle": _oracle,
    "learned": _learned,
    "learned-fast": _learned_fast,
    "search": _search,
}

# Policies loaded from a trained model directory: the daemon follows retrain's promotions for
# them and falls back to Slurm's own rule when the model does not load.
FROM_MODEL = ("learned", "learned-fast")
BASELINES = ("slurm-default", "slurm-topo", "pack", "spread", "random", "tetris", "lif")


def make_policy(name: str, ctx: PolicyContext | None = None) -> Policy:
    if name not in POLICIES:
        raise InputError(f"unknown policy '{name}'; valid: {', '.join(POLICIES)}")
    return POLICIES[name](ctx or PolicyContext())


__all__ = ["BASELINES", "FROM_MODEL", "POLICIES", "Policy", "PolicyContext", "make_policy"]
