"""The site's speed model: fitted on the logged samples with the job-type vocabulary they show.

``fit_site_model`` builds the vocabulary from the samples (``vocab``), fits the ensemble of
``net`` by regression of log(speed), each member on its own bootstrap of the training
jobs, and keeps the epoch whose ensemble predicts the held-out *jobs* best. The result serves
the simulator (``speeds``), the advisor and the holding rule (``predict``, ``predict_after``)
and a pessimistic search (``predict_all``: every member's prediction, their spread is how
unsure the model is).
"""
from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import torch
from torch import nn

from slurm_advisor.domain import SpeedSample
from slurm_advisor.errors import InputError
from slurm_advisor.learned.hyper import Hyper
from slurm_advisor.learned.speed import features as F
from slurm_advisor.learned.speed.ensemble import SiteEnsemble
from slurm_advisor.learned.speed.net import SiteSpeedNet
from slurm_advisor.learned.speed.vocab import TypeVocab
from slurm_advisor.plausible_speeds import describe_skipped, usable_samples


def to_tensors(batch: F.Batch) -> dict[str, torch.Tensor]:
    return {"slot": torch.from_numpy(batch.slot), "scalars": torch.from_numpy(batch.scalars),
            "nodes": torch.from_numpy(batch.nodes), "counts": torch.from_numpy(batch.counts),
            "resid": torch.from_numpy(batch.resid), "node_slot": torch.from_numpy(batch.node_slot)}


def _rows(b: dict[str, torch.Tensor], idx: torch.Tensor) -> dict[str, torch.Tensor]:
    return {k: v[idx] for k, v in b.items()}


def fit_site_model(samples: Sequence[SpeedSample], hp: Hyper, progress=None) -> tuple[SiteSpeedModel, dict]:
    if len(samples) < 20:
        raise ValueError(f"need at least 20 speed samples to fit the speed model, got {len(samples)}")
    _, unusable = usable_samples(samples)
    if unusable:  # log(0) = -inf would make every loss NaN (callers filter with usable_samples)
        raise InputError(f"cannot fit the speed model: {describe_skipped(unusable, verb='')}")
    vocab = TypeVocab.from_samples(samples, hp.speed_min_type_samples, hp.speed_min_type_jobs,
                                   hp.speed_min_node_samples)
    batch = F.Batch.of([F.sample_context(s, vocab) for s in samples], vocab.n_slots)
    b = to_tensors(batch)
    y = torch.tensor(np.log([s.speed for s in samples]), dtype=torch.float32)
    jobs = [s.subject.job.id for s in samples]
    held = holdout_mask(jobs, hp.speed_holdout, hp.seed)
    torch.manual_seed(hp.seed)
    net = SiteSpeedNet(vocab.n_slots, hp.speed_members, hp.speed_hidden, vocab.n_node_slots)
    net.initialise(*_starting_point(batch, y, vocab), y)
    weights = _bootstrap(jobs, held, hp.speed_members, hp.seed)  # [M, S]
    train_idx = torch.nonzero(~held).squeeze(1)
    val_idx = torch.nonzero(held).squeeze(1) if held.any() else train_idx
    structured = [net.slot_params, net.global_params, net.node_pace]
    opt = torch.optim.Adam([{"params": structured, "lr": hp.speed_lr * 5},
                            {"params": [p for p in net.parameters() if all(p is not q for q in structured)],
                             "lr": hp.speed_lr, "weight_decay": 1e-4}])
    gen = torch.Generator().manual_seed(hp.seed)
    best = BestEpoch(progress)
    val_b = _rows(b, val_idx)
    # a Gaussian prior on each node's log pace (around the mean node's) worth ``speed_node_prior`` samples (per member)
    pace_weight = hp.speed_node_prior / (hp.speed_members * max(1, len(train_idx)))
    for epoch in range(hp.speed_epochs):
        for chunk in _minibatches(len(train_idx), hp.speed_batch, gen):
            idx = train_idx[chunk]
            err = net.raw(_rows(b, idx)) - y[idx]
            w = weights[:, idx]
            loss = (w * err ** 2).sum() / w.sum().clamp(min=1.0) + pace_weight * (net.centred_pace() ** 2).sum()
            opt.zero_grad()
            loss.backward()
            opt.step()
        with torch.no_grad():
            best.offer(net, epoch, _mape_of(net(val_b).mean(0), y[val_idx]))
    best.restore(net)
    model = SiteSpeedModel(net.eval(), vocab)
    return model, {"samples": len(samples), "holdout_mape": best.error, "curve": best.curve,
                   "vocabulary": list(vocab.types), "members": hp.speed_members}


MIN_STEPS_PER_EPOCH = 20  # a few hundred samples still get enough gradient steps


def _minibatches(n: int, size: int, gen: torch.Generator) -> list[torch.Tensor]:
    """One epoch: every sample once in random order, repeated until at least
    ``MIN_STEPS_PER_EPOCH`` minibatches of up to ``size`` samples are drawn."""
    size = min(size, n)
    steps = max(math.ceil(n / size), MIN_STEPS_PER_EPOCH)
    order = torch.cat([torch.randperm(n, generator=gen) for _ in range(math.ceil(steps * size / n))])
    return list(order[:steps * size].split(size)) if steps * size <= len(order) else list(order.split(size))


def _starting_point(batch: F.Batch, y: torch.Tensor, vocab: TypeVocab):
    """Per slot: log compute time from its median per-worker speed (with beta = 0.5 at the
    start), the mean prior of its samples, and its logged solo speed (0 where none)."""
    n = vocab.n_slots
    log_w = torch.from_numpy(batch.scalars[:, F.LOG_W])
    slot = torch.from_numpy(batch.slot)
    overall = float(torch.median(y - 0.5 * log_w))
    step = torch.full((n,), -overall)
    ref = torch.zeros(n, 2)
    prior = torch.from_numpy(batch.scalars[:, [F.P_C, F.P_M]])
    for i in range(n):
        rows = slot == i
        if rows.any():
            step[i] = -float(torch.median((y - 0.5 * log_w)[rows]))
            ref[i] = prior[rows].mean(0)
        else:
            ref[i] = prior.mean(0)
    solo = torch.tensor([0.0 if math.isnan(x) else x for x in vocab.solo_log_speed])
    return step, ref, solo


def _bootstrap(job_ids: list[str], held: torch.Tensor, members: int, seed: int) -> torch.Tensor:
    """Each member's weight per sample: how often its job was drawn (a bootstrap over jobs)."""
    rng = np.random.default_rng(seed + 1)
    unique = sorted(set(job_ids))
    pos = {j: i for i, j in enumerate(unique)}
    draws = rng.poisson(1.0, size=(members, len(unique))).astype(np.float32)
    if members == 1:
        draws[:] = 1.0
    idx = np.array([pos[j] for j in job_ids])
    w = torch.from_numpy(draws[:, idx])
    return w * (~held).float()


def _mape_of(log_pred: torch.Tensor, y: torch.Tensor) -> float:
    return float((torch.abs(torch.exp(log_pred - y) - 1.0)).mean())


class SiteSpeedModel(SiteEnsemble):
    """The ensemble as fitted, its forward pass in torch (serving: ``NumpySiteNet``, same values)."""

    def __init__(self, net: SiteSpeedNet, vocab: TypeVocab):
        super().__init__(self._forward, vocab)
        self.net = net.eval()
        self._tensors = [*net.parameters(), *net.buffers()]
        self._terms, self._versions = None, None

    def state_dict(self) -> dict[str, torch.Tensor]:
        """The ensemble's weights (what a checkpoint saves beside the vocabulary)."""
        return self.net.state_dict()

    @torch.inference_mode()  # no autograd bookkeeping at all: ~15 % off a small batch
    def _forward(self, batch: F.Batch) -> np.ndarray:
        return self.net(to_tensors(batch), self._parameter_terms()).numpy()

    def _parameter_terms(self) -> dict[str, torch.Tensor]:
        """The net's parameter-only terms, computed again only after a parameter changed in place
        (torch counts every in-place change of a tensor)."""
        versions = [t._version for t in self._tensors]
        if versions != self._versions:
            self._terms, self._versions = self.net.parameter_terms(), versions
        return self._terms


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
