"""The served networks' forward passes in numpy: no torch here, so a serving install needs none.

Each network is built from its state_dict's arrays: a torch module's own ``state_dict()`` (while
training, or to compare with torch) or the arrays a model directory exports (``models.weights``).
Both give the same float32 values (float16 on disk is upcast exactly as torch's ``.float()``),
so the policy's placements do not depend on where its weights came from.

* ``NumpyScorer``: the policy network's actor (``policy_net.PolicyNet``), one decision at a time;
* ``mlp_layers`` / ``mlp_forward``: any ``nn.Sequential`` of Linear and ReLU (the policy's layers);
* ``NumpySiteNet``: the site speed ensemble (``learned.speed.net.SiteSpeedNet``), every member at once.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

import numpy as np

from slurm_advisor.learned.speed import features as F

Layers = list[tuple[np.ndarray, np.ndarray]]  # (weight [in, out], bias [out]) per Linear


class HasState(Protocol):
    def state_dict(self) -> Mapping[str, Any]: ...


Weights = HasState | Mapping[str, np.ndarray]  # a torch module, or its state_dict's arrays

# speed.net's parameter layout (it imports torch, so the indices are repeated here; a test
# checks that both agree)
C, V, U, SENS, PRESS, BETA, SENS_PS = range(7)
A_C, A_M, RHO, X_SW, X_UP, W_CPU, W_GPU, W_OWN, KAPPA, GAMMA, PS_RATIO, BUSY, RACK_C, RACK_U = range(14)


def arrays_of(net_or_state: Weights) -> dict[str, np.ndarray]:
    """float32 copies of a state_dict's arrays, or of a module's (anything with ``state_dict()``):
    copies, so that a network trained on in place does not change a scorer made before."""
    state = net_or_state.state_dict() if hasattr(net_or_state, "state_dict") else net_or_state
    arrays = {k: v.detach().cpu().numpy() if hasattr(v, "detach") else np.asarray(v) for k, v in state.items()}
    return {k: np.array(a, dtype=np.float32) if np.issubdtype(a.dtype, np.floating) else a.copy()
            for k, a in arrays.items()}


def mlp_layers(state: Mapping[str, np.ndarray], prefix: str) -> Layers:
    """The Linear layers of the ``nn.Sequential`` saved under ``prefix`` (``prefix.<i>.weight``), in order."""
    at = sorted(int(k[len(prefix) + 1:].split(".")[0]) for k in state
                if k.startswith(prefix + ".") and k.endswith(".weight"))
    return [(np.array(state[f"{prefix}.{i}.weight"].T, order="C"), np.array(state[f"{prefix}.{i}.bias"])) for i in at]


def mlp_forward(x, layers: Layers, relu_last: bool):
    for i, (w, b) in enumerate(layers):
        x = x @ w + b
        if i < len(layers) - 1 or relu_last:
            x = np.maximum(x, 0.0)
    return x


class NumpyScorer:
    """The actor's forward pass in numpy for one decision at a time.

    A decision is a handful of tiny matrix products; numpy does them several times faster than
    torch's per-call overhead allows, which is what bounds simulated episodes per minute.
    Snapshot the weights after every update (the scorer does not follow the network).
    ``net``: a PolicyNet or its state_dict's arrays.
    """

    def __init__(self, net):
        state = arrays_of(net)
        self.encode, self.context, self.score = (mlp_layers(state, p) for p in ("encode", "context", "score"))

    def logits(self, nodes, glob, mask):
        h = self.encode_nodes(nodes)
        valid = (np.abs(nodes).sum(-1, keepdims=True) > 0)
        pooled = (h * valid).sum(0) / max(1.0, float(valid.sum()))
        return np.where(mask, self.score_rows(h, pooled, self.context_of(glob)), -1e9)

    def encode_nodes(self, nodes: np.ndarray) -> np.ndarray:
        """Each node's encoding [N, hidden] (rows are independent: any subset can be re-encoded)."""
        return mlp_forward(nodes, self.encode, relu_last=True)

    def context_of(self, glob: np.ndarray) -> np.ndarray:
        return mlp_forward(glob, self.context, relu_last=True)

    def score_rows(self, h: np.ndarray, pooled: np.ndarray, ctx: np.ndarray) -> np.ndarray:
        """Unmasked logits of the nodes encoded as ``h`` given the cluster summary and context."""
        n = h.shape[0]
        z = np.concatenate([h, np.broadcast_to(pooled, (n, len(pooled))), np.broadcast_to(ctx, (n, len(ctx)))], axis=1)
        return mlp_forward(z, self.score, relu_last=False)[:, 0]


def softplus(x: np.ndarray) -> np.ndarray:
    """As torch's (beta 1, threshold 20: linear above it)."""
    return np.where(x > 20.0, x, np.log1p(np.exp(np.minimum(x, 20.0))))


class NumpySiteNet:
    """``SiteSpeedNet.forward`` in numpy: log speeds [members, S] of a ``site_features.Batch``,
    clamped to the logged range. Built from a state_dict as saved (after ``SiteSpeedNet``'s own
    upgrades of older ones); the parameter-only terms are computed once (the weights are fixed)."""

    def __init__(self, net_or_state, n_resid: int):
        s = arrays_of(net_or_state)
        self.slot_params, self.prior_ref, self.solo = s["slot_params"], s["prior_ref"], s["solo"]
        self.w = [(s[f"w{i}"], s[f"b{i}"]) for i in (1, 2, 3)]
        self.lo, self.hi = s["log_lo"], s["log_hi"]
        self.members, self.n_slots = self.slot_params.shape[:2]
        self.n_resid = n_resid
        self.terms = _parameter_terms(s["global_params"], self.slot_params, s["node_pace"])

    def __call__(self, batch: F.Batch) -> np.ndarray:
        k, slot, s, nodes = self.terms, batch.slot, batch.scalars, batch.nodes
        g, p, ref = k["g"], self.slot_params[:, slot], self.prior_ref[slot]   # [M,1,G], [M,S,7], [S,2]
        log_c = p[..., C] + g[..., A_C] * (s[:, F.P_C] - ref[:, 0])
        log_v = p[..., V] + g[..., A_M] * (s[:, F.P_M] - ref[:, 1])
        load = np.einsum("skj,mj->msk", batch.counts, k["press"])
        load = load + k["w_cpu"] * nodes[..., F.CPU_O] + k["w_gpu"] * nodes[..., F.GPU_O] + k["w_own"] * nodes[..., F.OWN]
        sat = load / (1.0 + k["kappa"] * load)
        slow = ((1.0 + softplus(p[..., SENS, None]) * sat) * nodes[..., F.IS_W]).max(-1)  # the slowest worker node
        t_c = np.exp(log_c) * slow * (1.0 + k["rack_c"] * s[:, F.RACK_BUSY])
        traffic = (s[:, F.RING] + k["ps_ratio"] * s[:, F.PS_NET]) * (
            1.0 + s[:, F.CROSS] * k["x_sw"] + k["x_up"] * s[:, F.UPLINK] + k["rack_u"] * s[:, F.RACK_UP])
        t_n = np.exp(log_v) * (traffic + k["rho"] * (s[:, F.INTRA] + s[:, F.PS_LOC]))
        ps_slow = (1.0 + softplus(p[..., SENS_PS, None]) * sat + k["busy"] * nodes[..., F.ALLOC] ** 2) * nodes[..., F.IS_PS]
        t_u = np.exp(p[..., U]) * s[:, F.UPDATE] * ps_slow.max(-1)
        gamma = k["gamma"]
        log_tc, log_tn = np.log(t_c), np.log(t_n + t_u + np.float32(1e-12))
        log_t = np.logaddexp(gamma * log_tc, gamma * log_tn) / gamma
        parametric = p[..., BETA] * s[:, F.LOG_W] - log_t - self._lag(batch)
        raw = parametric + self._residual(batch, np.stack([log_tc, log_tn, log_t], -1))
        return np.clip(raw, self.lo, self.hi)

    def _lag(self, batch: F.Batch):
        """[M, S] log h of each job's slowest worker node (0 without node paces)."""
        if "pace" not in self.terms:
            return np.float32(0.0)
        pace = self.terms["pace"][:, batch.node_slot]  # [M, S, K]
        return np.where(batch.nodes[..., F.IS_W] > 0, pace, -np.inf).max(-1)

    def _residual(self, batch: F.Batch, terms: np.ndarray) -> np.ndarray:
        onehot = np.eye(self.n_slots, dtype=np.float32)[batch.slot]
        x = np.concatenate([batch.resid[..., :self.n_resid], onehot, self.solo[batch.slot, None]], -1)
        x = np.concatenate([np.broadcast_to(x, (self.members, *x.shape)), terms / np.float32(5.0)], -1)
        (w1, b1), (w2, b2), (w3, b3) = self.w
        h = np.maximum(b1 + x @ w1, 0.0)
        h = np.maximum(b2 + h @ w2, 0.0)
        return (b3 + h @ w3)[..., 0]


def _parameter_terms(global_params: np.ndarray, slot_params: np.ndarray, node_pace: np.ndarray) -> dict:
    """``SiteSpeedNet.parameter_terms`` in numpy."""
    g = global_params[:, None, :]
    terms = {"g": g, "press": softplus(slot_params[..., PRESS])}
    for name, i in (("w_cpu", W_CPU), ("w_gpu", W_GPU), ("w_own", W_OWN), ("kappa", KAPPA), ("busy", BUSY)):
        terms[name] = softplus(g[..., i, None])
    for name, i in (("rack_c", RACK_C), ("x_up", X_UP), ("rack_u", RACK_U)):
        terms[name] = softplus(g[..., i])
    for name, i in (("ps_ratio", PS_RATIO), ("x_sw", X_SW), ("rho", RHO)):
        terms[name] = np.exp(g[..., i])
    terms["gamma"] = 1.0 + softplus(g[..., GAMMA])
    if node_pace.size:
        centred = node_pace - node_pace.mean(-1, keepdims=True)
        terms["pace"] = np.pad(centred, ((0, 0), (1, 0)))
    return terms
