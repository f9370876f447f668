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

import re

from slurm_advisor.cluster.slurm_json import expand_hostlist

SCONTROL = "scontrol show job -d"
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
    allocation, or one whose CPUs do not lay out its tasks."""
    tasks, cpt = _NUM_TASKS.search(text), _CPUS_PER_TASK.search(text)
    groups = _PER_NODE.findall(text)
    if tasks is None or not groups:
        return None
    per_task = max(1, int(cpt.group(1))) if cpt else 1
    nodes, room = [], []
    for hosts, cpu_ids in groups:
        for host in expand_hostlist(hosts):
            nodes.append(host)
            room.append(count_ids(cpu_ids) // per_task)
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


def count_ids(spec: str) -> int:
    """How many ids a Slurm id list names ("0-5,7" -> 7)."""
    total = 0
    for part in filter(None, spec.split(",")):
        lo, _, hi = part.partition("-")
        total += int(hi or lo) - int(lo) + 1
    return total
