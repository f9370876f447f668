"""Actor-critic network that scores nodes with shared weights: one model for any cluster size.

Harmony feeds a fixed M x 2N matrix to a dense layer, so a model fits one cluster. Here every
node is encoded by the same small network, the cluster is summarised by mean pooling, and each
node's logit comes from (its encoding, the summary, the job and task). Infeasible nodes are
masked to probability 0. The critic values the same pooled state.
"""
from __future__ import annotations

import numpy as np
import torch
from torch import nn


class PolicyNet(nn.Module):
    def __init__(self, node_dim: int, global_dim: int, hidden: int):
        super().__init__()
        self.encode = nn.Sequential(nn.Linear(node_dim, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU())
        self.context = nn.Sequential(nn.Linear(global_dim, hidden), nn.ReLU())
        self.score = nn.Sequential(nn.Linear(3 * hidden, hidden), nn.ReLU(), nn.Linear(hidden, 1))
        self.value = nn.Sequential(nn.Linear(2 * hidden, hidden), nn.ReLU(), nn.Linear(hidden, 1))

    def forward(self, nodes: torch.Tensor, glob: torch.Tensor, mask: torch.Tensor
                ) -> tuple[torch.Tensor, torch.Tensor]:
        """nodes [B, N, node_dim], glob [B, global_dim], mask [B, N] (True = feasible).

        Returns masked logits [B, N] and values [B]. Padding nodes (clusters of different
        sizes in one batch) are simply masked out and left out of the pooled summary.
        """
        h = self.encode(nodes)
        m = mask.unsqueeze(-1).float()
        valid = (nodes.abs().sum(-1, keepdim=True) > 0).float()  # real nodes, feasible or not
        pooled = (h * valid).sum(1) / valid.sum(1).clamp(min=1.0)
        ctx = self.context(glob)
        n = nodes.shape[1]
        logits = self.score(torch.cat([h, pooled.unsqueeze(1).expand(-1, n, -1),
                                       ctx.unsqueeze(1).expand(-1, n, -1)], dim=-1)).squeeze(-1)
        logits = logits.masked_fill(m.squeeze(-1) == 0, -1e9)
        value = self.value(torch.cat([pooled, ctx], dim=-1)).squeeze(-1)
        return logits, value


def layers_of(seq: nn.Sequential) -> list[tuple]:
    return [(m.weight.detach().numpy().T.copy(), m.bias.detach().numpy().copy())
            for m in seq if isinstance(m, nn.Linear)]


def mlp_forward(x, layers, relu_last: bool):
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
    """

    def __init__(self, net: PolicyNet):
        self.encode, self.context, self.score = layers_of(net.encode), layers_of(net.context), layers_of(net.score)

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
