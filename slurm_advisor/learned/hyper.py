"""Every hyperparameter of the learned part in one documented dataclass (saved with each model)."""
from __future__ import annotations

from dataclasses import asdict, dataclass, fields


@dataclass(frozen=True)
class Hyper:
    # speed model (Harmony's reward model)
    speed_hidden: int = 128          # width of the speed model's two hidden layers
    speed_epochs: int = 60           # passes over the recorded samples
    speed_lr: float = 3e-3           # Adam learning rate for the speed model
    speed_batch: int = 256           # minibatch of samples
    speed_holdout: float = 0.15      # share of jobs held out to pick the best epoch
    speed_members: int = 4           # ensemble members, each fitted on its own bootstrap of the jobs
    speed_min_type_samples: int = 50  # a job type logged this often (and ...
    speed_min_type_jobs: int = 3     # ... by this many jobs) gets its own slot; rarer ones share "unknown"
    speed_min_node_samples: int = 20  # a node that ran workers in this many samples gets a pace of its own
    speed_node_prior: float = 1.0    # each node's pace is pulled to the typical node's with this many samples' weight
    # policy network
    hidden: int = 64                 # width of node encoder, scorer and critic
    # supervised warm start
    warm_episodes: int = 3           # heuristic episodes to imitate
    warm_epochs: int = 30            # passes over the imitation data
    warm_lr: float = 5e-3            # DL2's supervised learning rate
    # distilling the search (DAgger, training/distill.py)
    dagger_rounds: int = 4           # roll-in episodes labelled by the search (0: no distillation)
    dagger_beta: float = 0.5         # round r follows the search with probability beta^r, else the network
    dagger_epochs: int = 8           # passes over all labels so far after each round
    # actor-critic
    rl_episodes: int = 60            # simulated episodes of RL
    rl_lr: float = 1e-4              # Adam learning rate for actor and critic (DL2)
    entropy_weight: float = 0.01     # bonus that keeps the policy exploring
    anchor_weight: float = 0.5       # cross-entropy towards the teacher's decisions during RL (0: off)
    value_weight: float = 0.5        # critic loss weight
    gamma: float = 0.99              # discount per reward interval
    reward_interval_s: float = 3600.0  # Harmony's interval: progress is summed per interval
    reward: str = "progress"         # "progress" (Harmony) or "jobs-in-system" (Little's law, = avg JCT)
    advantage: str = "critic"        # "critic": G - V(s); "teacher": G minus the teacher's G on the same
    #                                  episode (arrivals, seed), then - V(s) of that relative return
    episode_rates: tuple = (1.0,)    # each episode's arrivals are sped up by a rate drawn from these
    minibatch: int = 256             # decisions per gradient step
    updates_per_episode: int = 8     # gradient steps drawn from the replay buffer per episode
    replay_size: int = 8192          # FIFO experience replay (DL2's default)
    explore_prob: float = 0.2        # job-aware exploration: whole job placed by a heuristic
    explore_decay: float = 0.9       # per episode
    episode_jobs: int = 100          # jobs per RL episode (a window of the training trace)
    validate_every: int = 5          # episodes between greedy runs of the whole training trace
    promote_margin: float = 0.03     # the network must beat its teacher by this much, else the teacher is deployed
    stress_rate: float = 1.5         # validation also replays the training trace with arrivals this much faster
    seed: int = 0

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> Hyper:
        names = {f.name for f in fields(cls)}
        return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in d.items() if k in names})
