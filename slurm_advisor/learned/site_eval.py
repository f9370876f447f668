"""The fitted speed model's forward pass in numpy: ``SiteSpeedNet.forward`` for inference.

A prediction is one small batch (the jobs an event touches, one candidate placement) through
some seventy tensor operations; torch spends most of a call on per-operation dispatch, numpy a
fraction of it, and the simulator's replays, the search and the holding rule make tens of
thousands of calls per training. What depends on the parameters alone (the softplus and
exponentials of the fitted coefficients, the residual's weights per slot) is computed once,
by torch, when the evaluator is built; the rest follows ``site_net.SiteSpeedNet.raw`` line by
line in float32. The results equal torch's to float32 rounding (``tests/learned/test_site_eval.py``).
Build a new evaluator after the parameters change (``SiteSpeedModel`` holds a fitted, frozen net).
"""
from __future__ import annotations

import math

import numpy as np
import torch
from torch.nn.functional import softplus

from slurm_advisor.learned import site_features as F
from slurm_advisor.learned import site_net as N


def _np(t: torch.Tensor) -> np.ndarray:
    return np.ascontiguousarray(t.detach().numpy(), dtype=np.float32)


class SiteEvaluator:
    """Log speeds [members, S] of a batch (``site_features.Batch``), clamped as ``forward``."""

    def __init__(self, net: N.SiteSpeedNet):
        with torch.no_grad():
            p, g = net.slot_params, net.global_params  # [M, slots, 7], [M, 14]
            self.log_c, self.log_v, self.beta = _np(p[..., N.C]), _np(p[..., N.V]), _np(p[..., N.BETA])
            self.exp_u = _np(torch.exp(p[..., N.U]))
            self.sens, self.sens_ps = _np(softplus(p[..., N.SENS])), _np(softplus(p[..., N.SENS_PS]))
            self.press = _np(softplus(p[..., N.PRESS]))  # [M, slots]: each type's pressure on a node
            self.a_c, self.a_m = _np(g[:, N.A_C, None]), _np(g[:, N.A_M, None])  # [M, 1]: broadcast over jobs
            col = {name: _np(softplus(g[:, i, None])) for name, i in (
                ("w_cpu", N.W_CPU), ("w_gpu", N.W_GPU), ("w_own", N.W_OWN), ("kappa", N.KAPPA), ("busy", N.BUSY),
                ("rack_c", N.RACK_C), ("x_up", N.X_UP), ("rack_u", N.RACK_U))}
            self.w_cpu, self.w_gpu, self.w_own = col["w_cpu"][..., None], col["w_gpu"][..., None], col["w_own"][..., None]
            self.kappa, self.busy = col["kappa"][..., None], col["busy"][..., None]  # [M, 1, 1]: over jobs, nodes
            self.rack_c, self.x_up, self.rack_u = col["rack_c"], col["x_up"], col["rack_u"]
            self.ps_ratio, self.x_sw, self.rho = (_np(torch.exp(g[:, i, None])) for i in (N.PS_RATIO, N.X_SW, N.RHO))
            self.gamma = _np(1.0 + softplus(g[:, N.GAMMA, None]))
            self.pace = _np(torch.nn.functional.pad(net.centred_pace(), (1, 0))) if net.node_pace.numel() else None
            self.ref = _np(net.prior_ref)
            self.lo, self.hi = float(net.log_lo), float(net.log_hi)
            n_resid = net.n_resid
            w1 = _np(net.w1)  # [M, d_in, H]: resid inputs, slot one-hot, solo speed, the three terms
            self.n_resid = n_resid
            self.w1_resid = w1[:, :n_resid]
            # the one-hot's product is the slot's row; the solo speed's is a per-slot constant
            self.w1_slot = w1[:, n_resid:n_resid + net.n_slots] + _np(net.solo)[None, :, None] * w1[:, None, n_resid + net.n_slots]
            self.w1_terms = w1[:, n_resid + net.n_slots + 1:] / np.float32(5.0)
            self.b1, self.w2, self.b2 = _np(net.b1), _np(net.w2), _np(net.b2)
            self.w3, self.b3 = _np(net.w3), _np(net.b3)[:, :, 0]  # [M, H, 1], [M, 1]

    def __call__(self, b: F.Batch) -> np.ndarray:
        s, nodes, slot = b.scalars, b.nodes, b.slot
        ref = self.ref[slot]
        log_c = self.log_c[:, slot] + self.a_c * (s[:, F.P_C] - ref[:, 0])
        log_v = self.log_v[:, slot] + self.a_m * (s[:, F.P_M] - ref[:, 1])
        load = np.matmul(b.counts[None], self.press[:, None, :, None])[..., 0]  # [M, S, K]
        load = (load + self.w_cpu * nodes[..., F.CPU_O] + self.w_gpu * nodes[..., F.GPU_O]
                + self.w_own * nodes[..., F.OWN])
        sat = load / (1.0 + self.kappa * load)
        slow = (1.0 + self.sens[:, slot, None] * sat) * nodes[..., F.IS_W]
        t_c = np.exp(log_c) * slow.max(-1) * (1.0 + self.rack_c * s[:, F.RACK_BUSY])
        traffic = (s[:, F.RING] + self.ps_ratio * s[:, F.PS_NET]) * (
            1.0 + s[:, F.CROSS] * self.x_sw + self.x_up * s[:, F.UPLINK] + self.rack_u * s[:, F.RACK_UP])
        t_n = np.exp(log_v) * (traffic + self.rho * (s[:, F.INTRA] + s[:, F.PS_LOC]))
        ps_slow = (1.0 + self.sens_ps[:, slot, None] * sat + self.busy * nodes[..., F.ALLOC] ** 2) * nodes[..., F.IS_PS]
        t_u = self.exp_u[:, slot] * s[:, F.UPDATE] * ps_slow.max(-1)
        log_tc, log_tn = np.log(t_c), np.log(t_n + t_u + np.float32(1e-12))
        log_t = np.logaddexp(self.gamma * log_tc, self.gamma * log_tn) / self.gamma
        out = self.beta[:, slot] * s[:, F.LOG_W] - log_t - self._lag(b)
        out += self._residual(b, np.stack([log_tc, log_tn, log_t], -1))
        return np.clip(out, self.lo, self.hi)

    def _lag(self, b: F.Batch) -> np.ndarray | float:
        if self.pace is None:
            return 0.0
        pace = self.pace[:, b.node_slot]  # [M, S, K]
        return np.where(b.nodes[..., F.IS_W] > 0, pace, -math.inf).max(-1)

    def _residual(self, b: F.Batch, terms: np.ndarray) -> np.ndarray:
        h = np.matmul(b.resid[:, :self.n_resid], self.w1_resid) + self.w1_slot[:, b.slot] + self.b1
        h += np.matmul(terms, self.w1_terms)
        h = np.maximum(np.matmul(np.maximum(h, 0.0), self.w2) + self.b2, 0.0)
        return np.matmul(h, self.w3)[..., 0] + self.b3
