"""Distil the search into the network on the states the network itself visits (DAgger).

The search (``search.py``) places better than the network under the fitted model but costs
milliseconds a decision; the network is the cheap path the daemon can afford at any size. Plain
imitation of the search on the search's own trajectories teaches the network only the states
the search leads to; once the network errs it is somewhere it never saw. DAgger (Ross, Gordon
and Bagnell, AISTATS 2011) rolls in with the *network* instead and asks the search what it
would do in each state met, so the data covers the network's own mistakes:

    round r: play an episode where each job is placed by the search with probability beta^r
             (r from 1), else by the network; label every job with the search's placement;
             add the labels to the data and train the network on all of it.

The labels are task-by-task, as the network decides: the features each task sees after the
job's earlier tasks took the search's nodes, and the search's node for it. The search's
network proposer is the network being trained (a new search each round, on its current
weights), so the teacher improves as the student does: the search is a policy-improvement
step over the network, and distilling it is expert iteration.

When the search holds a job, the episode holds it too and records nothing: the network is
deployed behind a holding rule of its own (``patience``), and holding is not a node it can
choose. States where the network would start a job the search waits on are not the states it
meets when deployed.
"""
from __future__ import annotations

import numpy as np

from slurm_advisor.domain import ClusterSnapshot, Job, Placement, Role
from slurm_advisor.learned.policy.features import FeatureSchema
from slurm_advisor.learned.policy.net import PolicyNet
from slurm_advisor.policies.base import Hold, Policy
from slurm_advisor.policies.learned.agent import Decision, LearnedPolicy
from slurm_advisor.policies.learned.node_features import PlacementState


def task_labels(snapshot: ClusterSnapshot, job: Job, placement: Placement, schema: FeatureSchema) -> list[Decision]:
    """``placement`` as the network's task-by-task decisions (PS first, then workers, as the
    network places them); none when a task's node is not one the network could choose."""
    queue = {role: [t.node for t in placement.tasks if t.role is role] for role in Role}
    state = PlacementState(snapshot, job, schema)
    out = []
    for k, role in enumerate(job.roles()):
        nodes, glob, mask = state.features(role, k)
        action = state.index.get(queue[role].pop(0)) if queue[role] else None
        if action is None or not mask[action]:
            return []
        out.append(Decision(nodes, glob, mask, action, snapshot.time, job.id, True))
        state.take(action, role)
    return out


class DaggerRollIn:
    """One DAgger episode's policy: the search labels every job; the network places it, or
    with probability ``beta`` the search does (see the module doc)."""

    name = "dagger"

    def __init__(self, net: PolicyNet, schema: FeatureSchema, search: Policy, beta: float):
        self.learner = LearnedPolicy(net, schema, mode="greedy")
        self.search, self.schema, self.beta = search, schema, beta
        self.decisions: list[Decision] = []  # the search's labels, in the order met

    def place(self, snapshot: ClusterSnapshot, job: Job, rng: np.random.Generator) -> Placement | Hold | None:
        taught = self.search.place(snapshot, job, rng)
        if not isinstance(taught, Placement):
            return taught  # the search holds (or finds nothing): so does the episode
        self.decisions.extend(task_labels(snapshot, job, taught, self.schema))
        if rng.random() < self.beta:
            return taught
        own = self.learner.place(snapshot, job, rng)
        return own if own is not None else taught

    def score_nodes(self, snapshot: ClusterSnapshot, job: Job) -> dict[str, float]:
        return self.learner.score_nodes(snapshot, job)
