"""The structured speed model: a parametric iteration time per job type plus a learned residual,
as an ensemble of independently fitted members (one tensor dimension, trained together).

Per member, a job of type slot ``T`` with ``W`` workers on a placement runs at

    log speed = beta_T log W - log t - max over worker nodes log h_node + r(x)
    t = (t_c^g + (t_n + t_u)^g)^(1/g)                    (g >= 1: how far compute hides traffic)
    t_c = c_T * max over worker nodes (1 + s_T * sat(L_node)) * (1 + r_c rack)   (compute, slowed by the host)
    t_n = v_T * ((ring + e^k ps_net) * (1 + cross * e^x + x_up * uplink + r_u * rack_up) + e^rho (intra + ps_local))
    t_u = u_T * (W / P) * max over PS nodes (1 + s'_T * sat(L_node) + b * alloc_node^2)

with ``L_node`` the other tasks on the node weighted by the pressure ``p_T'`` of their type,
plus the other jobs' shares of the node's CPUs and GPUs and the job's own other tasks there,
``sat(L) = L / (1 + kappa L)`` (linear to saturating), ``h_node`` how much longer a step takes
on that node than on the mean node (older or throttled hardware; 1 for a node without a slot
in the vocabulary; synchronous training waits for its slowest worker, so one slow node slows
the whole job), and the traffic terms of
``site_features``. Optimus (EuroSys'18) fits such a form per model; Pollux's (OSDI'21)
exponent ``g`` overlaps compute and network. ``c_T`` and ``v_T`` also scale with the published
or declared compute and model size of the job (``prior``) around the slot's mean, so that the
shared unknown slot still tells a big model from a small one. ``rack`` is the share of GPUs
allocated on the busiest rack holding a worker and ``rack_up`` how many other jobs cross the
uplinks the job crosses (from the logged switch loads; 0 where unknown): rack-wide power and
uplink limits. Every coefficient is positive
(exponentials and softplus of free parameters). The residual ``r`` is a small MLP on the
placement features, the slot and the parametric terms, its last layer initialised at zero.
"""
from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn.functional import softplus

from slurm_advisor.learned.speed import features as F

# per-slot parameters
C, V, U, SENS, PRESS, BETA, SENS_PS = range(7)
N_SLOT_PARAMS = 7
# global parameters
A_C, A_M, RHO, X_SW, X_UP, W_CPU, W_GPU, W_OWN, KAPPA, GAMMA, PS_RATIO, BUSY, RACK_C, RACK_U = range(14)
N_GLOBAL = 14
_OFF = -20.0  # a global of a model saved before it existed: softplus(-20) ~ 2e-9, the term is off
_TERMS = 3  # parametric log-terms fed to the residual


def _inv_softplus(y: float) -> float:
    return math.log(math.expm1(y))


class SiteSpeedNet(nn.Module):
    def __init__(self, n_slots: int, members: int, hidden: int, n_node_slots: int = 1, n_resid: int = F.N_RESID):
        super().__init__()
        # n_resid: the residual's inputs (site_features): a model fitted before the rack inputs
        # existed reads the first F.N_RESID_WITHOUT_RACKS of them
        self.n_slots, self.members, self.hidden, self.n_resid = n_slots, members, hidden, n_resid
        self.slot_params = nn.Parameter(torch.zeros(members, n_slots, N_SLOT_PARAMS))
        # log h per node slot 1.. (slot 0, every other node, is the typical node: 0)
        self.node_pace = nn.Parameter(torch.zeros(members, n_node_slots - 1))
        self.global_params = nn.Parameter(torch.zeros(members, N_GLOBAL))
        d_in = n_resid + n_slots + 1 + _TERMS
        self.w1 = nn.Parameter(torch.randn(members, d_in, hidden) / math.sqrt(d_in))
        self.b1 = nn.Parameter(torch.zeros(members, 1, hidden))
        self.w2 = nn.Parameter(torch.randn(members, hidden, hidden) / math.sqrt(hidden))
        self.b2 = nn.Parameter(torch.zeros(members, 1, hidden))
        self.w3 = nn.Parameter(torch.zeros(members, hidden, 1))
        self.b3 = nn.Parameter(torch.zeros(members, 1, 1))
        # per slot: mean prior compute / size of its training samples, logged solo speed (0: none)
        self.register_buffer("prior_ref", torch.zeros(n_slots, 2))
        self.register_buffer("solo", torch.zeros(n_slots))
        self.register_buffer("log_lo", torch.tensor(-30.0))
        self.register_buffer("log_hi", torch.tensor(30.0))

    def load_state_dict(self, state, strict: bool = True, assign: bool = False):
        if "node_pace" not in state and self.node_pace.numel() == 0:
            state = {**state, "node_pace": self.node_pace.detach()}  # saved before nodes had a pace
        saved = state.get("global_params")
        if saved is not None and saved.shape[-1] < N_GLOBAL:  # saved before the rack terms
            pad = torch.full((*saved.shape[:-1], N_GLOBAL - saved.shape[-1]), _OFF, dtype=saved.dtype)
            state = {**state, "global_params": torch.cat([saved, pad], -1)}
        return super().load_state_dict(state, strict, assign)

    def initialise(self, slot_log_step: torch.Tensor, prior_ref: torch.Tensor, solo: torch.Tensor,
                   log_speeds: torch.Tensor) -> None:
        """``slot_log_step``: [n_slots] a first guess of each slot's log compute time."""
        with torch.no_grad():
            p = self.slot_params
            p[..., C] = slot_log_step
            p[..., V] = slot_log_step - 2.0
            p[..., U] = slot_log_step - 3.0
            p[..., SENS] = _inv_softplus(0.05)
            p[..., PRESS] = _inv_softplus(0.2)
            p[..., BETA] = 0.5
            p[..., SENS_PS] = _inv_softplus(0.05)
            g = self.global_params
            g[:, A_C], g[:, A_M], g[:, RHO], g[:, X_SW] = 0.5, 0.5, math.log(0.3), math.log(0.5)
            for i in (X_UP, W_CPU, W_GPU, W_OWN, BUSY, RACK_C, RACK_U):
                g[:, i] = _inv_softplus(0.1)
            g[:, KAPPA], g[:, GAMMA], g[:, PS_RATIO] = _inv_softplus(0.5), _inv_softplus(0.2), 0.0
            p.add_(0.05 * torch.randn_like(p))  # members start apart
            self.prior_ref.copy_(prior_ref)
            self.solo.copy_(solo)
            margin = math.log(2.0)  # no placement makes a job 100x faster or slower than logged
            self.log_lo.fill_(float(log_speeds.min()) - margin)
            self.log_hi.fill_(float(log_speeds.max()) + margin)

    def forward(self, b: dict[str, torch.Tensor], terms: dict[str, torch.Tensor] | None = None) -> torch.Tensor:
        """Log speeds [members, S], clamped to the logged range. ``terms``: ``parameter_terms()``
        computed before (a fitted model's are fixed: computing them once saves some 30 of a small
        batch's ~75 operations, and the results are the same to the bit)."""
        return self.raw(b, terms).clamp(self.log_lo, self.log_hi)

    def parameter_terms(self) -> dict[str, torch.Tensor]:
        """The parts of ``raw`` that depend on the parameters alone."""
        g = self.global_params[:, None, :]                  # [M, 1, N_GLOBAL]
        terms = {"g": g, "press": softplus(self.slot_params[..., PRESS])}
        for name, i in (("w_cpu", W_CPU), ("w_gpu", W_GPU), ("w_own", W_OWN), ("kappa", KAPPA), ("busy", BUSY)):
            terms[name] = softplus(g[..., i, None])
        for name, i in (("rack_c", RACK_C), ("x_up", X_UP), ("rack_u", RACK_U)):
            terms[name] = softplus(g[..., i])
        for name, i in (("ps_ratio", PS_RATIO), ("x_sw", X_SW), ("rho", RHO)):
            terms[name] = torch.exp(g[..., i])
        terms["gamma"] = 1.0 + softplus(g[..., GAMMA])
        if self.node_pace.numel():
            terms["pace"] = nn.functional.pad(self.centred_pace(), (1, 0))
        return terms

    def raw(self, b: dict[str, torch.Tensor], terms: dict[str, torch.Tensor] | None = None) -> torch.Tensor:
        k = self.parameter_terms() if terms is None else terms
        s, nodes, slot, g = b["scalars"], b["nodes"], b["slot"], k["g"]
        p = self.slot_params[:, slot]                      # [M, S, 7]
        ref = self.prior_ref[slot]                          # [S, 2]
        log_c = p[..., C] + g[..., A_C] * (s[:, F.P_C] - ref[:, 0])
        log_v = p[..., V] + g[..., A_M] * (s[:, F.P_M] - ref[:, 1])
        load = torch.einsum("skj,mj->msk", b["counts"], k["press"])
        load = (load + k["w_cpu"] * nodes[..., F.CPU_O] + k["w_gpu"] * nodes[..., F.GPU_O]
                + k["w_own"] * nodes[..., F.OWN])
        sat = load / (1.0 + k["kappa"] * load)
        slow = 1.0 + softplus(p[..., SENS, None]) * sat
        slow = (slow * nodes[..., F.IS_W]).amax(-1)          # the slowest worker node
        t_c = torch.exp(log_c) * slow * (1.0 + k["rack_c"] * s[:, F.RACK_BUSY])
        traffic = (s[:, F.RING] + k["ps_ratio"] * s[:, F.PS_NET]) * (
            1.0 + s[:, F.CROSS] * k["x_sw"] + k["x_up"] * s[:, F.UPLINK] + k["rack_u"] * s[:, F.RACK_UP])
        t_n = torch.exp(log_v) * (traffic + k["rho"] * (s[:, F.INTRA] + s[:, F.PS_LOC]))
        ps_slow = (1.0 + softplus(p[..., SENS_PS, None]) * sat + k["busy"] * nodes[..., F.ALLOC] ** 2) * nodes[..., F.IS_PS]
        t_u = torch.exp(p[..., U]) * s[:, F.UPDATE] * ps_slow.amax(-1)
        gamma = k["gamma"]
        log_tc, log_tn = torch.log(t_c), torch.log(t_n + t_u + 1e-12)
        log_t = torch.logaddexp(gamma * log_tc, gamma * log_tn) / gamma
        parametric = p[..., BETA] * s[:, F.LOG_W] - log_t - self._lag(b, k)
        return parametric + self._residual(b, slot, torch.stack([log_tc, log_tn, log_t], -1))

    def centred_pace(self) -> torch.Tensor:
        """Each node's log pace relative to the mean node: the mean is the types' compute time
        (``c_T``), so only the deviations are fitted, and a node without a slot is the mean node."""
        if self.node_pace.numel() == 0:
            return self.node_pace
        return self.node_pace - self.node_pace.mean(-1, keepdim=True)

    def _lag(self, b, terms) -> torch.Tensor:
        """[M, S] log h of each job's slowest worker node."""
        if "pace" not in terms:
            return torch.zeros(())
        pace = terms["pace"][:, b["node_slot"]]  # [M, S, K]
        return torch.where(b["nodes"][..., F.IS_W] > 0, pace, -math.inf).amax(-1)

    def _residual(self, b, slot: torch.Tensor, terms: torch.Tensor) -> torch.Tensor:
        m = self.members
        onehot = nn.functional.one_hot(slot, self.n_slots).to(terms.dtype)
        x = torch.cat([b["resid"][..., :self.n_resid], onehot, self.solo[slot, None]], -1)
        x = torch.cat([x.expand(m, *x.shape), terms / 5.0], -1)  # [M, S, d_in]
        h = torch.relu(torch.baddbmm(self.b1, x, self.w1))
        h = torch.relu(torch.baddbmm(self.b2, h, self.w2))
        return torch.baddbmm(self.b3, h, self.w3).squeeze(-1)
