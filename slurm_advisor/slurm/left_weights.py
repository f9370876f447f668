"""Node weights that GPU jobs leave behind in Slurm before 23.11 (``Release.keeps_gpu_weights``).

cons_tres's ``can_job_run_on_node`` (job_test.c:3420, tag slurm-22-05-8-1) favours nodes with
more co-located GPUs by writing ``0xff - near_gpu_cnt`` into the low byte of the node's
*global* ``sched_weight`` for every node it evaluates for a job with GPUs. Only
``select_nodes`` puts the weights back (``_pick_best_nodes`` -> ``_sync_node_weight``,
node_scheduler.c:1751), and backfill's will-run calls the select plugin without it. So a job
without GPUs that backfill plans is placed by the weights the last GPU job evaluated left:
``_eval_nodes`` takes the runs of the lightest weight first, i.e. the nodes where that GPU job
found the most free GPUs. 23.11 (SchedMD 55b5c8ca3a, "Avoid backfill planning on completing
and non-available nodes") sets every weight afresh in cons_tres itself (``_set_sched_weight``),
so from then on a job without GPUs sees equal weights.

Weights here are as ``cons_tres.sched_weight`` gives them: ``-near_gpu_cnt`` (0 is 0xff, a
node no GPU job has marked), lowest first.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from slurm_advisor.domain import Job
from slurm_advisor.slurm.cons_tres import job_gpus
from slurm_advisor.slurm.release import Release


class LeftWeights:
    """The weights' low bytes as the jobs evaluated so far left them (one cluster's nodes).

    ``weight`` is replaced, never written in place, so an array handed out stays as it was;
    ``version`` counts the changes (a key for what was decided on them)."""

    def __init__(self, nodes: int):
        self.weight = np.zeros(nodes, dtype=np.int64)
        self.version = 0

    @classmethod
    def kept_for(cls, release: Release, jobs: Sequence[Job], nodes: int) -> LeftWeights | None:
        """Weights to follow where ``release`` keeps them and they can matter: some job has GPUs
        (it writes them) and some has none (it reads them); else None."""
        if not release.keeps_gpu_weights:
            return None
        gpus = {job_gpus(j) > 0 for j in jobs}
        return cls(nodes) if gpus == {True, False} else None

    def synced(self) -> None:
        """``select_nodes`` (the main scheduler, and backfill starting a job): every weight reset."""
        if self.weight.any():
            self.weight = np.zeros_like(self.weight)
            self.version += 1

    def evaluated(self, free: np.ndarray, job: Job, usable: np.ndarray | None = None) -> None:
        """cons_tres evaluated ``job`` on ``free`` (``usable``: the nodes it was offered, all if
        None): a job with GPUs marks each node that reaches the write, one with a free GPU and
        the CPUs of a task (``gres_sched_create_sock_gres_list`` and ``common_allocate`` turn
        the others away first), with its free GPUs up to the job's (``max_node_gres``)."""
        gpus = job_gpus(job)
        if not gpus:
            return
        demand = job.worker_demand if job.num_workers else job.ps_demand
        reached = (free[:, 1] >= max(demand.gpus, 1)) & (free[:, 0] >= max(demand.cpus, 1))
        if usable is not None:
            reached &= usable
        if not reached.any():
            return
        weight = np.where(reached, -np.minimum(free[:, 1], gpus), self.weight)
        if not np.array_equal(weight, self.weight):
            self.weight = weight
            self.version += 1

    def tried_now(self, free: np.ndarray, totals: np.ndarray, job: Job, started: bool) -> None:
        """The main scheduler tried ``job``: weights synced, cons_tres run on ``free``; a job
        that cannot start is tested once more on the whole cluster empty (``_pick_best_nodes``'
        SELECT_MODE_TEST_ONLY, where a node's GPUs all count as free)."""
        self.synced()
        self.evaluated(free, job)
        if not started:
            self.evaluated(totals, job)

    def for_job(self, job: Job) -> np.ndarray | None:
        """The weights a job without GPUs is planned on; None for a job with GPUs (its own)."""
        return None if job_gpus(job) else self.weight
