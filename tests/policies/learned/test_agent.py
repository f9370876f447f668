"""The learned policy with an untrained network: valid, within capacity, masked, any cluster size."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from small_cluster import WORKER, make_job, make_nodes, snapshot_with

from slurm_advisor.domain import ClusterSnapshot, Resources
from slurm_advisor.learned.policy.features import FeatureSchema
from slurm_advisor.learned.policy.net import PolicyNet
from slurm_advisor.policies.learned.agent import LearnedPolicy
from slurm_advisor.policies.pack import PackPolicy

SCHEMA = FeatureSchema()
NODES = make_nodes(6)


@pytest.fixture
def net() -> PolicyNet:
    torch.manual_seed(0)
    return PolicyNet(SCHEMA.node_dim, SCHEMA.global_dim, 16)


def partly_full() -> ClusterSnapshot:
    """n00, n02 and n04 have no free GPU; the others have some."""
    full = [(make_job(f"full{i}", "bert", 0, 8), [name] * 8) for i, name in enumerate(("n00", "n02", "n04"))]
    return snapshot_with(NODES, *full, (make_job("half", "vgg16", 0, 5), ["n01"] * 5))


JOBS = [make_job("one", "resnet50", 0, 1), make_job("ar4", "transformer", 0, 4),
        make_job("ps", "vgg16", 2, 6), make_job("span", "bert", 0, 12),
        make_job("odd", "no-such-type", 1, 3)]


@pytest.mark.parametrize("mode", ["greedy", "sample"])
@pytest.mark.parametrize("job", JOBS, ids=lambda j: j.id)
def test_placement_is_valid_and_fits(net, mode, job) -> None:
    snap = partly_full()
    policy = LearnedPolicy(net, SCHEMA, mode=mode)
    for seed in range(5):
        placement = policy.place(snap, job, np.random.default_rng(seed))
        assert placement is not None and placement.job_id == job.id
        assert [t.role for t in placement.tasks] == list(job.roles())
        assert snap.fits(job, placement)


def test_infeasible_nodes_are_never_chosen(net) -> None:
    snap = partly_full()
    policy = LearnedPolicy(net, SCHEMA, mode="sample")
    job = make_job("w", "resnet18", 0, 2)
    chosen = set()
    for seed in range(50):
        chosen |= set(policy.place(snap, job, np.random.default_rng(seed)).nodes())
    assert chosen <= {"n01", "n03", "n05"}
    assert len(chosen) > 1  # it really sampled among the feasible ones
    for decision in policy.decisions:
        np.testing.assert_array_equal(decision.mask, [False, True, False, True, False, True])
        assert decision.mask[decision.action]


def test_no_room_means_none(net) -> None:
    snap = partly_full()
    # A whole node per task: two tasks fit (n03, n05), the third does not.
    huge = make_job("huge", "bert", 0, 3, worker=Resources(4, 8, 24_000))
    policy = LearnedPolicy(net, SCHEMA, mode="sample")
    assert policy.place(snap, huge, np.random.default_rng(0)) is None
    assert policy.decisions == []  # no decision is kept for a job that was not placed


def test_greedy_is_deterministic(net) -> None:
    snap = partly_full()
    policy = LearnedPolicy(net, SCHEMA, mode="greedy")
    for job in JOBS:
        placements = {policy.place(snap, job, np.random.default_rng(seed)) for seed in range(4)}
        assert len(placements) == 1
    assert policy.decisions is None  # greedy mode records nothing


@pytest.mark.parametrize("n", [1, 3, 8, 32])
def test_one_network_for_any_cluster_size(net, n) -> None:
    nodes = make_nodes(n)
    snap = ClusterSnapshot.empty(nodes)
    job = make_job("j", "resnet50", 1, min(4, 8 * n - 1))
    placement = LearnedPolicy(net, SCHEMA).place(snap, job, np.random.default_rng(0))
    assert placement is not None and snap.fits(job, placement)
    scores = LearnedPolicy(net, SCHEMA).score_nodes(snap, job)
    assert list(scores) == [node.name for node in nodes]
    assert sum(scores.values()) == pytest.approx(1.0, abs=1e-3)


def test_sample_mode_records_one_decision_per_task(net) -> None:
    snap = snapshot_with(NODES, (make_job("r", "bert", 0, 3), ["n00"] * 3), time=123.0)
    policy = LearnedPolicy(net, SCHEMA, mode="sample")
    rng = np.random.default_rng(1)
    placed = [make_job("a", "vgg16", 2, 5), make_job("b", "resnet50", 0, 1)]
    for job in placed:
        assert policy.place(snap, job, rng) is not None
    assert [d.job_id for d in policy.decisions] == ["a"] * 7 + ["b"]
    for d in policy.decisions:
        assert d.nodes.shape == (len(NODES), SCHEMA.node_dim) and d.glob.shape == (SCHEMA.global_dim,)
        assert d.time == 123.0 and not d.explored


def test_job_aware_exploration_follows_the_heuristic_for_the_whole_job(net) -> None:
    snap = partly_full()
    job = make_job("e", "vgg16", 1, 4)
    policy = LearnedPolicy(net, SCHEMA, mode="sample", explorers=(PackPolicy(),), explore_prob=1.0)
    rng = np.random.default_rng(0)
    placement = policy.place(snap, job, rng)
    assert placement == PackPolicy().place(snap, job, np.random.default_rng(0))
    assert len(policy.decisions) == job.num_tasks and all(d.explored for d in policy.decisions)
    assert [d.action for d in policy.decisions] == [NODES.index(snap.node(t.node)) for t in placement.tasks]


def test_worker_demand_is_what_the_mask_checks(net) -> None:
    """A node with CPUs but no memory left is as infeasible as one without GPUs."""
    hog = make_job("hog", "ncf", 0, 1, worker=Resources(1, 0, 256_000))
    snap = snapshot_with(make_nodes(2), (hog, ["n00"]))
    placement = LearnedPolicy(net, SCHEMA).place(snap, make_job("w", "bert", 0, 1, WORKER),
                                                 np.random.default_rng(0))
    assert placement.nodes() == ("n01",)
