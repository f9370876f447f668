"""The one narrow interface through which speeds enter: simulator, oracle and RL reward use it.

A speed model answers, for a set of running placements, how many training iterations per
second each job makes. Built-in models are *local*: a job's speed depends only on the
tasks that share its nodes (and on how its own tasks are spread), which lets the simulator
ask only about the jobs an event touched.
"""
from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Protocol

from slurm_advisor.domain import Node, Role, RunningJob


class SpeedModel(Protocol):
    name: str
    #: True when a job's speed depends only on the tasks on its own nodes.
    local: bool

    def speeds(self, nodes: Sequence[Node], running: Sequence[RunningJob],
               only: Collection[str] | None = None) -> dict[str, float]:
        """Iterations per second for every running job (or just the ids in ``only``)."""
        ...


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
