"""The learned part (torch lives only here): features, speed model, actor-critic policy, training."""
import torch

# The networks are tiny and called one decision at a time: extra threads only add overhead.
torch.set_num_threads(1)
