"""Runs of tasks on the large-cluster path: one network step per run, only for a network that fills.

The run-by-run path must place exactly as task by task wherever it is used (a network that fills
its nodes, ``networks.filling_network``, on loaded clusters of 1,000 nodes; ``test_fast_selective`` compares it with the reference too), a
network that scatters its tasks must keep one step per task, and each run must end only where
the node has no room for another of the role's tasks or the role ends.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch
from learned_networks import filling_network

from slurm_advisor.domain import ClusterSnapshot, Node, Placement
from slurm_advisor.learned.policy.net import PolicyNet
from slurm_advisor.policies.learned import agent
from slurm_advisor.policies.learned.agent import LearnedPolicy
from slurm_advisor.policies.learned.fast import runs
from slurm_advisor.traces.synthetic import synthetic_jobs
from slurm_advisor.training import checkpoint

CKPT = checkpoint.load(None)
SCHEMA = CKPT.schema


def loaded_cluster(n: int, seed: int) -> ClusterSnapshot:
    nodes = tuple(Node(f"g{i:04d}", 48, 8, 384_000, f"s{i // 32}") for i in range(n))
    return runs.loaded(nodes, synthetic_jobs(3 * n, seed=seed, mix="philly") + synthetic_jobs(n, seed=seed + 1, mix="large"))


def multi_task_jobs(count: int, seed: int):
    return [j for j in synthetic_jobs(4 * count, seed=seed, mix="large") if j.num_tasks > 1][:count]


def test_the_probe_passes_a_filling_network_and_fails_a_random_one() -> None:
    torch.manual_seed(3)
    random_net = PolicyNet(SCHEMA.node_dim, SCHEMA.global_dim, 32).eval()
    assert runs.fills_its_nodes(filling_network(), SCHEMA)
    assert not runs.fills_its_nodes(random_net, SCHEMA)
    policy = LearnedPolicy(random_net, SCHEMA, full_scoring_max_nodes=0)
    snap, job = loaded_cluster(64, 7), multi_task_jobs(1, 8)[0]
    policy.place(snap, job, np.random.default_rng(0))
    assert policy.fill_runs is False  # decided by the probe at the first large-cluster decision


@pytest.mark.parametrize("seed", [0, 1])
def test_run_by_run_places_as_task_by_task_on_a_loaded_thousand_nodes(seed) -> None:
    snap = loaded_cluster(1000, 10 + seed)
    by_task = LearnedPolicy(filling_network(), SCHEMA, fill_runs=False)  # on the large-cluster path by its size
    by_run = LearnedPolicy(filling_network(), SCHEMA, fill_runs=True)
    rng = np.random.default_rng(0)
    for job in multi_task_jobs(40, 20 + seed):
        assert by_run.place(snap, job, rng) == by_task.place(snap, job, rng), job


def test_a_step_places_a_run_that_ends_only_where_the_node_is_full_or_the_role_ends(monkeypatch) -> None:
    steps: list[int] = []
    choose = agent._Summary.choose

    def counted(self, state, k, glob, fresh):
        steps.append(k)
        return choose(self, state, k, glob, fresh)

    monkeypatch.setattr(agent._Summary, "choose", counted)
    snap = loaded_cluster(1000, 30)
    policy = LearnedPolicy(filling_network(), SCHEMA, fill_runs=True)
    jobs = multi_task_jobs(30, 31)
    for job in jobs:
        steps.clear()
        placement = policy.place(snap, job, np.random.default_rng(0))
        assert isinstance(placement, Placement)
        tasks = placement.tasks
        starts = [k for k in range(len(tasks)) if k == 0 or tasks[k] != tasks[k - 1]]
        assert steps == starts, job  # a network step exactly where a run begins
        free = {name: np.array(snap.free_array()[snap.layout.index[name]]) for name in placement.nodes()}
        for start, end in zip(starts, starts[1:] + [len(tasks)]):
            task = tasks[start]
            d = job.demand(task.role)
            need = np.array([d.cpus, d.gpus, d.mem_mb])
            free[task.node] = free[task.node] - (end - start) * need
            if end < len(tasks) and tasks[end].role is task.role:
                assert not (free[task.node] >= need).all(), (job, task)  # no room left for one more
    assert sum(j.num_tasks for j in jobs) > 3 * len(jobs)  # the jobs have runs to place
