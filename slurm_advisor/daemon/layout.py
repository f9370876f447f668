"""Where a running job's tasks are and what each one is, from its environment. Pure: no I/O.

An advised job carries ``SLURM_ADVISOR_LAYOUT`` (``ps=n1;worker=n1,n3,n3``: the node of each task
in task order, PS first; docs/protocol.md). A job that was not advised (daemon down, observe
mode, kill switch) gets its layout from Slurm's own allocation: ``SLURM_JOB_NODELIST`` expanded
and ``SLURM_TASKS_PER_NODE``, tasks in node order, the first ones PS (a ``-m arbitrary`` batch job,
which Slurm gives no SLURM_TASKS_PER_NODE: its ``SLURM_ARBITRARY_NODELIST``, one node per task). How many are PS: ``--ps``,
else ``SLURM_ADVISOR_PS``, else the ``ps=`` of the job's marker, which the hook copies from the
job's comment into ``SLURM_ADVISOR_MARKER`` (a job's comment is not in its environment). Every
node name is checked against :data:`NODE_NAME` before it is used, so what comes out (shell
variables, a hostfile, TF_CONFIG, torchrun's arguments) never carries shell syntax. Bad input raises
:class:`~slurm_advisor.errors.InputError` naming the variable.
"""
from __future__ import annotations

import json
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass

from slurm_advisor.daemon.protocol import ENV_DECISION, ENV_LAYOUT, ProtocolError, parse_layout
from slurm_advisor.errors import InputError
from slurm_advisor.slurm import hostlist, marker
from slurm_advisor.slurm.hostlist import MAX_HOSTS, NODE_NAME

ENV_NODELIST = "SLURM_JOB_NODELIST"
ENV_TASKS_PER_NODE = "SLURM_TASKS_PER_NODE"
ENV_STEP_NODELIST = "SLURM_STEP_NODELIST"
ENV_STEP_TASKS_PER_NODE = "SLURM_STEP_TASKS_PER_NODE"
ENV_ARBITRARY = "SLURM_ARBITRARY_NODELIST"  # sbatch -m arbitrary's -w list, one node per task
ENV_NTASKS = "SLURM_NTASKS"
ENV_PS = "SLURM_ADVISOR_PS"
ENV_MARKER = "SLURM_ADVISOR_MARKER"  # the job's `slurm-advisor:` marker, set by the hook
ENV_PROCID = "SLURM_PROCID"
ENV_NODENAME = "SLURMD_NODENAME"
ENV_ADDR_PREFIX = "SLURM_ADVISOR_ADDR_"
DEFAULT_BASE_PORT = 29500

#: An address from SLURM_ADVISOR_ADDR_<node>: a host name, IPv4 or IPv6 address.
_ADDRESS = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,252}|\[[0-9A-Fa-f:.]+\]")
_TASK_COUNT = re.compile(r"(\d+)(?:\(x(\d+)\))?")


@dataclass(frozen=True)
class JobLayout:
    """The node of each PS task and of each worker task, in task order (task rank = position in
    ``tasks``: PS 0..P-1, then workers)."""

    ps: tuple[str, ...]
    workers: tuple[str, ...]
    source: str  # "advisor": from SLURM_ADVISOR_LAYOUT; "slurm": from Slurm's allocation
    decision: str | None = None  # SLURM_ADVISOR_DECISION (also set when the advisor only capped nodes)
    warning: str | None = None  # why an advised layout was set aside

    @property
    def tasks(self) -> tuple[str, ...]:
        return self.ps + self.workers

    @property
    def tasks_per_node(self) -> dict[str, int]:
        """node -> its number of tasks, nodes in the order their first task comes."""
        counts: dict[str, int] = {}
        for node in self.tasks:
            counts[node] = counts.get(node, 0) + 1
        return counts

    def role(self, rank: int) -> tuple[str, int]:
        """("ps", i) or ("worker", i) of the task with this rank."""
        if not 0 <= rank < len(self.tasks):
            raise InputError(f"task rank {rank} is out of range: the layout has {len(self.tasks)} tasks")
        return ("ps", rank) if rank < len(self.ps) else ("worker", rank - len(self.ps))


# -- reading -----------------------------------------------------------------------------------------
def from_env(env: Mapping[str, str], ps: int | None = None) -> JobLayout:
    """The job's layout: the advised one when ``SLURM_ADVISOR_LAYOUT`` is set, else Slurm's allocation
    with ``ps`` PS tasks (the argument, else ``SLURM_ADVISOR_PS``, else 0) taken first.

    A well-formed layout naming a node outside the job's allocation was not made for this job (sbatch
    exports the submitting shell's environment, so a job submitted from an advised job inherits its
    layout): it is set aside with a ``warning`` and the allocation is used, so the job still runs."""
    decision = env.get(ENV_DECISION) or None
    warning = None
    if env.get(ENV_LAYOUT, "").strip():
        layout = _advised(env, decision)
        outside = _outside_allocation(layout, env)
        if not outside:
            return layout
        warning = (f"{ENV_LAYOUT} names node {outside}, which is not in this job's allocation "
                   f"({ENV_NODELIST}={env[ENV_NODELIST]}): not made for this job; using Slurm's allocation")
    nodes = _allocation(env)
    count, source, set_aside = _ps_count(env, ps, len(nodes))
    if count >= len(nodes):
        raise InputError(f"{source}: {count} PS tasks leave no worker among the job's {len(nodes)} tasks")
    warning = "; ".join(w for w in (warning, set_aside) if w) or None
    return JobLayout(tuple(nodes[:count]), tuple(nodes[count:]), "slurm", decision, warning)


def _advised(env: Mapping[str, str], decision: str | None) -> JobLayout:
    try:
        roles = parse_layout(env[ENV_LAYOUT])
    except ProtocolError as exc:
        raise InputError(str(exc)) from None
    for nodes in roles.values():
        for node in nodes:
            _check_name(node, ENV_LAYOUT)
    return JobLayout(tuple(roles.get("ps", ())), tuple(roles["worker"]), "advisor", decision)


def _outside_allocation(layout: JobLayout, env: Mapping[str, str]) -> str | None:
    """The first node of ``layout`` that the job was not allocated (None: all were, or no job)."""
    if not env.get(ENV_NODELIST, "").strip():
        return None
    allocated = set(expand_hostlist(env[ENV_NODELIST], ENV_NODELIST))
    return next((node for node in layout.tasks_per_node if node not in allocated), None)


def _allocation(env: Mapping[str, str]) -> list[str]:
    """One node name per task, in Slurm's node order: the job's, or inside an srun step the step's
    (whose SLURM_TASKS_PER_NODE counts the step's nodes only)."""
    in_step = bool(env.get(ENV_STEP_NODELIST, "").strip())
    list_var = ENV_STEP_NODELIST if in_step else ENV_NODELIST
    count_var = ENV_STEP_TASKS_PER_NODE if in_step and env.get(ENV_STEP_TASKS_PER_NODE) else ENV_TASKS_PER_NODE
    spec = env.get(list_var, "").strip()
    if not spec:
        raise InputError(f"{ENV_NODELIST} is not set: run inside a Slurm job, or set {ENV_LAYOUT}")
    nodes = expand_hostlist(spec, list_var)
    if not env.get(count_var, "").strip():
        arbitrary = _arbitrary_tasks(env, set(nodes))
        if arbitrary:
            return arbitrary
        raise InputError(f"{count_var} is not set, though {list_var} is: run inside a Slurm job")
    counts = expand_task_counts(env[count_var], count_var)
    if len(counts) != len(nodes):
        raise InputError(f"{count_var}={env[count_var]!r} counts {len(counts)} nodes, "
                         f"{list_var}={spec!r} names {len(nodes)}")
    return [node for node, count in zip(nodes, counts) for _ in range(count)]


def _arbitrary_tasks(env: Mapping[str, str], allocated: set[str]) -> list[str] | None:
    """One node per task from ``SLURM_ARBITRARY_NODELIST``, the list a ``-m arbitrary`` batch job
    was submitted with (or the advisor's exact pin), by which slurmd lays out its batch step and
    sets no SLURM_TASKS_PER_NODE (24.11 and 26.05 testbeds); None where it is unset, names a node
    outside the allocation, or is not one node per task (22.05 drops the list's repeats)."""
    spec = env.get(ENV_ARBITRARY, "").strip()
    if not spec:
        return None
    tasks = expand_hostlist(spec, ENV_ARBITRARY)
    count = env.get(ENV_NTASKS, "").strip()
    if not set(tasks) <= allocated or (count.isdigit() and int(count) != len(tasks)):
        return None
    return [_check_name(node, ENV_ARBITRARY) for node in tasks]


def _ps_count(env: Mapping[str, str], ps: int | None, tasks: int) -> tuple[int, str, str | None]:
    """(PS tasks, what said so, why a marker was set aside or None): ``--ps``, else
    ``SLURM_ADVISOR_PS``, else the job's marker, else 0."""
    if ps is not None:
        if ps < 0:
            raise InputError(f"--ps must be >= 0, not {ps}")
        return ps, "--ps", None
    raw = env.get(ENV_PS, "").strip()
    if raw:
        if not raw.isdigit():
            raise InputError(f"{ENV_PS}={raw!r} is not a count of PS tasks")
        return int(raw), ENV_PS, None
    return _marker_ps(env, tasks)


def _marker_ps(env: Mapping[str, str], tasks: int) -> tuple[int, str, str | None]:
    """The ``ps=`` of the marker in ``SLURM_ADVISOR_MARKER`` (0 when unset). A marker whose task
    count is not this job's was not made for it (sbatch exports the submitting shell's
    environment, so a job submitted from a marked job inherits its marker): set aside, 0 PS."""
    text = env.get(ENV_MARKER, "").strip()
    if not text:
        return 0, ENV_PS, None
    try:
        found = marker.parse_marker(text)
    except marker.MarkerError as exc:
        raise InputError(f"{ENV_MARKER}: {exc}; or give --ps") from None
    if found is None:
        raise InputError(f"{ENV_MARKER}={text!r} holds no '{marker.MARKER}' marker; or give --ps")
    if found.ps + found.workers != tasks:
        return 0, ENV_MARKER, (f"{ENV_MARKER} says ps={found.ps} workers={found.workers}, but this job has "
                               f"{tasks} tasks: not made for this job; no PS (give --ps)")
    return found.ps, ENV_MARKER, None


def _check_name(name: str, variable: str) -> str:
    if not NODE_NAME.fullmatch(name):
        raise InputError(f"{variable}: bad node name {name!r}: letters, digits and ._- only (64 at most)")
    return name


def expand_hostlist(spec: str, variable: str = ENV_NODELIST) -> list[str]:
    """Slurm's compact host list as names, in order (``slurm/hostlist.py``); a bad or empty list
    raises InputError naming ``variable``."""
    if not spec.strip():
        raise InputError(f"{variable}: bad host list {spec!r}: empty name")
    try:
        return hostlist.expand(spec, variable)
    except hostlist.HostListError as exc:
        raise InputError(str(exc)) from None


def expand_task_counts(spec: str, variable: str = ENV_TASKS_PER_NODE) -> list[int]:
    """Slurm's tasks per node, ``2(x3),1`` -> [2, 2, 2, 1]."""
    counts: list[int] = []
    for part in spec.strip().split(","):
        match = _TASK_COUNT.fullmatch(part.strip())
        if match is None or int(match.group(1)) < 1 or match.group(2) == "0":
            raise InputError(f"{variable}: bad task count {part!r} in {spec!r}; "
                             "expected e.g. 2(x3),1")
        repeat = int(match.group(2) or 1)
        if len(counts) + repeat > MAX_HOSTS:
            raise InputError(f"{variable}: {spec!r} counts more than {MAX_HOSTS} nodes")
        counts += [int(match.group(1))] * repeat
    return counts


def address(node: str, env: Mapping[str, str]) -> str:
    """The address to reach ``node`` at: ``SLURM_ADVISOR_ADDR_<node>`` (every character of the name
    but letters, digits and _ written as _) when set, else the node name itself."""
    variable = ENV_ADDR_PREFIX + re.sub(r"[^A-Za-z0-9_]", "_", node)
    value = env.get(variable, "").strip()
    if not value:
        return node
    if not _ADDRESS.fullmatch(value):
        raise InputError(f"{variable}={value!r} is not a host name or IP address")
    return value


def task_rank(env: Mapping[str, str], task_index: int | None) -> int:
    """``--task-index`` when given, else ``SLURM_PROCID`` (the rank srun gives the task)."""
    if task_index is not None:
        return task_index
    raw = env.get(ENV_PROCID, "").strip()
    if not raw.isdigit():
        raise InputError(f"{ENV_PROCID} is {'not set' if not raw else repr(raw)}: "
                         "give --task-index or run the command in a task that srun started")
    return int(raw)


def this_node(env: Mapping[str, str], node: str | None) -> str:
    """``--node`` when given, else ``SLURMD_NODENAME``."""
    name = node or env.get(ENV_NODENAME, "").strip()
    if not name:
        raise InputError(f"{ENV_NODENAME} is not set: give --node or run the command on a node of the job")
    return _check_name(name, "--node" if node else ENV_NODENAME)


# -- rendering ---------------------------------------------------------------------------------------
def shell(layout: JobLayout, env: Mapping[str, str], base_port: int = DEFAULT_BASE_PORT) -> str:
    """``export NAME=value`` lines, every value shell-quoted, for ``eval "$(slurm-advisor layout)"``.
    The master is task 0's node (where rank 0 of torch.distributed opens its store)."""
    values = {
        "SLURM_ADVISOR_PS_HOSTS": ",".join(layout.ps),
        "SLURM_ADVISOR_WORKER_HOSTS": ",".join(layout.workers),
        "SLURM_ADVISOR_NUM_PS": str(len(layout.ps)),
        "SLURM_ADVISOR_NUM_WORKERS": str(len(layout.workers)),
        "SLURM_ADVISOR_MASTER_ADDR": address(layout.tasks[0], env),
        "SLURM_ADVISOR_MASTER_PORT": str(_port(base_port, 0)),
        "SLURM_ADVISOR_LAYOUT_SOURCE": layout.source,
    }
    return "".join(f"export {name}={shlex.quote(value)}\n" for name, value in values.items())


def hostfile(layout: JobLayout) -> str:
    """One node name per task, in task order, for ``SLURM_HOSTFILE`` + ``srun --distribution=arbitrary``:
    srun gives the task on line i rank i, so ranks 0..P-1 are the PS."""
    return "".join(f"{node}\n" for node in layout.tasks)


def tf_config(layout: JobLayout, rank: int, env: Mapping[str, str], base_port: int = DEFAULT_BASE_PORT) -> str:
    """TF_CONFIG for the task with this rank; task r listens on ``base_port + r``."""
    kind, index = layout.role(rank)
    cluster: dict[str, list[str]] = {}
    if layout.ps:
        cluster["ps"] = [f"{address(n, env)}:{_port(base_port, r)}" for r, n in enumerate(layout.ps)]
    offset = len(layout.ps)
    cluster["worker"] = [f"{address(n, env)}:{_port(base_port, offset + r)}" for r, n in enumerate(layout.workers)]
    return json.dumps({"cluster": cluster, "task": {"type": kind, "index": index}}, separators=(",", ":"))


def torchrun_args(layout: JobLayout, node: str, env: Mapping[str, str],
                  base_port: int = DEFAULT_BASE_PORT) -> list[str]:
    """torchrun's rendezvous arguments for ``node`` (an all-reduce job: workers only, the same
    number on every node; the master is the first worker's node)."""
    if layout.ps:
        raise InputError(f"torchrun starts workers only, and this layout has {len(layout.ps)} PS tasks; "
                         "use --format hostfile with srun --distribution=arbitrary")
    counts = layout.tasks_per_node
    if len(set(counts.values())) > 1:
        listed = ", ".join(f"{n}:{c}" for n, c in counts.items())
        raise InputError(f"torchrun needs the same number of processes on every node, and the layout "
                         f"has {listed}; use --format hostfile with srun --distribution=arbitrary")
    nodes = list(counts)
    if node not in counts:
        raise InputError(f"node {node} runs no task of this layout ({', '.join(nodes)})")
    return [f"--nnodes={len(nodes)}", f"--node-rank={nodes.index(node)}",
            f"--master-addr={address(nodes[0], env)}", f"--master-port={_port(base_port, 0)}",
            f"--nproc-per-node={counts[node]}"]


def as_json(layout: JobLayout) -> str:
    return json.dumps({"source": layout.source, "decision": layout.decision, "ps": list(layout.ps),
                       "worker": list(layout.workers), "tasks_per_node": layout.tasks_per_node,
                       "warning": layout.warning})


def _port(base_port: int, rank: int) -> int:
    port = base_port + rank
    if not 1 <= port <= 65535:
        raise InputError(f"--base-port {base_port}: task {rank}'s port {port} is not a TCP port")
    return port
