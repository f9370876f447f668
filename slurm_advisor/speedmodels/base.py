"""The one narrow interface through which speeds enter: simulator, oracle and RL reward use it.

A speed model answers, for a set of running placements, how many training iterations per
second each job makes. Built-in models are *local*: a job's speed depends only on the
tasks that share its nodes (and on how its own tasks are spread), which lets the simulator
ask only about the jobs an event touched.
"""
from __future__ import annotations

import math
import numbers
from collections.abc import Collection, Sequence
from typing import Protocol

from slurm_advisor.domain import Node, Role, RunningJob
from slurm_advisor.errors import InputError

#: The slowest speed a ground truth may give (iterations/s). With at most 1e12 iterations per
#: job (the trace's bound) a run then lasts at most 1e21 s: every time and mean stays finite.
MIN_SPEED = 1e-9


class SpeedModel(Protocol):
    name: str
    #: True when a job's speed depends only on the tasks on its own nodes.
    local: bool

    def speeds(self, nodes: Sequence[Node], running: Sequence[RunningJob],
               only: Collection[str] | None = None) -> dict[str, float]:
        """Iterations per second for every running job (or just the ids in ``only``)."""
        ...


class CheckedSpeedModel:
    """Any speed model, with every answer checked: each asked job must get a finite speed of at
    least :data:`MIN_SPEED`; otherwise one :class:`InputError` names the model and the job.
    ``load_speed_model`` wraps every truth it builds in one, built-in or plug-in."""

    def __init__(self, inner: SpeedModel):
        self.inner = inner
        self.name, self.local = inner.name, inner.local

    def __getattr__(self, attr: str):
        """Anything else the wrapped model offers (called only for attributes not found here)."""
        if attr == "inner":  # not yet set (e.g. while unpickling): no recursion
            raise AttributeError(attr)
        return getattr(self.inner, attr)

    def speeds(self, nodes: Sequence[Node], running: Sequence[RunningJob],
               only: Collection[str] | None = None) -> dict[str, float]:
        answer = self.inner.speeds(nodes, running, only)
        for rj in running:
            job_id = rj.job.id
            if only is not None and job_id not in only:
                continue
            if job_id not in answer:
                raise InputError(f"speed model {self.name}: no speed for job '{job_id}'")
            speed = answer[job_id]
            if not (isinstance(speed, numbers.Real) and MIN_SPEED <= speed < math.inf):
                raise InputError(f"speed model {self.name}: job '{job_id}' got speed {speed!r} it/s; a "
                                 f"speed must be finite and at least {MIN_SPEED:g} it/s")
        return answer


class ColocationIndex:
    """Which tasks sit on each node: the view every local speed model needs."""

    def __init__(self, running: Sequence[RunningJob]):
        self.tasks_on: dict[str, list[tuple[RunningJob, Role]]] = {}
        self.jobs_on: dict[str, set[str]] = {}
        for rj in running:
            for t in rj.placement.tasks:
                self.tasks_on.setdefault(t.node, []).append((rj, t.role))
                self.jobs_on.setdefault(t.node, set()).add(rj.job.id)

    def neighbours(self, rj: RunningJob) -> set[str]:
        """Ids of the other jobs that share at least one node with ``rj``."""
        out: set[str] = set()
        for node in rj.placement.nodes():
            out |= self.jobs_on.get(node, set())
        out.discard(rj.job.id)
        return out


def select(running: Sequence[RunningJob], only: Collection[str] | None) -> list[RunningJob]:
    if only is None:
        return list(running)
    wanted = set(only)
    return [rj for rj in running if rj.job.id in wanted]


def node_to_plain(node: Node) -> dict:
    return {"name": node.name, "cpus": node.cpus, "gpus": node.gpus, "mem_mb": node.mem_mb,
            "switch": node.switch}


def job_to_plain(rj: RunningJob) -> dict:
    """The public plain-data form of a running job (the plug-in contract in the README)."""
    job = rj.job
    tasks = []
    for t in rj.placement.tasks:
        d = job.demand(t.role)
        tasks.append({"role": t.role.value, "node": t.node, "cpus": d.cpus, "gpus": d.gpus,
                      "mem_mb": d.mem_mb})
    return {"id": job.id, "type": job.type, "num_ps": job.num_ps,
            "num_workers": job.num_workers, "tasks": tasks}
