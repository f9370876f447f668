"""The node weights GPU jobs leave in Slurm before 23.11 (slurm/left_weights.py), on literal
capacities; their effect on recorded schedules is in tests/sim/test_backfill_agreement.py."""
from __future__ import annotations

import numpy as np

from slurm_advisor.domain import ClusterSnapshot, Job, Node, Resources
from slurm_advisor.slurm.cons_tres import choose_nodes
from slurm_advisor.slurm.left_weights import LeftWeights
from slurm_advisor.slurm.release import Release

NODES = tuple(Node(f"n{i}", 8, 4, 32_000) for i in range(1, 5))
LAYOUT = ClusterSnapshot.empty(NODES).layout


def _job(tasks: int, cpus: int = 1, gpus: int = 0) -> Job:
    return Job("j", "t", 0, tasks, Resources(), Resources(cpus, gpus, 1000 * cpus), 10.0)


def test_a_gpu_job_marks_the_nodes_it_reaches_with_their_free_gpus_up_to_its_own() -> None:
    free = np.array([[8, 4, 32_000], [8, 1, 32_000], [0, 4, 32_000], [8, 0, 32_000]])
    weights = LeftWeights(4)
    weights.evaluated(free, _job(2, gpus=1))
    # n1: 4 free, capped at the job's 2; n2: 1; n3 has no CPU and n4 no GPU: never reached
    assert weights.weight.tolist() == [-2, -1, 0, 0] and weights.version == 1
    kept = weights.weight
    weights.evaluated(np.array([[8, 0, 0]] * 4), _job(2, gpus=1))  # reaches none: all kept
    assert weights.weight is kept and weights.version == 1
    weights.evaluated(free, _job(3))  # a job without GPUs writes nothing
    assert weights.weight.tolist() == [-2, -1, 0, 0]
    assert kept.tolist() == [-2, -1, 0, 0]  # replaced, never written in place


def test_select_nodes_resets_them_and_a_blocked_gpu_job_marks_the_empty_cluster() -> None:
    weights = LeftWeights(4)
    weights.evaluated(np.array([[8, 3, 32_000]] * 4), _job(1, gpus=1))
    weights.synced()
    assert not weights.weight.any()
    totals = np.array([[n.cpus, n.gpus, n.mem_mb] for n in NODES])
    busy = np.array([[8, 0, 32_000], [8, 0, 32_000], [8, 1, 32_000], [0, 0, 0]])
    weights.tried_now(busy, totals, _job(3, gpus=1), started=False)
    assert weights.weight.tolist() == [-3, -3, -3, -3]  # SELECT_MODE_TEST_ONLY: every GPU free
    weights.tried_now(busy, totals, _job(1), started=True)
    assert not weights.weight.any()


def test_a_job_without_gpus_takes_the_lightest_run_first() -> None:
    free = np.array([[8, 4, 32_000]] * 4)
    job = _job(3)
    assert choose_nodes(LAYOUT, free, job) == [(0, 3)]
    weights = LeftWeights(4)
    weights.evaluated(np.array([[8, 0, 32_000], [8, 1, 32_000], [8, 3, 32_000], [8, 0, 32_000]]), _job(4, gpus=1))
    assert weights.for_job(job).tolist() == [0, -1, -3, 0]
    assert choose_nodes(LAYOUT, free, job, left=weights.for_job(job)) == [(2, 3)]
    assert weights.for_job(_job(1, gpus=1)) is None  # a GPU job weighs the nodes itself
    # a job with GPUs ignores what others left
    assert choose_nodes(LAYOUT, free, _job(1, gpus=1), left=weights.weight) == [(0, 1)]


def test_followed_only_where_the_release_keeps_them_and_a_job_reads_them() -> None:
    mixed = [_job(2), _job(1, gpus=1)]
    assert LeftWeights.kept_for(Release(22, 5, 8), mixed, 4) is not None
    assert LeftWeights.kept_for(Release(24, 11, 5), mixed, 4) is None  # 23.11+ sets them afresh
    assert LeftWeights.kept_for(Release(22, 5, 8), [_job(1, gpus=1)] * 2, 4) is None  # nobody reads
    assert LeftWeights.kept_for(Release(22, 5, 8), [_job(2)] * 2, 4) is None  # nobody writes
