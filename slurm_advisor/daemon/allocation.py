"""Where Slurm put a job's tasks, read from Slurm, not rebuilt. Pure: the parsing; the command
runs in ``queue.SlurmQueue.allocation``.

``scontrol show job -d -o ID`` lists the job's allocation node by node (``Nodes=n[1-2]
CPU_IDs=0-5 Mem=... GRES=...``): the CPUs Slurm gave it on each node. cons_tres leaves a job
exactly its tasks' CPUs on each node (``slurm/expressible.py``, step 4), and the batch step's
``SLURM_TASKS_PER_NODE`` is those CPUs over ``CPUs/Task`` laid out in blocks (22.05's
``_task_layout_block``): that is Slurm's per-node task count, what ``slurm-advisor layout``
gives the job's tasks. Where the counts are fixed by the node list alone (one node, or one task
per node) nothing needs reading: squeue's and the job completion file's node list say it.
"""
from __future__ import annotations

import dataclasses
import logging
import re

from slurm_advisor.cluster.slurm_json import expand_hostlist
from slurm_advisor.domain.outcome import Outcome

log = logging.getLogger("slurm_advisor.daemon")

SCONTROL = "scontrol show job -d"
PER_REFRESH = 32  # `scontrol show job -d` reads a refresh: a burst of starts waits its turn
NODE_LIST = "node list"  # the counts follow from the node list alone
_PER_NODE = re.compile(r"\bNodes=(\S+) CPU_IDs=(\S+) Mem=")
_NUM_TASKS = re.compile(r"\bNumTasks=(\d+)\b")
_CPUS_PER_TASK = re.compile(r"\bCPUs/Task=(\d+)\b")


def from_node_list(nodes: tuple[str, ...], num_tasks: int) -> tuple[int, ...]:
    """The per-node counts the node list fixes (one node; one task on each); () otherwise."""
    if len(nodes) == 1 and num_tasks >= 1:
        return (num_tasks,)
    if nodes and len(nodes) == num_tasks:
        return (1,) * num_tasks
    return ()


def parse_job(text: str) -> tuple[tuple[str, ...], tuple[int, ...]] | None:
    """(nodes, tasks on each) of one ``scontrol show job -d -o`` line; None when it shows no
    allocation, one whose CPUs do not lay out its tasks, or one that cannot be Slurm's alone: a
    node twice or an id list that is no list (text a user put in the job's name or comment)."""
    tasks, cpt = _NUM_TASKS.search(text), _CPUS_PER_TASK.search(text)
    groups = _PER_NODE.findall(text)
    if tasks is None or not groups:
        return None
    per_task = max(1, int(cpt.group(1))) if cpt else 1
    nodes, room = [], []
    for hosts, cpu_ids in groups:
        cpus = count_ids(cpu_ids)
        if cpus is None:
            return None
        for host in expand_hostlist(hosts):
            nodes.append(host)
            room.append(cpus // per_task)
    if len(set(nodes)) != len(nodes):
        return None
    counts = _block(room, int(tasks.group(1)))
    return None if counts is None else (tuple(nodes), counts)


def _block(room: list[int], num_tasks: int) -> tuple[int, ...] | None:
    """Tasks in blocks: each node as many as its CPUs hold, in order, until all are placed."""
    left, out = num_tasks, []
    for r in room:
        take = min(r, left)
        out.append(take)
        left -= take
    return None if left or not all(out) else tuple(out)


def count_ids(spec: str) -> int | None:
    """How many ids a Slurm id list names ("0-5,7" -> 7); None for anything else."""
    total = 0
    for part in filter(None, spec.split(",")):
        lo, dash, hi = part.partition("-")
        if not lo.isdigit() or (dash and not hi.isdigit()) or (dash and int(hi) < int(lo)):
            return None
        total += (int(hi) if dash else int(lo)) - int(lo) + 1
    return total


Allocation = tuple[tuple[str, ...], tuple[int, ...], str]  # nodes, tasks on each, where read


class Allocations:
    """The per-node task counts of the advised jobs the daemon saw start, read once each (the
    refresher's thread): from the node list where it fixes them, else from ``queue.allocation``
    (``scontrol show job -d``), at most :data:`PER_REFRESH` reads a refresh. At most ``kept``
    jobs are remembered, the oldest forgotten first."""

    def __init__(self, queue, kept: int):
        self.queue, self.kept = queue, kept
        self._known: dict[str, Allocation] = {}
        self._reads = PER_REFRESH

    def refresh(self) -> None:
        self._reads = PER_REFRESH

    def of(self, job) -> Allocation:
        """(nodes, Slurm's tasks on each, where read) of an advised job (``queue.AdvisedJob``);
        () and "" while not known: not started, or not read yet (read again at its next change)."""
        known = self._known.get(job.job_id)
        if known is not None or not job.started or not job.nodes:
            return known or (job.nodes, (), "")
        tasks, found = from_node_list(job.nodes, job.tasks), None
        if tasks:
            found = (job.nodes, tasks, NODE_LIST)
        elif self._reads > 0 and hasattr(self.queue, "allocation"):
            self._reads -= 1
            found = self._read(job)
        if found is None:
            return job.nodes, (), ""
        if len(self._known) >= self.kept:
            self._known.pop(next(iter(self._known)))
        self._known[job.job_id] = found
        return found

    def _read(self, job) -> Allocation | None:
        from slurm_advisor.daemon.queue import QueueError

        try:
            read = self.queue.allocation(job.job_id)
        except QueueError as exc:
            log.warning("cannot read job %s's allocation: %s", job.job_id, exc)
            return None
        return None if read is None or set(read[0]) != set(job.nodes) else (*read, SCONTROL)

    def attached(self, outcome: Outcome) -> Outcome:
        """A job completion record's outcome with the counts read while the job ran."""
        known = self._known.get(outcome.job_id)
        if known is None or set(known[0]) != set(outcome.nodes):
            return outcome
        return dataclasses.replace(outcome, nodes=known[0], tasks=known[1], tasks_from=known[2])
