"""Distilling the search (DAgger): the search's placements become the network's task-by-task
labels on the states the network visits, and the relative returns of teacher-relative RL."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
from small_cluster import Fixed, make_job, make_nodes, snapshot_with

from slurm_advisor.domain import Placement
from slurm_advisor.learned.hyper import Hyper
from slurm_advisor.learned.policy.features import FeatureSchema
from slurm_advisor.learned.policy.net import PolicyNet
from slurm_advisor.policies import make_policy
from slurm_advisor.policies.base import Hold
from slurm_advisor.policies.learned.agent import LearnedPolicy
from slurm_advisor.policies.learned.node_features import PlacementState
from slurm_advisor.speedmodels.contention import ContentionSpeedModel
from slurm_advisor.traces.synthetic import synthetic_jobs
from slurm_advisor.training.distill import DaggerRollIn, task_labels
from slurm_advisor.training.train import Replays, _Episodes

NODES = make_nodes(6)
SCHEMA = FeatureSchema()
RNG = np.random.default_rng(0)


def net() -> PolicyNet:
    return PolicyNet(SCHEMA.node_dim, SCHEMA.global_dim, 16)


def test_labels_replay_the_placement_task_by_task() -> None:
    """Taking each label's action in turn rebuilds the search's placement, PS first; each
    action was a node the network could choose at that step."""
    busy = make_job("busy", num_workers=3)
    snap = snapshot_with(NODES, (busy, ["n00", "n00", "n01"]))
    job = make_job("j", num_ps=2, num_workers=3)
    # listed workers first: the labels still follow the network's order (PS, then workers)
    placement = Placement(job.id, tuple(Placement.of(job, ["n02", "n03", "n03", "n02", "n04"]).tasks[::-1]))
    labels = task_labels(snap, job, placement, SCHEMA)
    assert len(labels) == job.num_ps + job.num_workers
    state = PlacementState(snap, job, SCHEMA)
    for d in labels:
        assert d.mask[d.action] and d.explored and d.job_id == "j"
    placed = [state.names[d.action] for d in labels]
    by_role = sorted((t.role.value, t.node) for t in placement.tasks)
    assert sorted((r.value, n) for r, n in zip(job.roles(), placed)) == by_role


def test_a_placement_the_network_cannot_express_gives_no_labels() -> None:
    job = make_job("j", num_workers=2)
    elsewhere = Placement.of(job, ["n00", "not-a-node"])
    assert task_labels(snapshot_with(NODES), job, elsewhere, SCHEMA) == []


def test_roll_in_follows_the_network_or_the_search_and_always_labels() -> None:
    job = make_job("j", num_workers=2)
    snap = snapshot_with(NODES)
    taught = Placement.of(job, ["n05", "n05"])
    network = net()
    own = LearnedPolicy(network, SCHEMA, mode="greedy").place(snap, job, RNG)
    assert own != taught  # else the test tells nothing
    teacher_led = DaggerRollIn(network, SCHEMA, Fixed("search", taught), beta=1.0)
    assert teacher_led.place(snap, job, RNG) == taught
    student_led = DaggerRollIn(network, SCHEMA, Fixed("search", taught), beta=0.0)
    assert student_led.place(snap, job, RNG) == own
    for roll_in in (teacher_led, student_led):  # labelled with the search's nodes either way
        assert [d.action for d in roll_in.decisions] == [5, 5]


def test_a_job_the_search_holds_is_held_and_not_labelled() -> None:
    job = make_job("j", num_workers=2)
    hold = Hold("waiting", max_nodes=1)
    roll_in = DaggerRollIn(net(), SCHEMA, Fixed("search", hold), beta=0.0)
    assert roll_in.place(snapshot_with(NODES), job, RNG) is hold
    assert roll_in.decisions == []


def test_returns_relative_to_the_same_policy_on_the_same_episode_are_zero() -> None:
    """Teacher-relative RL: the reference replays the episode's own arrivals and seed, so a
    learner that places exactly as the teacher gains exactly nothing, whatever the arrivals."""
    jobs = synthetic_jobs(30, seed=3, mix="large", arrival_rate_per_h=4.0)
    hp = replace(Hyper(seed=2), episode_jobs=15, episode_rates=(1.0, 2.0), reward="jobs-in-system")
    episodes = _Episodes(Replays(NODES), jobs, ContentionSpeedModel(), SCHEMA, hp, np.random.default_rng(4))
    for _ in range(3):
        decisions, relative, _ = episodes.run(net(), (make_policy("slurm-default"),), 1.0,
                                              reference=make_policy("slurm-default"))
        assert decisions and np.allclose(relative, 0.0)
    decisions, absolute, _ = episodes.run(net(), (make_policy("slurm-default"),), 1.0)
    assert np.abs(absolute).max() > 0.1  # the absolute returns are not zero: the zeros above are the baseline's


def test_hyper_round_trips_its_episode_rates_through_json() -> None:
    import json
    hp = replace(Hyper(), episode_rates=(1.0, 1.5))
    assert Hyper.from_dict(json.loads(json.dumps(hp.to_dict()))) == hp
