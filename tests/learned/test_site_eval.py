"""The speed model's numpy forward equals torch's (``SiteSpeedNet.forward``) to float32 rounding:
for fitted models with and without node paces, a model saved before the rack inputs, batches
of one job and of many with padded nodes, and after a parameter is changed in place."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import torch
from test_site_speed import HP, site_samples, slow_node_samples  # noqa: F401 (fixtures)

from slurm_advisor.learned import site_features as F
from slurm_advisor.learned.site_eval import SiteEvaluator
from slurm_advisor.learned.site_net import SiteSpeedNet
from slurm_advisor.learned.site_speed import fit_site_model, to_tensors

TOLERANCE = 2e-5  # log speed: float32 rounding of a few dozen operations, far below any decision's margin


def _torch(net, batch):
    with torch.no_grad():
        return net(to_tensors(batch)).numpy()


def _batches(contexts, n_slots):
    """One job at a time, then mixed batches (jobs of 1 to many nodes: padded)."""
    yield from (F.Batch.of([c], n_slots) for c in contexts[:40])
    for size in (3, 17, 64):
        yield from (F.Batch.of(contexts[i:i + size], n_slots) for i in range(0, len(contexts), size))


def _assert_equal(net, samples, vocab):
    contexts = [F.sample_context(s, vocab) for s in samples]
    assert len({len(c.nodes) for c in contexts}) > 1  # padding is exercised
    evaluate = SiteEvaluator(net)
    for batch in _batches(contexts, vocab.n_slots):
        got = evaluate(batch)
        assert got.dtype == np.float32 and got.shape == (net.members, len(batch.slot))
        np.testing.assert_allclose(got, _torch(net, batch), rtol=0, atol=TOLERANCE)


@pytest.mark.parametrize("fixture", ["samples", "site_samples", "slow_node_samples"])
def test_numpy_forward_equals_torch(fixture, request) -> None:
    samples = request.getfixturevalue(fixture)
    model, _ = fit_site_model(samples, replace(HP, speed_epochs=3))
    if fixture == "slow_node_samples":
        assert model.net.node_pace.numel() > 0  # the nodes' paces are exercised
    _assert_equal(model.net, samples, model.vocab)


def test_numpy_forward_of_a_model_without_rack_inputs_or_node_paces(site_samples) -> None:  # noqa: F811
    model, _ = fit_site_model(site_samples, replace(HP, speed_epochs=2, speed_min_node_samples=10 ** 9))
    old = SiteSpeedNet(model.vocab.n_slots, HP.speed_members, HP.speed_hidden, 1, F.N_RESID_WITHOUT_RACKS)
    state = model.net.state_dict()
    state["w1"] = torch.cat([state["w1"][:, :24], state["w1"][:, 28:]], 1)
    old.load_state_dict(state)
    torch.manual_seed(0)
    with torch.no_grad():  # away from the fitted values: every term counts
        for p in old.parameters():
            p.add_(0.3 * torch.randn_like(p))
    assert old.node_pace.numel() == 0
    _assert_equal(old, site_samples, model.vocab)


def test_the_model_follows_a_parameter_changed_in_place(site_samples) -> None:  # noqa: F811
    model, _ = fit_site_model(site_samples, replace(HP, speed_epochs=2))
    contexts = [F.sample_context(s, model.vocab) for s in site_samples[:10]]
    before = model.log_speeds_all(contexts)
    with torch.no_grad():
        model.net.b3.add_(0.5)
    after = model.log_speeds_all(contexts)
    np.testing.assert_allclose(after, _torch(model.net, F.Batch.of(contexts, model.vocab.n_slots)), atol=TOLERANCE)
    assert not np.allclose(after, before)
