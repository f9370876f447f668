"""Whether a network fills the node it chooses, so that a run of tasks costs one network step.

On clusters above ``agent.FULL_SCORING_MAX_NODES`` nodes a greedy decision costs a few tenths
of a millisecond per job plus about as much per task placed, most of it the network's step:
a job of 20-odd tasks misses the daemon's 2 ms at 1,000 nodes. The networks trained here place
a role's tasks in runs: once a node is chosen, the role's next tasks go to that node while it
has room for one more (as Slurm's own rule fills a node before the next). On the benchmarks'
loaded clusters of 16, 1,000 and 10,000 nodes the shipped model did so in all 600 decisions of
``benchmarks/network_runs.py``, so placing a run by one step changes none of them, and the 99th
percentile of a job's network steps falls from 22 (one per task) to 4 (one per run).

That holds for a trained network, not for every one (a random one scatters its tasks). So a
policy places runs only after ``fills_its_nodes`` found that its network does: on a fixed,
loaded cluster of ``PROBE_NODES`` nodes (the large-cluster path forced), the placements made
task by task and run by run must be the same for each of ``PROBE_JOBS`` multi-task jobs. A
network that fails keeps one step per task.
"""
from __future__ import annotations

import functools
from collections.abc import Iterable, Iterator

import numpy as np

from slurm_advisor.domain import ClusterSnapshot, Job, Node
from slurm_advisor.learned.numpy_nets import Weights
from slurm_advisor.learned.policy.features import FeatureSchema

PROBE_NODES = 64      # two switches of 32 nodes shaped as examples/clusters/16x8.toml
PROBE_JOBS = 40       # multi-task jobs of the benchmarks' large mix
PROBE_LOAD = 0.6      # share of the GPUs taken by slurm-default's placements


def fills_its_nodes(net: Weights, schema: FeatureSchema) -> bool:
    """Whether ``net`` places the same as task by task on every probe job when it places runs."""
    return all(same_placements(net, schema, *_probe()))


def probe_agreement(net: Weights, schema: FeatureSchema) -> tuple[int, int]:
    """(probe jobs ``net`` places the same both ways, probe jobs)."""
    snapshot, jobs = _probe()
    return sum(same_placements(net, schema, snapshot, jobs)), len(jobs)


def by_task_and_by_run(net: Weights, schema: FeatureSchema):
    """``net`` on the large-cluster path (forced at any size), task by task and run by run."""
    from slurm_advisor.policies.learned.agent import LearnedPolicy  # agent asks this module

    return (LearnedPolicy(net, schema, full_scoring_max_nodes=0, fill_runs=False),
            LearnedPolicy(net, schema, full_scoring_max_nodes=0, fill_runs=True))


def same_placements(net: Weights, schema: FeatureSchema, snapshot: ClusterSnapshot,
                    jobs: Iterable[Job]) -> Iterator[bool]:
    """Per job, whether ``net`` places it the same task by task and run by run."""
    by_task, by_run = by_task_and_by_run(net, schema)
    rng = np.random.default_rng(0)  # greedy: drawn from by neither
    return (by_task.place(snapshot, job, rng) == by_run.place(snapshot, job, rng) for job in jobs)


def loaded(nodes: tuple[Node, ...], jobs: Iterable[Job], load: float = PROBE_LOAD) -> ClusterSnapshot:
    """``nodes`` with about ``load`` of their GPUs taken by slurm-default's placements of ``jobs``."""
    from slurm_advisor.policies.slurm_default import SlurmDefaultPolicy

    snapshot, slurm = ClusterSnapshot.empty(nodes), SlurmDefaultPolicy()
    taken, target = 0, load * sum(n.gpus for n in nodes)
    for job in jobs:
        placement = slurm.place(snapshot, job) if taken < target else None
        if placement is not None:
            snapshot, taken = snapshot.with_job(job, placement, 0.0), taken + job.total_demand().gpus
    return snapshot.at(0.0)


@functools.cache
def _probe() -> tuple[ClusterSnapshot, tuple[Job, ...]]:
    """The probe's loaded cluster and jobs (the same in every process)."""
    from slurm_advisor.traces.synthetic import synthetic_jobs

    nodes = tuple(Node(f"probe{i:02d}", 48, 8, 384_000, f"s{i // 32}") for i in range(PROBE_NODES))
    mixed = zip(synthetic_jobs(300, seed=1, mix="philly"), synthetic_jobs(300, seed=2, mix="large"))
    snapshot = loaded(nodes, (j for pair in mixed for j in pair))  # half Philly-like, half large, as the benchmarks
    jobs = tuple(j for j in synthetic_jobs(4 * PROBE_JOBS, seed=3, mix="large") if j.num_tasks > 1)
    return snapshot, jobs[:PROBE_JOBS]
