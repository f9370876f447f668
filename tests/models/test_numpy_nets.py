"""The numpy forward passes that serve the networks give torch's outputs, on random weights and inputs."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from slurm_advisor.learned import numpy_nets
from slurm_advisor.learned.numpy_nets import NumpyScorer, NumpySiteNet
from slurm_advisor.learned.policy.features import FeatureSchema
from slurm_advisor.learned.policy.net import PolicyNet
from slurm_advisor.learned.speed import features as F
from slurm_advisor.learned.speed import net as site_net
from slurm_advisor.learned.speed.fit import to_tensors
from slurm_advisor.learned.speed.net import SiteSpeedNet

SCHEMA = FeatureSchema()


def _randomised(net: torch.nn.Module, seed: int) -> torch.nn.Module:
    """Every parameter drawn at random (a fresh net has zeros where the terms would hide)."""
    torch.manual_seed(seed)
    with torch.no_grad():
        for p in net.parameters():
            p.copy_(0.5 * torch.randn_like(p))
    return net.eval()


def _batch(rng: np.random.Generator, s: int, k: int, n_slots: int, n_node_slots: int) -> F.Batch:
    """``s`` contexts of up to ``k`` nodes: binary roles, non-negative loads and traffic, every job
    with a worker on its first node, some padded (fewer real nodes)."""
    nodes = rng.uniform(0, 1, (s, k, F.N_NODE)).astype(np.float32)
    nodes[..., F.IS_W] = rng.random((s, k)) < 0.6
    nodes[..., F.IS_PS] = rng.random((s, k)) < 0.3
    nodes[:, 0, F.IS_W] = 1.0
    real = np.arange(k)[None, :] < rng.integers(1, k + 1, s)[:, None]
    nodes *= real[..., None]
    counts = (rng.integers(0, 4, (s, k, n_slots)) * real[..., None]).astype(np.float32)
    scalars = rng.uniform(0, 2, (s, F.N_SCALARS)).astype(np.float32)
    scalars[:, [F.P_C, F.P_M]] = rng.normal(0, 1, (s, 2))
    return F.Batch(rng.integers(0, n_slots, s), scalars, nodes, counts, real.astype(np.float32),
                   rng.normal(0, 1, (s, F.N_RESID)).astype(np.float32),
                   (rng.integers(0, n_node_slots, (s, k)) * real).astype(np.int64))


def test_the_site_parameter_layout_is_the_same_in_both() -> None:
    for name in ("C", "V", "U", "SENS", "PRESS", "BETA", "SENS_PS", "A_C", "A_M", "RHO", "X_SW", "X_UP", "W_CPU",
                 "W_GPU", "W_OWN", "KAPPA", "GAMMA", "PS_RATIO", "BUSY", "RACK_C", "RACK_U"):
        assert getattr(numpy_nets, name) == getattr(site_net, name), name


@pytest.mark.parametrize(("n_node_slots", "n_resid"), [(1, F.N_RESID), (4, F.N_RESID), (3, F.N_RESID_WITHOUT_RACKS)])
def test_the_site_ensemble_gives_torchs_log_speeds(n_node_slots: int, n_resid: int) -> None:
    net = _randomised(SiteSpeedNet(5, 3, 16, n_node_slots, n_resid), seed=n_node_slots)
    net.log_lo.fill_(-4.0)  # some outputs clamped
    net.log_hi.fill_(4.0)
    batch = _batch(np.random.default_rng(n_node_slots), 40, 6, 5, n_node_slots)
    with torch.no_grad():
        want = net(to_tensors(batch)).numpy()
    got = NumpySiteNet(net, n_resid)(batch)
    assert got.shape == want.shape == (3, 40) and got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    assert (got == 4.0).any() or (got == -4.0).any()  # the clamp was exercised
    assert not np.array_equal(got[0], got[1])         # the members differ


def test_the_policy_scorer_gives_torchs_logits() -> None:
    net = _randomised(PolicyNet(SCHEMA.node_dim, SCHEMA.global_dim, 32), seed=1)
    rng = np.random.default_rng(1)
    nodes = rng.uniform(0, 1, (9, SCHEMA.node_dim)).astype(np.float32)
    nodes[7:] = 0.0  # padding: left out of the summary
    glob = rng.uniform(0, 1, SCHEMA.global_dim).astype(np.float32)
    mask = np.array([True] * 5 + [False] * 4)
    with torch.no_grad():
        want, _ = net(torch.from_numpy(nodes)[None], torch.from_numpy(glob)[None], torch.from_numpy(mask)[None])
    np.testing.assert_allclose(NumpyScorer(net).logits(nodes, glob, mask), want[0].numpy(), rtol=1e-5, atol=1e-4)
    # from the state_dict's arrays (what a model directory exports): the same weights, the same logits
    arrays = {k: v.numpy() for k, v in net.state_dict().items()}
    assert np.array_equal(NumpyScorer(arrays).logits(nodes, glob, mask), NumpyScorer(net).logits(nodes, glob, mask))


def test_softplus_is_torchs() -> None:
    x = np.array([-50.0, -3.0, 0.0, 2.5, 19.9, 20.0, 20.1, 60.0], dtype=np.float32)
    np.testing.assert_allclose(numpy_nets.softplus(x), torch.nn.functional.softplus(torch.from_numpy(x)).numpy(),
                               rtol=1e-6)
