"""Actor-critic pieces: returns, replay, the update and batching over cluster sizes."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from slurm_advisor.learned.policy.features import FeatureSchema
from slurm_advisor.learned.policy.net import PolicyNet
from slurm_advisor.policies.learned.agent import Decision
from slurm_advisor.training.rl import Replay, actor_critic_step, batch_tensors, discounted_returns

SCHEMA = FeatureSchema()


def returns(times, progress, gamma=0.5, interval=1.0) -> np.ndarray:
    return discounted_returns(np.array(times, dtype=float), progress, gamma, interval)


def test_single_segment_by_hand() -> None:
    # One job does all its work (fraction 1) evenly over [0, 1]; gamma 0.5 per 1 s interval:
    # G(t) = integral_t^1 0.5^(s - t) ds = (1 - 0.5^(1 - t)) / ln 2.
    g = returns([0.0, 0.5, 1.0], [("j", 0.0, 1.0, 1.0)])
    np.testing.assert_allclose(g, [0.5 / math.log(2), (1 - 0.5 ** 0.5) / math.log(2), 0.0], rtol=1e-9)


def test_interval_sets_the_time_scale_of_discounting() -> None:
    # The same episode in hours instead of seconds: the same relative returns (the trainer
    # divides returns by a fixed scale, so only their ratios matter).
    seconds = returns([0.0, 0.25, 0.5], [("j", 0.0, 1.0, 0.5)], gamma=0.9, interval=1.0)
    hours = returns([0.0, 900.0, 1800.0], [("j", 0.0, 3600.0, 0.5)], gamma=0.9, interval=3600.0)
    np.testing.assert_allclose(seconds / seconds[0], hours / hours[0], rtol=1e-9)


def test_segment_before_the_decision_only_counts_from_then() -> None:
    g = returns([0.0, 2.0], [("a", 0.0, 4.0, 1.0)], gamma=0.5, interval=1.0)
    # At t=2 half the work is left, done over [2, 4] at rate 1/4.
    expected = 0.25 * (1 - 0.5 ** 2) / math.log(2)
    assert g[1] == pytest.approx(expected, rel=1e-9)


def test_earlier_progress_is_worth_more() -> None:
    early = returns([0.0], [("a", 1.0, 2.0, 0.5)])
    late = returns([0.0], [("a", 5.0, 6.0, 0.5)])
    assert early[0] > late[0] > 0
    assert late[0] == pytest.approx(early[0] * 0.5 ** 4, rel=1e-9)


def test_more_work_done_is_worth_more() -> None:
    assert returns([0.0], [("a", 0.0, 1.0, 0.6)])[0] > returns([0.0], [("a", 0.0, 1.0, 0.3)])[0]


def test_returns_sum_over_jobs() -> None:
    a, b = ("a", 0.0, 2.0, 0.4), ("b", 1.0, 3.0, 0.7)
    both = returns([0.0, 1.5], [a, b])
    np.testing.assert_allclose(both, returns([0.0, 1.5], [a]) + returns([0.0, 1.5], [b]), rtol=1e-12)


def test_decisions_after_all_progress_get_zero() -> None:
    g = returns([0.0, 3.0, 10.0], [("a", 0.0, 2.0, 0.5), ("b", 1.0, 3.0, 0.5)])
    assert g[0] > 0 and g[1] == 0.0 and g[2] == 0.0


def test_no_progress_gives_zeros() -> None:
    np.testing.assert_array_equal(returns([0.0, 1.0], []), [0.0, 0.0])


def decision(n_nodes: int, action: int = 0, seed: int = 0, feasible: int | None = None) -> Decision:
    rng = np.random.default_rng(seed)
    mask = np.zeros(n_nodes, dtype=bool)
    mask[: feasible or n_nodes] = True
    nodes = rng.random((n_nodes, SCHEMA.node_dim), dtype=np.float32) + 0.1  # no all-zero (padding) rows
    return Decision(nodes, rng.random(SCHEMA.global_dim, dtype=np.float32), mask, action, 0.0, f"j{seed}", False)


def test_replay_is_fifo_with_a_fixed_size() -> None:
    replay = Replay(3)
    replay.add([decision(2, seed=i) for i in range(2)], np.array([1.0, 2.0]))
    replay.add([decision(2, seed=i) for i in range(2, 5)], np.array([3.0, 4.0, 5.0]))
    assert len(replay) == 3
    assert [g for _, g in replay.items] == [3.0, 4.0, 5.0]
    assert [d.job_id for d, _ in replay.items] == ["j2", "j3", "j4"]
    batch = replay.sample(10, np.random.default_rng(0))
    assert len(batch) == 3 and {g for _, g in batch} == {3.0, 4.0, 5.0}
    assert len(replay.sample(2, np.random.default_rng(0))) == 2


def test_batch_tensors_pads_clusters_of_different_sizes() -> None:
    small, large = decision(3, action=2), decision(5, action=4, seed=1, feasible=4)
    nodes, glob, mask, actions = batch_tensors([small, large])
    assert nodes.shape == (2, 5, SCHEMA.node_dim) and glob.shape == (2, SCHEMA.global_dim)
    assert mask.dtype == torch.bool and mask.tolist() == [[True, True, True, False, False],
                                                        [True, True, True, True, False]]
    assert torch.all(nodes[0, 3:] == 0)
    np.testing.assert_array_equal(nodes[0, :3].numpy(), small.nodes)
    assert actions.tolist() == [2, 4]


def test_padding_does_not_change_the_scores() -> None:
    torch.manual_seed(0)
    net = PolicyNet(SCHEMA.node_dim, SCHEMA.global_dim, 16)
    small, large = decision(3), decision(6, seed=1)
    alone_logits, alone_value = net(*batch_tensors([small])[:3])
    logits, values = net(*batch_tensors([small, large])[:3])
    torch.testing.assert_close(logits[0, :3], alone_logits[0])
    torch.testing.assert_close(values[0], alone_value[0])
    assert torch.all(logits[0, 3:] < -1e8)  # padding is never chosen


def test_actor_critic_step_changes_the_parameters() -> None:
    torch.manual_seed(0)
    net = PolicyNet(SCHEMA.node_dim, SCHEMA.global_dim, 16)
    opt = torch.optim.Adam(net.parameters(), lr=1e-2)
    before = [p.detach().clone() for p in net.parameters()]
    batch = [(decision(3 + i % 3, action=i % 3, seed=i), float(i)) for i in range(8)]
    stats = actor_critic_step(net, opt, batch, entropy_weight=0.01, value_weight=0.5)
    assert set(stats) == {"actor", "critic", "entropy"}
    assert all(math.isfinite(v) for v in stats.values()) and stats["entropy"] > 0
    assert any(not torch.equal(b, p) for b, p in zip(before, net.parameters()))


def test_actor_critic_raises_the_probability_of_good_actions() -> None:
    torch.manual_seed(0)
    net = PolicyNet(SCHEMA.node_dim, SCHEMA.global_dim, 16)
    opt = torch.optim.Adam(net.parameters(), lr=1e-2)
    d = decision(4)
    batch = [(Decision(d.nodes, d.glob, d.mask, a, 0.0, "j", False), 1.0 if a == 2 else 0.0) for a in range(4)]
    prob = lambda: torch.softmax(net(*batch_tensors([d])[:3])[0][0], 0)[2].item()
    start = prob()
    for _ in range(20):
        actor_critic_step(net, opt, batch, entropy_weight=0.0, value_weight=0.5)
    assert prob() > start + 0.2


def test_jobs_in_system_return_is_minus_discounted_waiting() -> None:
    from slurm_advisor.training.rl import jobs_in_system_returns
    # One job in the system over [0, 1], gamma 0.5 per 1 s: G(0) = -(1 - 0.5) / ln 2.
    g = jobs_in_system_returns(np.array([0.0, 2.0]), [(0.0, 1.0)], 0.5, 1.0)
    np.testing.assert_allclose(g, [-0.5 / math.log(2), 0.0], rtol=1e-9)
    # a job that finishes sooner costs less
    sooner = jobs_in_system_returns(np.array([0.0]), [(0.0, 1.0)], 0.5, 1.0)
    later = jobs_in_system_returns(np.array([0.0]), [(0.0, 3.0)], 0.5, 1.0)
    assert later[0] < sooner[0] < 0


def test_progress_return_counts_per_interval_not_per_second() -> None:
    # The same work over the same hours gives the same return whatever the time unit.
    hours = returns([0.0], [("a", 0.0, 2.0, 1.0)], gamma=0.9, interval=1.0)
    seconds = returns([0.0], [("a", 0.0, 7200.0, 1.0)], gamma=0.9, interval=3600.0)
    np.testing.assert_allclose(hours, seconds, rtol=1e-9)


def test_no_discount_is_the_plain_integral() -> None:
    g = returns([0.0, 0.5], [("a", 0.0, 1.0, 1.0)], gamma=1.0)
    np.testing.assert_allclose(g, [1.0, 0.5], rtol=1e-9)
