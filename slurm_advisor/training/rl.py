"""Actor-critic pieces as small functions: returns, replay buffer, imitation and RL updates.

Reward (Harmony / DL2): the sum over running jobs of the fraction of their total work done,
per reward interval; a decision's return is the discounted sum of that reward from its time
on. Discounting is continuous in time (gamma per ``interval``) so that no binning is needed:
work done sooner counts more, which is what lowers average completion time; packing and
fragmentation effects appear in later rewards, not just at the next placement.
"""
from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence

import numpy as np
import torch
from torch import nn

from slurm_advisor.learned.policy.net import PolicyNet
from slurm_advisor.policies.learned.agent import Decision


def discounted_returns(decision_times: np.ndarray, progress: Sequence[tuple[str, float, float, float]],
                       gamma: float, interval: float) -> np.ndarray:
    """Harmony's return: G(t) = integral over s >= t of gamma^((s - t)/interval) times the summed
    progress rate (fraction of each job's work per interval) of the running jobs at s."""
    if not len(progress):
        return np.zeros(len(decision_times))
    seg = np.array([(t0, t1, f) for _, t0, t1, f in progress], dtype=np.float64)
    rate = seg[:, 2] / np.maximum(seg[:, 1] - seg[:, 0], 1e-9) * interval
    return _discounted_integral(decision_times, seg[:, 0], seg[:, 1], rate, gamma, interval)


def jobs_in_system_returns(decision_times: np.ndarray, spans: Sequence[tuple[float, float]],
                           gamma: float, interval: float) -> np.ndarray:
    """Little's law: the sum of JCTs is the integral of the number of jobs in the system, so
    G(t) = -(discounted jobs-in-system from t on) tracks average JCT directly."""
    if not len(spans):
        return np.zeros(len(decision_times))
    arr = np.array(spans, dtype=np.float64)
    return -_discounted_integral(decision_times, arr[:, 0], arr[:, 1], np.ones(len(arr)), gamma, interval)


def _discounted_integral(times: np.ndarray, t0: np.ndarray, t1: np.ndarray, rate: np.ndarray,
                         gamma: float, interval: float) -> np.ndarray:
    """For each t: sum over segments of the integral of rate * gamma^((s - t)/interval) ds / interval
    over the part of [t0, t1] after t (continuous discounting: no binning into intervals)."""
    t = times[:, None]
    start = np.maximum(t0[None, :], t)
    live = t1[None, :] > start
    if gamma >= 1.0:  # no discounting: the plain integral
        integral = t1[None, :] - start
    else:
        k = math.log(1.0 / gamma) / interval  # decay per second
        integral = (np.exp(-k * (start - t)) - np.exp(-k * (t1[None, :] - t))) / k
    return (np.where(live, integral, 0.0) * rate[None, :]).sum(1) / interval


class Replay:
    """FIFO experience replay over decisions (DL2 keeps the most recent 8192)."""

    def __init__(self, size: int):
        self.items: deque[tuple[Decision, float]] = deque(maxlen=size)

    def add(self, decisions: Sequence[Decision], returns: np.ndarray) -> None:
        self.items.extend(zip(decisions, returns.tolist()))

    def sample(self, n: int, rng: np.random.Generator) -> list[tuple[Decision, float]]:
        idx = rng.choice(len(self.items), size=min(n, len(self.items)), replace=False)
        return [self.items[i] for i in idx]

    def __len__(self) -> int:
        return len(self.items)


def batch_tensors(decisions: Sequence[Decision]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Stack decisions of clusters of any size: pad nodes with zeros and mask them out."""
    n = max(d.nodes.shape[0] for d in decisions)
    dim = decisions[0].nodes.shape[1]
    nodes = np.zeros((len(decisions), n, dim), dtype=np.float32)
    mask = np.zeros((len(decisions), n), dtype=bool)
    for i, d in enumerate(decisions):
        nodes[i, :d.nodes.shape[0]] = d.nodes
        mask[i, :d.mask.shape[0]] = d.mask
    glob = np.stack([d.glob for d in decisions])
    actions = np.array([d.action for d in decisions])
    return torch.from_numpy(nodes), torch.from_numpy(glob), torch.from_numpy(mask), torch.from_numpy(actions)


def imitation_step(net: PolicyNet, opt: torch.optim.Optimizer, decisions: Sequence[Decision],
                   returns: np.ndarray, value_weight: float) -> float:
    """Supervised warm start: cross-entropy towards the heuristic's node, critic towards G."""
    nodes, glob, mask, actions = batch_tensors(decisions)
    logits, values = net(nodes, glob, mask)
    loss = nn.functional.cross_entropy(logits, actions)
    loss = loss + value_weight * nn.functional.mse_loss(values, torch.tensor(returns, dtype=torch.float32))
    opt.zero_grad()
    loss.backward()
    opt.step()
    return float(loss.detach())


def actor_critic_step(net: PolicyNet, opt: torch.optim.Optimizer, batch: Sequence[tuple[Decision, float]],
                      entropy_weight: float, value_weight: float, anchor: Sequence[Decision] = (),
                      anchor_weight: float = 0.0) -> dict[str, float]:
    """Advantage actor-critic on a replayed minibatch: A = G - V(s), entropy bonus.

    ``anchor``: the teacher's decisions; a cross-entropy term towards them keeps the policy near
    the warm start except where the advantages say otherwise (a few simulated episodes give a
    noisy gradient that would otherwise drift the policy away from a good start)."""
    decisions = [d for d, _ in batch]
    returns = torch.tensor([g for _, g in batch], dtype=torch.float32)
    nodes, glob, mask, actions = batch_tensors(decisions)
    logits, values = net(nodes, glob, mask)
    logp = torch.log_softmax(logits, dim=1)
    chosen = logp.gather(1, actions[:, None]).squeeze(1)
    advantage = (returns - values).detach()
    advantage = (advantage - advantage.mean()) / (advantage.std() + 1e-6)
    probs = logp.exp()
    entropy = -(torch.where(mask, probs * logp, torch.zeros_like(logp))).sum(1).mean()
    actor = -(chosen * advantage).mean()
    critic = nn.functional.mse_loss(values, returns)
    loss = actor - entropy_weight * entropy + value_weight * critic
    if anchor and anchor_weight > 0:
        a_nodes, a_glob, a_mask, a_actions = batch_tensors(anchor)
        a_logits, _ = net(a_nodes, a_glob, a_mask)
        loss = loss + anchor_weight * nn.functional.cross_entropy(a_logits, a_actions)
    opt.zero_grad()
    loss.backward()
    nn.utils.clip_grad_norm_(net.parameters(), 1.0)
    opt.step()
    return {"actor": float(actor.detach()), "critic": float(critic.detach()), "entropy": float(entropy.detach())}
