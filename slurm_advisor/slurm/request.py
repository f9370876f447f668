"""A job as submitted, from the job_submit hook's ``job_desc`` fields into the domain's terms. Pure.

The hook (``hooks/job_submit.lua``) sends every ``job_desc`` field that constrains where a job may
run; the names are Slurm's own (``src/plugins/job_submit/lua/job_submit_lua.c``,
``_get_job_req_field``), the same on 22.05, 24.11 and 26.05 (26.05 adds ``segment_size``,
``core_spec`` and ``thread_spec``). The hook sends a field Slurm holds as unset (NO_VAL and
friends) as null. :func:`read` turns them into a :class:`Submission`: the marker's job, one task's
demand, and a :class:`~slurm_advisor.domain.request.JobRequest` with every constraint the advisor
honours (see :data:`MODELLED`). A field the advisor does not model, or a value it cannot read,
raises :class:`Unmodelled` naming the option: the daemon then leaves the job exactly as submitted
and records why. It never guesses.

Some requests are modelled but cannot be pinned exactly (Slurm lays out the tasks per node
itself and the advisor cannot claim what it will take): :attr:`Submission.unpinnable` says why,
and the job goes to Slurm as submitted, stamped only. A job that cannot start now whatever its
nodes (``--hold``, a dependency, a begin time) gets :attr:`Submission.not_now`.

``arbitrary`` (the hook's: the job was submitted with ``-m arbitrary``, see hooks/slurm_advisor.lua)
gives :attr:`Submission.arbitrary`: where the release allocates arbitrary layouts
(``Release.allocates_arbitrary``) the daemon pins such a job to the policy's exact layout, one
``req_nodes`` entry per task. sbatch requires a ``-w`` list of such a job and derives ``-N`` from
it; with ``nodes=any`` in the marker the user says that list is only the layout to run without
the advisor: it and its node count then constrain nothing here.
"""
from __future__ import annotations

import math
import re
import time
from dataclasses import dataclass, replace
from typing import Any

from slurm_advisor.domain.job import Job
from slurm_advisor.domain.request import JobRequest
from slurm_advisor.domain.resources import Resources
from slurm_advisor.slurm.hostlist import HostListError, expand
from slurm_advisor.slurm.marker import Marker, parse_marker

#: sbatch option -> the job_desc field(s) it fills: what a policy's placement honours.
MODELLED = {
    "-n/--ntasks": "num_tasks", "-N/--nodes": "min_nodes, max_nodes", "-c/--cpus-per-task": "cpus_per_task",
    "--ntasks-per-node": "ntasks_per_node", "--mem": "min_mem_per_node", "--mem-per-cpu": "min_mem_per_cpu",
    "--gpus-per-task": "tres_per_task", "--gpus-per-node / --gres=gpu:K": "tres_per_node",
    "-w/--nodelist": "req_nodes", "-x/--exclude": "exc_nodes", "-C/--constraint (a&b)": "features",
    "-p/--partition": "partition", "--exclusive": "shared", "--oversubscribe": "shared",
    "--contiguous": "contiguous", "--switches": "req_switch, wait4switch",
    "--hold, -d/--dependency, --begin": "priority, dependency, begin_time (not pinned: cannot start now)",
    "-m arbitrary": "arbitrary (the hook's: SLURM_ARBITRARY_NODELIST equals req_nodes)",
}
#: job_desc field -> the sbatch option a user knows it by: set, the job is left to Slurm.
UNMODELLED = {
    "tres_per_job": "--gpus", "tres_per_socket": "--gpus-per-socket", "cpus_per_tres": "--cpus-per-gpu",
    "mem_per_tres": "--mem-per-gpu", "ntasks_per_socket": "--ntasks-per-socket",
    "ntasks_per_core": "--ntasks-per-core", "ntasks_per_board": "--ntasks-per-board",
    "ntasks_per_tres": "--ntasks-per-gpu", "sockets_per_node": "--sockets-per-node",
    "cores_per_socket": "--cores-per-socket", "threads_per_core": "--threads-per-core",
    "boards_per_node": "-B/--extra-node-info", "core_spec": "-S/--core-spec", "thread_spec": "--thread-spec",
    "reservation": "--reservation", "batch_features": "--batch", "pn_min_tmp_disk": "--tmp",
    "max_cpus": "max_cpus", "segment_size": "--segment",
}
#: Slurm's "unset" for its integer fields, should a hook send one as a number.
_UNSET = {0xFFFFFFFE, 0xFFFFFFFF, 0xFFFE, 0xFFFF, 0xFFFFFFFFFFFFFFFE}
_SHARED_EXCLUSIVE, _SHARED_OK = 0, 1
#: job_desc.bitflags that constrain placement (slurm.h): set, the job is left to Slurm
_FLAGS = {1 << 4: "--gres-flags=enforce-binding", 1 << 8: "--spread-job"}
_FEATURE = re.compile(r"[A-Za-z0-9_.-]{1,64}")
_PARTITION = re.compile(r"[A-Za-z0-9_.-]{1,64}")
_TRES = re.compile(r"(?:gres[:/])?([a-z_]+)(?::([A-Za-z0-9_.-]+))?[:=](\d+)")


class Unmodelled(ValueError):
    """An option the advisor does not model, or a value it cannot read: the job is left to Slurm."""

    def __init__(self, option: str, detail: str = ""):
        super().__init__(f"unmodelled option: {option}" + (f" ({detail})" if detail else ""))
        self.option = option


class Mismatch(ValueError):
    """The marker and the job's own options disagree (e.g. on the task count)."""


@dataclass(frozen=True)
class Submission:
    marker: Marker
    num_tasks: int
    task: Resources              # one task's demand; Slurm gives every task the same
    request: JobRequest
    #: why the job is left to Slurm as submitted: an option the advisor does not model (None: none)
    unmodelled: str | None = None
    #: why the advisor may not pin this job exactly although it models it (None: it may)
    unpinnable: str | None = None
    #: why the job cannot start now whatever its nodes (None: it can)
    not_now: str | None = None
    #: submitted with -m arbitrary: Slurm 23.11+ allocates the tasks per node its req_nodes repeats
    arbitrary: bool = False

    def job(self, job_id: str, *, user: str = "", time_limit_s: float | None = None) -> Job:
        """The domain's job: the marker's tasks, each of this shape, under this request."""
        m = self.marker
        return Job(job_id, m.type, m.ps, m.workers, self.task, self.task, m.iters or 1.0, user=user,
                   model_size_mb=m.model_mb, batch_size=m.batch, time_limit_s=time_limit_s,
                   request=None if self.unmodelled else self.request)


def read(fields: dict[str, Any], now: float | None = None) -> Submission:
    """The submission in the hook's ``fields``; Mismatch or MarkerError when the marker is missing,
    malformed or contradicts the job's own task count (the daemon refuses those). An option the
    advisor does not model gives a submission with :attr:`Submission.unmodelled` set."""
    if not isinstance(fields, dict):
        raise Mismatch("job must be an object")
    comment = fields.get("comment")
    if comment is not None and not isinstance(comment, str):
        raise Mismatch("job.comment must be a string")
    marker = parse_marker(comment)
    if marker is None:
        raise Mismatch("job.comment carries no 'slurm-advisor:' marker")
    wanted = marker.ps + marker.workers
    tasks = _count_or_none(fields, "num_tasks")
    if tasks is not None and tasks != wanted:
        raise Mismatch(f"job.num_tasks is {tasks} but the marker says ps={marker.ps} workers={marker.workers}")
    not_now = _not_now(fields, time.time() if now is None else now)
    arbitrary = fields.get("arbitrary")
    if arbitrary is not None and not isinstance(arbitrary, bool):
        raise Mismatch("job.arbitrary must be true, false or null")
    try:
        return replace(_modelled(fields, marker, not_now), arbitrary=bool(arbitrary))
    except Unmodelled as exc:
        cpus = _count_or_none(fields, "cpus_per_task") or 1
        return Submission(marker, wanted, Resources(cpus, 0, 0), JobRequest(), unmodelled=str(exc), not_now=not_now)


def _modelled(fields: dict[str, Any], marker: Marker, not_now: str | None) -> Submission:
    for field, option in UNMODELLED.items():
        if _set(fields.get(field)):
            raise Unmodelled(option, field)
    flags = fields.get("bitflags")
    if flags is not None:
        if isinstance(flags, bool) or not isinstance(flags, int) or not 0 <= flags < 2**53:
            raise Unmodelled("bitflags", "not a set of flags")
        for bit, option in _FLAGS.items():
            if flags & bit:
                raise Unmodelled(option, "bitflags")
    tasks = _count(fields, "num_tasks")
    per_node = _count(fields, "ntasks_per_node")
    min_nodes = _count(fields, "min_nodes") or 1
    max_nodes = _count(fields, "max_nodes")
    # -m arbitrary with nodes=any: the -w list and the -N sbatch derived from it are the layout
    # to run without the advisor, not a request
    fallback_list = fields.get("arbitrary") is True and marker.nodes == "any"
    if fallback_list:
        min_nodes, max_nodes = 1, None
    wanted = marker.ps + marker.workers
    if tasks is None and per_node is not None and max_nodes == min_nodes:
        tasks = per_node * min_nodes  # what slurmctld makes of -N with --ntasks-per-node
    if tasks is not None and tasks != wanted:
        raise Mismatch(f"job.num_tasks is {tasks} but the marker says ps={marker.ps} workers={marker.workers}")
    if max_nodes is not None and max_nodes < min_nodes:
        raise Unmodelled("-N/--nodes", f"range {min_nodes}-{max_nodes}")
    if min_nodes > wanted:
        raise Unmodelled("-N/--nodes", f"{min_nodes} nodes for the marker's {wanted} tasks")
    if per_node == 0:
        raise Unmodelled("--ntasks-per-node", "ntasks_per_node=0")
    cpus = _count(fields, "cpus_per_task") or 1
    fixed = _fixed_tasks_per_node(wanted, per_node, min_nodes, max_nodes)
    gpus_task = _gpus(fields, "tres_per_task", allow_cpu=True)
    gpus_node = _gpus(fields, "tres_per_node")
    mem_task, mem_node = _memory(fields, cpus, fixed)
    if _count(fields, "pn_min_cpus") not in (None, 0) and _count(fields, "pn_min_cpus") > cpus * (fixed or per_node or 1):
        raise Unmodelled("--mincpus", "pn_min_cpus")
    required, excluded = _nodes(fields, "req_nodes"), _nodes(fields, "exc_nodes")
    if fallback_list:
        required = frozenset()
    if required & excluded:
        raise Unmodelled("-w/-x", "a node both required and excluded")
    request = JobRequest(
        min_nodes=min_nodes, max_nodes=max_nodes, max_tasks_per_node=per_node, mem_per_node_mb=mem_node,
        gpus_per_node=gpus_node, required=required, excluded=excluded,
        features=_features(fields), partition=_partition(fields), exclusive=_exclusive(fields),
        contiguous=bool(_count(fields, "contiguous")), max_switches=_count(fields, "req_switch") or None)
    if gpus_node and not gpus_task and fixed is not None and gpus_node % fixed == 0:
        gpus_task = gpus_node // fixed
    return Submission(marker, wanted, Resources(cpus, gpus_task, mem_task), request,
                      unpinnable=_unpinnable(fields, request, fixed, gpus_task), not_now=not_now)


def _unpinnable(fields: dict[str, Any], request: JobRequest, fixed: int | None, gpus_task: int) -> str | None:
    """Why a modelled request cannot be pinned exactly (the last reason that applies), or None."""
    unpinnable = None
    if request.gpus_per_node and not gpus_task:
        unpinnable = "--gpus-per-node with a task count per node that Slurm chooses"
    if request.exclusive and fixed is None:
        unpinnable = "--exclusive with a task count per node that Slurm chooses"
    if _partitions(fields) > 1:
        unpinnable = "several partitions requested: Slurm chooses one"
    if fields.get("arbitrary") is True and request.max_tasks_per_node is not None:
        unpinnable = "--ntasks-per-node with -m arbitrary: the pin names every task's node"
    return unpinnable


def _fixed_tasks_per_node(tasks: int, per_node: int | None, min_nodes: int, max_nodes: int | None) -> int | None:
    """Tasks on every node when the request leaves Slurm no choice: ``-N k`` with ``tasks == k x
    --ntasks-per-node``, or one task per node (``-N n -n n``); else None."""
    if max_nodes != min_nodes:
        return None
    if per_node is not None and tasks == per_node * min_nodes:
        return per_node
    if min_nodes == 1:
        return tasks  # -N 1: every task on the one node
    return 1 if tasks == min_nodes else None


def _memory(fields: dict[str, Any], cpus: int, fixed: int | None) -> tuple[int, int]:
    """(MB per task, MB every node must have free) from ``pn_min_memory`` and ``mem_per_cpu``."""
    mem = _count(fields, "pn_min_memory") or 0
    if fields.get("mem_per_cpu"):
        return mem * cpus, 0
    if not mem:
        return 0, 0
    # --mem is per node: each task claims its share where the count per node is fixed
    return (-(-mem // fixed) if fixed else 0), mem


def _gpus(fields: dict[str, Any], name: str, allow_cpu: bool = False) -> int:
    """GPUs in a TRES field (``gres:gpu:2``, ``gres/gpu:2``, ``gres/gpu=2``); Unmodelled for typed
    GPUs or another GRES; ``cpu=N`` (24.11 repeats -c there) is skipped where ``allow_cpu``."""
    text = _text(fields, name)
    if not text:
        return 0
    gpus = 0
    for entry in text.split(","):
        match = _TRES.fullmatch(entry.strip())
        if match is None:
            raise Unmodelled(name, f"cannot read {entry[:64]!r}")
        kind, typed, count = match.groups()
        if kind == "cpu" and allow_cpu:
            continue
        if kind != "gpu":
            raise Unmodelled(name, f"GRES {kind}")
        if typed is not None:
            raise Unmodelled(name, f"typed GPUs gpu:{typed}")
        gpus += int(count)
    return gpus


def _nodes(fields: dict[str, Any], name: str) -> frozenset[str]:
    text = _text(fields, name)
    if not text:
        return frozenset()
    try:
        return frozenset(expand(text, f"job.{name}", max_hosts=100_000))
    except HostListError as exc:
        raise Unmodelled(name, str(exc)) from None


def _features(fields: dict[str, Any]) -> frozenset[str]:
    text = _text(fields, "features")
    if not text:
        return frozenset()
    names = text.split("&")
    if not all(_FEATURE.fullmatch(n) for n in names):
        raise Unmodelled("-C/--constraint", "only features joined by & are modelled")
    return frozenset(names)


def _partitions(fields: dict[str, Any]) -> int:
    text = _text(fields, "partition")
    return len(text.split(",")) if text else 0


def _partition(fields: dict[str, Any]) -> str | None:
    text = _text(fields, "partition")
    if not text or "," in text:
        return None
    if not _PARTITION.fullmatch(text):
        raise Unmodelled("-p/--partition", "a name of letters, digits and ._-")
    return text


def _exclusive(fields: dict[str, Any]) -> bool:
    shared = _count(fields, "shared")
    if shared is None or shared == _SHARED_OK:
        return False
    if shared == _SHARED_EXCLUSIVE:
        return True
    raise Unmodelled("--exclusive=user/mcs/topo", "shared")


def _not_now(fields: dict[str, Any], now: float) -> str | None:
    if _count_or_none(fields, "priority") == 0:
        return "held (--hold): Slurm starts it when it is released"
    if _text_or_none(fields, "dependency"):
        return "waits on a dependency"
    begin = _count_or_none(fields, "begin_time")
    if begin and begin > now + 1:
        return "has a later begin time"
    return None


def _text_or_none(fields: dict[str, Any], name: str) -> str | None:
    try:
        return _text(fields, name)
    except Unmodelled:
        return None


def _count_or_none(fields: dict[str, Any], name: str) -> int | None:
    try:
        return _count(fields, name)
    except Unmodelled:
        return None


def _set(value: Any) -> bool:
    return value not in (None, "", 0) and not (isinstance(value, int) and value in _UNSET)


def _text(fields: dict[str, Any], name: str) -> str | None:
    value = fields.get(name)
    if value is None:
        return None
    if not isinstance(value, str):
        raise Unmodelled(name, "not a string")
    return value


def _count(fields: dict[str, Any], name: str) -> int | None:
    """A non-negative integer field; None when unset."""
    value = fields.get(name)
    if value is None:
        return None
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise Unmodelled(name, f"not a count: {value!r}"[:80])
    if value in _UNSET:
        return None
    if value >= 2**31:
        raise Unmodelled(name, "out of range")
    return value
