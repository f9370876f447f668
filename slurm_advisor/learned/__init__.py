"""The learned part (torch lives only here): features, speed model, actor-critic policy, training."""
