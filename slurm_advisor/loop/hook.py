"""job_submit.lua's part in the loop: each simulated job asks the daemon once, as the hook asks
for a job with the marker, and the reply becomes what Slurm would do with it.

- ``place``: the job runs where the reply's layout says;
- ``cap``: Slurm's own choice (cons_tres) within ``max_nodes`` nodes, waiting until one exists;
- ``none``, ``observe``: Slurm's own choice, as if the advisor did not exist.

The daemon knows a job only by what the hook sends, and Slurm gives every task of a job the
same shape, so the simulated jobs are first made what a user could submit (``as_submitted``):
every task the larger of the PS and worker demand, memory a whole number of MB per CPU, the
time limit in whole minutes, Slurm's numeric job id. Both the loop and its slurm-default
baseline run these jobs.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import numpy as np

from slurm_advisor.daemon.protocol import parse_layout
from slurm_advisor.domain import ClusterSnapshot, Job, Placement, Resources
from slurm_advisor.errors import InputError
from slurm_advisor.policies.base import Hold
from slurm_advisor.policies.slurm_default import SlurmDefaultPolicy
from slurm_advisor.slurm.cons_tres import select


def as_submitted(job: Job, slurm_id: int) -> Job:
    """``job`` as a homogeneous Slurm job (see the module doc) with id ``slurm_id``."""
    ps, worker = job.ps_demand, job.worker_demand
    cpus = max(1, worker.cpus, ps.cpus if job.num_ps else 0)
    gpus = max(worker.gpus, ps.gpus if job.num_ps else 0)
    mem = max(worker.mem_mb, ps.mem_mb if job.num_ps else 0)
    task = Resources(cpus, gpus, -(-mem // cpus) * cpus)
    limit = None if job.time_limit_s is None else 60.0 * math.ceil(job.time_limit_s / 60.0)
    return replace(job, id=str(slurm_id), ps_demand=task, worker_demand=task, time_limit_s=limit)


def hook_fields(job: Job, uid: int) -> dict[str, Any]:
    """The descriptor fields job_submit.lua sends for ``job`` (an ``as_submitted`` one)."""
    d = job.worker_demand
    marker = f"slurm-advisor: type={job.type} ps={job.num_ps} workers={job.num_workers}"
    if job.model_size_mb:
        marker += f" model_mb={job.model_size_mb:g}"
    if job.batch_size:
        marker += f" batch={job.batch_size}"
    # As the quickstart's users declare their runs: without iters= the daemon knows nothing of a
    # running job's remaining work (1 iteration), so the search sees no cost in slowing it.
    marker += f" iters={job.iterations:g}"
    return {"comment": marker, "name": f"loop-{job.id}", "user_id": uid, "partition": None,
            "num_tasks": job.num_tasks, "cpus_per_task": d.cpus, "pn_min_memory": d.mem_mb // d.cpus or None,
            "mem_per_cpu": True, "tres_per_task": f"gres:gpu:{d.gpus}" if d.gpus else None, "tres_per_node": None,
            "time_limit": None if job.time_limit_s is None else int(job.time_limit_s // 60),
            "min_nodes": None, "max_nodes": None, "req_nodes": None}


def layout_placement(job: Job, layout: str) -> Placement:
    """The placement a ``place`` reply's layout describes (PS tasks first, as the job's roles)."""
    roles = parse_layout(layout)
    return Placement.of(job, roles.get("ps", []) + roles.get("worker", []))


class DaemonPolicy:
    """A policy that decides nothing itself: it asks the daemon, once per job (see the module doc).

    ``ask(snapshot, fields)`` publishes ``snapshot`` to the daemon and sends the advise request;
    ``on_reply(job, reply)`` and ``on_start(job, placement, time)`` tell the loop's queue."""

    name = "daemon"

    def __init__(self, ask: Callable[[ClusterSnapshot, dict], dict], uid: int, *,
                 on_reply: Callable[[Job, dict], None], on_start: Callable[[Job, Placement, float], None],
                 released: Callable[[str], bool] = lambda job_id: False):
        self._ask, self.uid = ask, uid
        self._on_reply, self._on_start, self._released = on_reply, on_start, released
        self._slurm = SlurmDefaultPolicy()
        self.replies: dict[str, dict] = {}
        self.slurm_chose = 0   # jobs started where Slurm chose (none, observe, a layout that no longer fits)

    def place(self, snapshot: ClusterSnapshot, job: Job, rng: np.random.Generator) -> Placement | Hold | None:
        reply = self.replies.get(job.id)
        placement: Placement | Hold | None = None
        if reply is None:
            reply = self._ask(snapshot, hook_fields(job, self.uid))
            if not reply.get("ok"):
                raise InputError(f"the daemon refused job {job.id}: {reply.get('error')}")
            self.replies[job.id] = reply
            self._on_reply(job, reply)
            if reply["action"] == "place":
                placement = layout_placement(job, reply["layout"])
        if placement is None or not snapshot.fits(job, placement):
            placement = self._slurms_choice(snapshot, job, reply, rng)
        if isinstance(placement, Placement):
            self._on_start(job, placement, snapshot.time)
        return placement

    def _slurms_choice(self, snapshot: ClusterSnapshot, job: Job, reply: dict,
                       rng: np.random.Generator) -> Placement | Hold | None:
        if reply["action"] == "cap" and not self._released(job.id):
            found = select(snapshot, job, max_nodes=reply["max_nodes"])
            return found if found is not None else Hold("the advisor capped its node count", reply["max_nodes"])
        found = self._slurm.place(snapshot, job, rng)
        self.slurm_chose += found is not None
        return found

    def score_nodes(self, snapshot: ClusterSnapshot, job: Job) -> dict[str, float]:
        return {}
