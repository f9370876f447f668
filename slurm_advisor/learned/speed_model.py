"""Harmony's reward model: predicts a job's speed from its features and placement context.

Trained by supervised regression of log(speed) on recorded samples only (what the live system
logs), so it can judge placements nobody tried. Wrapped as a SpeedModel, it drives the RL
simulator; wrapped as a SpeedPredictor, it explains the advisor's decisions (``mlp_speed``: the
fitted network, in numpy).
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch import nn

from slurm_advisor.domain import SpeedSample
from slurm_advisor.errors import InputError
from slurm_advisor.learned.features import FeatureSchema
from slurm_advisor.learned.hyper import Hyper
from slurm_advisor.learned.mlp_speed import sample_features


class SpeedNet(nn.Module):
    def __init__(self, in_dim: int, hidden: int):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(in_dim, hidden), nn.ReLU(), nn.Linear(hidden, hidden),
                                  nn.ReLU(), nn.Linear(hidden, 1))
        # Range of log-speeds seen in training, widened by 2x each way: an MLP extrapolates
        # wildly on inputs unlike its data, and no placement makes a job 100x faster or slower.
        self.register_buffer("log_lo", torch.tensor(-30.0))
        self.register_buffer("log_hi", torch.tensor(30.0))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.raw(x).clamp(self.log_lo, self.log_hi)  # log(iterations/s)

    def raw(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(x).squeeze(-1)

    def set_range(self, log_speeds: torch.Tensor) -> None:
        margin = float(np.log(2.0))
        self.log_lo.fill_(float(log_speeds.min()) - margin)
        self.log_hi.fill_(float(log_speeds.max()) + margin)


def fit_speed_model(samples: Sequence[SpeedSample], schema: FeatureSchema, hp: Hyper,
                    progress=None) -> tuple[SpeedNet, dict]:
    """Fit on most jobs, keep the epoch that predicts held-out *jobs* best (no leakage)."""
    if len(samples) < 20:
        raise ValueError(f"need at least 20 speed samples to fit the speed model, got {len(samples)}")
    x = torch.tensor(np.stack([sample_features(s, schema) for s in samples]))
    y = torch.tensor(np.log([s.speed for s in samples]), dtype=torch.float32)
    held = holdout_mask([s.subject.job.id for s in samples], hp.speed_holdout, hp.seed)
    torch.manual_seed(hp.seed)
    net = SpeedNet(schema.sample_dim, hp.speed_hidden)
    net.set_range(y)
    opt = torch.optim.Adam(net.parameters(), lr=hp.speed_lr)
    train_idx = torch.nonzero(~held).squeeze(1)
    best = BestEpoch(progress)
    gen = torch.Generator().manual_seed(hp.seed)
    for epoch in range(hp.speed_epochs):
        net.train()
        for batch in torch.randperm(len(train_idx), generator=gen).split(hp.speed_batch):
            idx = train_idx[batch]
            loss = nn.functional.mse_loss(net.raw(x[idx]), y[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
        best.offer(net, epoch, _mape(net, x[held], y[held]) if held.any() else _mape(net, x, y))
    best.restore(net)
    return net, {"samples": len(samples), "holdout_mape": best.error, "curve": best.curve}


class BestEpoch:
    """Keeps the weights of the epoch with the lowest held-out error (and the error curve)."""

    def __init__(self, progress=None):
        self.error, self.state, self.curve, self.progress = float("inf"), None, [], progress

    def offer(self, net: nn.Module, epoch: int, error: float) -> None:
        self.curve.append(error)
        if error < self.error:
            self.error, self.state = error, {k: v.clone() for k, v in net.state_dict().items()}
        if self.progress:
            self.progress(epoch, error)

    def restore(self, net: nn.Module) -> None:
        """The best epoch's weights. No epoch had a finite held-out error (a log speed of -inf from
        a zero speed makes every loss NaN): a clear error, not load_state_dict(None)'s TypeError."""
        if self.state is None:
            raise InputError(f"the speed model's fit gave no finite held-out error in {len(self.curve)} epochs: "
                             "not enough usable samples (are some speeds zero, negative or not finite?)")
        net.load_state_dict(self.state)


def holdout_mask(job_ids: list[str], share: float, seed: int) -> torch.Tensor:
    rng = np.random.default_rng(seed)
    unique = sorted(set(job_ids))
    held = set(rng.choice(unique, size=max(1, int(len(unique) * share)), replace=False).tolist())
    return torch.tensor([j in held for j in job_ids])


@torch.no_grad()
def _mape(net: SpeedNet, x: torch.Tensor, y: torch.Tensor) -> float:
    net.eval()
    pred = torch.exp(net(x))
    true = torch.exp(y)
    return float((torch.abs(pred - true) / true).mean())
