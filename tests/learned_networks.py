"""Policy networks the tests of the large-cluster fast path run on (tests/policies/learned/data/README.md)."""
from __future__ import annotations

import functools
from pathlib import Path

import torch

from slurm_advisor.learned.policy.features import FeatureSchema
from slurm_advisor.learned.policy.net import PolicyNet

DATA = Path(__file__).parent / "policies" / "learned" / "data"
FILLING, RANDOM = DATA / "filling_policy.pt", DATA / "random_policy.pt"


@functools.cache
def filling_network() -> PolicyNet:
    """A trained network that fills its nodes (the run-by-run path serves such networks only)."""
    schema = FeatureSchema()
    net = PolicyNet(schema.node_dim, schema.global_dim, 64)
    state = torch.load(FILLING, weights_only=True)
    net.load_state_dict({k: v.float() for k, v in state.items()})
    return net.eval()


@functools.cache
def random_network() -> PolicyNet:
    """An untrained network (hidden width 32), saved: it scatters its tasks and holds often."""
    schema = FeatureSchema()
    net = PolicyNet(schema.node_dim, schema.global_dim, 32)
    net.load_state_dict(torch.load(RANDOM, weights_only=True))
    return net.eval()
