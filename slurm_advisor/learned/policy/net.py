"""Actor-critic network that scores nodes with shared weights: one model for any cluster size.

Harmony feeds a fixed M x 2N matrix to a dense layer, so a model fits one cluster. Here every
node is encoded by the same small network, the cluster is summarised by mean pooling, and each
node's logit comes from (its encoding, the summary, the job and task). Infeasible nodes are
masked to probability 0. The critic values the same pooled state. Its forward pass for decisions,
in numpy, is ``numpy_nets.NumpyScorer``.
"""
from __future__ import annotations

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
