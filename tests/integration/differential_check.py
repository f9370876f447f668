"""What a sbatch line asks of Slurm and what Slurm did with it, checked: the request as the user
wrote it (:class:`Ask`, read back from the options, not from the advisor's own parser), one
submission as Slurm holds and runs it (:class:`Submitted`), and the two runs of a case, without
and with the advisor (:class:`Result`), with what breaks the promise of #38:

- (a) a line Slurm accepts alone is rejected advised, or never starts where Slurm alone starts it;
- (b) a job the advisor pinned or capped breaks the request as written (:func:`check`); a job it
  only stamped holds a request that differs from the one Slurm holds without the advisor.

The check is itself checked on Slurm's own allocations (:meth:`Result.violations_alone`): what
Slurm 22.05 does alone (a -w list cut to -n nodes, --contiguous not kept, whole nodes' GPUs for
--exclusive, --ntasks-per-node tasks on every node of a -N range) is its semantics, not a failure.
It submits nothing: ``differential.py`` runs the submissions.
"""
from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field

from slurmctl import Slurm, job_fields, run

from slurm_advisor.domain import Resources
from slurm_advisor.slurm.hostlist import compress, expand

#: The request as Slurm holds it (scontrol show job), which a hook that only stamps leaves as it is.
_REQUEST_FIELDS = ("ReqNodeList", "ExcNodeList", "CPUs/Task", "ReqB:S:C:T", "NtasksPerN:B:S:C", "MinCPUsNode",
                   "MinMemoryNode", "MinMemoryCPU", "Features", "OverSubscribe", "Contiguous", "Switches",
                   "TresPerNode", "TresPerTask", "TresPerJob")


@dataclass(frozen=True)
class Cluster:
    """The nodes (Slurm's order) with their capacity, and each partition's nodes."""
    capacity: dict[str, Resources]
    partitions: dict[str, tuple[str, ...]]
    default_partition: str

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self.capacity)

    @classmethod
    def read(cls, slurm: Slurm) -> Cluster:
        capacity = {n.name: n.capacity for n in slurm.nodes()}
        partitions, default = {}, None
        for line in run(["scontrol", "show", "partition", "-o"]).splitlines():
            fields = job_fields(line)
            partitions[fields["PartitionName"]] = tuple(expand(fields["Nodes"]))
            if fields.get("Default") == "YES":
                default = fields["PartitionName"]
        return cls(capacity, partitions, default or next(iter(partitions)))


TESTBED = Cluster({f"n{i}": Resources(8, 4, 32000) for i in range(1, 5)},
                  {"batch": ("n1", "n2", "n3", "n4"), "small": ("n1", "n2")}, "batch")


@dataclass(frozen=True)
class Blocker:
    """A job without a marker that holds part of one node while a case is submitted."""
    node: str
    cpus: int
    gpus: int
    mem_mb: int

    def options(self) -> list[str]:
        return ["-w", self.node, "-n", str(self.cpus), f"--mem={self.mem_mb}",
                *([f"--gres=gpu:{self.gpus}"] if self.gpus else [])]


@dataclass(frozen=True)
class Case:
    name: str
    options: tuple[str, ...]   # as the user typed them, the marker apart
    ps: int
    workers: int
    blockers: tuple[Blocker, ...] = ()
    model: str = "resnet50"

    @property
    def marker(self) -> str:
        return f"slurm-advisor: type={self.model} ps={self.ps} workers={self.workers}"

    def line(self) -> str:
        """The submission as a user would type it (blockers apart)."""
        return shlex.join(["sbatch", *self.options, "--comment", self.marker, "job.sbatch"])

    def busy(self) -> str:
        return "; ".join(shlex.join(["sbatch", *b.options(), "--wrap", "sleep 300"]) for b in self.blockers) \
            or "(idle cluster)"


_ALIASES = {"-n": "--ntasks", "-N": "--nodes", "-c": "--cpus-per-task", "-w": "--nodelist", "-x": "--exclude",
            "-p": "--partition", "-G": "--gpus"}
_FLAGS = {"--exclusive", "--contiguous"}


@dataclass(frozen=True)
class Ask:
    """The request as the user wrote it on the sbatch line."""
    ntasks: int | None = None
    nodes: tuple[int, int] | None = None          # -N lo[-hi]
    per_node: int | None = None                   # --ntasks-per-node
    cpus: int = 1                                 # -c
    mem: int | None = None                        # --mem, MB per node
    mem_per_cpu: int | None = None
    gpus_per_task: int = 0
    gpus_per_node: int = 0                        # --gpus-per-node or --gres=gpu:K
    gpus: int = 0                                 # --gpus, per job
    include: frozenset[str] = frozenset()         # -w
    exclude: frozenset[str] = frozenset()         # -x
    exclusive: bool = False
    partitions: tuple[str, ...] = ()
    contiguous: bool = False
    switches: int | None = None

    @classmethod
    def parse(cls, options: tuple[str, ...] | list[str]) -> Ask:
        values: dict = {}
        items = iter(options)
        for item in items:
            name, eq, value = item.partition("=") if item.startswith("--") else (item, "", "")
            name = _ALIASES.get(name, name)
            if name not in _FLAGS and not eq:
                value = next(items)
            values[name] = value
        return cls._from(values)

    @classmethod
    def _from(cls, v: dict[str, str]) -> Ask:
        nodes = None
        if "--nodes" in v:
            lo, _, hi = v["--nodes"].partition("-")
            nodes = (int(lo), int(hi or lo))
        gres = v.get("--gres", "")
        known = {"--ntasks", "--nodes", "--ntasks-per-node", "--cpus-per-task", "--mem", "--mem-per-cpu",
                 "--gpus-per-task", "--gpus-per-node", "--gres", "--gpus", "--nodelist", "--exclude",
                 "--exclusive", "--partition", "--contiguous", "--switches"}
        if set(v) - known or (gres and not gres.startswith("gpu:")):
            raise ValueError(f"options the check does not know: {sorted(set(v) - known) or gres}")

        def count(key: str) -> int | None:
            return int(v[key]) if key in v else None

        include = expand(v["--nodelist"]) if "--nodelist" in v else []
        if count("--ntasks") is not None:  # sbatch keeps the first -n of more -w nodes than tasks
            include = include[:count("--ntasks")]
        return cls(ntasks=count("--ntasks"), nodes=nodes, per_node=count("--ntasks-per-node"),
                   cpus=count("--cpus-per-task") or 1, mem=count("--mem"), mem_per_cpu=count("--mem-per-cpu"),
                   gpus_per_task=count("--gpus-per-task") or 0,
                   gpus_per_node=count("--gpus-per-node") or (int(gres.split(":")[-1]) if gres else 0),
                   gpus=count("--gpus") or 0,
                   include=frozenset(include),
                   exclude=frozenset(expand(v["--exclude"])) if "--exclude" in v else frozenset(),
                   exclusive="--exclusive" in v, contiguous="--contiguous" in v,
                   partitions=tuple(v["--partition"].split(",")) if "--partition" in v else (),
                   switches=count("--switches"))

    def tasks(self) -> int:
        """The job's task count as Slurm counts it: -n, else -N x --ntasks-per-node, else -N, else 1."""
        if self.ntasks is not None:
            return self.ntasks
        if self.nodes is not None:
            return self.nodes[0] * (self.per_node or 1)
        return max(self.per_node or 1, 1)


# -- one submission, observed ------------------------------------------------------------------

@dataclass
class Submitted:
    """One sbatch of a case and what Slurm made of it."""
    accepted: bool
    message: str = ""                  # sbatch's error when rejected
    job_id: str | None = None
    fields: dict[str, str] = field(default_factory=dict)   # scontrol's, right after submission
    state: str = ""                    # RUNNING, or PENDING when it did not start
    reason: str = ""                   # Slurm's reason while pending
    allocation: dict[str, Resources] = field(default_factory=dict)  # where it ran (empty: never)
    tasks: dict[str, int] = field(default_factory=dict)              # SLURM_TASKS_PER_NODE
    layout: dict[str, int] = field(default_factory=dict)             # the advisor's layout: tasks per node
    partition: str = ""
    started_late: bool = False         # it ran only once the blockers were gone
    waited_s: float = 0.0              # from submission (or the blockers' end) to running, or to giving up
    log: list[str] = field(default_factory=list)  # slurmctld's lines during the submission

    @property
    def stamp(self) -> re.Match | None:
        return re.search(r"slurm-advisor:(d-[0-9a-f]+)(:observed)?", self.fields.get("AdminComment", ""))

    @property
    def advised(self) -> bool:
        """Whether the hook wrote the advisor's pin or cap into the job (not only its stamp)."""
        return self.stamp is not None and not self.stamp.group(2)

    def pin(self) -> tuple[tuple[str, ...], tuple[int, int]]:
        """The nodes the job must include and its node count range, as Slurm holds them at submission."""
        nodes = self.fields.get("ReqNodeList", "(null)")
        lo, _, hi = self.fields.get("NumNodes", "1").partition("-")
        return (() if nodes in ("(null)", "") else tuple(expand(nodes))), (int(lo), int(hi or lo))


# -- the checks --------------------------------------------------------------------------------

@dataclass
class Result:
    case: Case
    plain: Submitted              # the kill switch on: Slurm alone, on the busy cluster
    hooked: Submitted             # through the hook
    idle: Submitted | None = None  # Slurm alone again on the idle cluster, where the advised job never started

    def failures(self, cluster: Cluster) -> list[str]:
        """(a) accepted and started as without the advisor; (b) the advised job honours the request."""
        out = []
        plain, hooked = self.plain, self.hooked
        if plain.accepted and not hooked.accepted:
            out.append(f"(a) Slurm accepts it alone but rejects it advised: {hooked.message}")
        alone = plain if plain.allocation else self.idle
        if hooked.accepted and not hooked.allocation and alone is not None and alone.allocation:
            out.append(f"(a) Slurm alone starts it, advised it never starts, even with the blockers gone "
                       f"({hooked.state}: {hooked.reason})")
        out += [f"(b) {v}" for v in violations(self.case, hooked, cluster, plain)]
        return out

    def violations_alone(self, cluster: Cluster) -> list[str]:
        """The check on Slurm's own allocation, without the advisor: anything here is the check's fault."""
        return check(self.case, self.plain, cluster, self.plain) if self.plain.accepted else []

    def report(self, cluster: Cluster) -> str:
        def said(s: Submitted) -> str:
            if not s.accepted:
                return f"rejected: {s.message}"
            where = ", ".join(f"{n}: {r.cpus} CPUs {r.gpus} GPUs {r.mem_mb} MB {s.tasks.get(n, '?')} tasks"
                              for n, r in s.allocation.items()) or f"pending ({s.reason})"
            return (f"job {s.job_id} {s.state}{' once the blockers were gone' if s.started_late else ''}: {where}; "
                    f"ReqNodeList={s.fields.get('ReqNodeList')} NumNodes={s.fields.get('NumNodes')} "
                    f"AdminComment={s.fields.get('AdminComment')} layout={s.layout or '-'}")
        lines = [f"case {self.case.name}: {self.case.line()}", f"  busy: {self.case.busy()}",
                 f"  without the advisor: {said(self.plain)}", f"  with it (enforce): {said(self.hooked)}"]
        if self.idle is not None:
            lines.append(f"  without it on the idle cluster: {said(self.idle)}")
        lines += [f"  {f}" for f in self.failures(cluster)]
        lines += [f"  slurmctld: {line}" for line in self.hooked.log]
        return "\n".join(lines)


def violations(case: Case, sub: Submitted, cluster: Cluster, plain: Submitted | None = None) -> list[str]:
    """What the advisor broke of ``case``'s request in ``sub``: of a job it pinned or capped, what
    :func:`check` finds; of one it only stamped, any field of the request Slurm holds that differs
    from the ``plain`` submission's (the same line without the advisor)."""
    if not sub.accepted:
        return []
    if sub.advised:
        return check(case, sub, cluster, plain)
    if plain is None or not plain.accepted:
        return []
    return [f"only stamped, yet {name}={sub.fields.get(name)}, not {plain.fields.get(name)} as without the advisor"
            for name in _REQUEST_FIELDS if sub.fields.get(name) != plain.fields.get(name)]


def check(case: Case, sub: Submitted, cluster: Cluster, alone: Submitted | None = None) -> list[str]:
    """What ``sub`` breaks of ``case``'s request as written: the pin or cap the hook wrote, and once
    it ran, its allocation and the tasks Slurm lays out on it (more than the job has only where
    Slurm ``alone``, given the same line, laid out exactly the job's tasks), and the advisor's layout."""
    ask = Ask.parse(case.options)
    out = [f"pin: {v}" for v in _pin(ask, sub, cluster)] if sub.advised else []
    if not sub.allocation:  # it never ran: only its pin is checked
        return out
    out += _node_set(ask, list(sub.allocation), cluster, sub.partition) + _per_node(ask, sub, cluster)
    laid_out = sum(sub.tasks.values())
    if laid_out != ask.tasks() and alone is not None and sum(alone.tasks.values()) == ask.tasks():
        out.append(f"Slurm lays out {laid_out} tasks ({_tasks_text(sub)}) for the job's {ask.tasks()}; "
                   f"alone it lays out {_tasks_text(alone)}")
    return out


def _tasks_text(sub: Submitted) -> str:
    return ", ".join(f"{n}: {t}" for n, t in sub.tasks.items())


def _pin(ask: Ask, sub: Submitted, cluster: Cluster) -> list[str]:
    """What the pin or cap the hook wrote breaks: the node count range Slurm now holds for the job
    must lie inside the user's, the required nodes must be allowed and fit in it."""
    nodes, (lo, hi) = sub.pin()
    want_lo, want_hi = ask.nodes or (1, ask.tasks())
    out = [] if want_lo <= lo <= hi <= want_hi else [f"node count {lo}-{hi}, outside -N {want_lo}-{want_hi}"]
    if nodes and len(nodes) > hi:
        out.append(f"{len(nodes)} required nodes {compress(nodes)} for at most {hi} nodes")
    if set(nodes) != set(ask.include):  # the advisor's own node list: it must keep every rule
        out += [v for v in _node_set(ask, nodes, cluster, sub.fields.get("Partition", ""))
                if not v.startswith(f"{len(nodes)} nodes")]  # fewer than the minimum: the count above decides
        rows = sorted(cluster.names.index(n) for n in nodes if n in cluster.names)
        if ask.contiguous and rows and rows[-1] - rows[0] + 1 != len(nodes):  # (Slurm 22.05 alone does not
            out.append(f"--contiguous but pinned to {compress(nodes)}")       # always keep it itself)
    return out


def _node_set(ask: Ask, nodes, cluster: Cluster, partition: str) -> list[str]:
    out = []
    count = len(nodes)
    lo, hi = ask.nodes or (1, ask.tasks())
    if not lo <= count <= hi:
        out.append(f"{count} nodes {compress(nodes)}, outside -N {lo}-{hi}")
    if ask.include - set(nodes):
        out.append(f"leaves out -w node(s) {compress(sorted(ask.include - set(nodes)))}")
    if ask.exclude & set(nodes):
        out.append(f"uses -x node(s) {compress(sorted(ask.exclude & set(nodes)))}")
    allowed = ask.partitions or (cluster.default_partition,)
    used = [p for p in partition.split(",") if p]
    if set(used) - set(allowed):
        out.append(f"runs in partition {partition}, not in {','.join(allowed)}")
    elif used and set(nodes) - {n for p in used for n in cluster.partitions.get(p, ())}:
        out.append(f"nodes outside partition {partition}: {compress(nodes)}")
    return out


def _per_node(ask: Ask, sub: Submitted, cluster: Cluster) -> list[str]:
    """Per node: the tasks Slurm lays out there and what it allocated them. --exclusive gives a
    node's every CPU and GPU, so GPU counts are then minimums."""
    out = []
    alloc, tasks = sub.allocation, sub.tasks
    if set(tasks) != set(alloc):
        out.append(f"Slurm lays out tasks on {compress(tasks)}, allocated {compress(alloc)}")

    def exact(got: int, want: int) -> bool:
        return got >= want if ask.exclusive else got == want

    for node, got in alloc.items():
        n = tasks.get(node, 0)
        if ask.per_node is not None and n > ask.per_node:
            out.append(f"{n} tasks on {node}, more than --ntasks-per-node={ask.per_node}")
        if got.cpus < n * ask.cpus:
            out.append(f"{got.cpus} CPUs on {node} for {n} tasks of {ask.cpus}")
        if ask.gpus_per_node and not exact(got.gpus, ask.gpus_per_node):
            out.append(f"{got.gpus} GPUs on {node}, not the {ask.gpus_per_node} per node asked")
        if ask.gpus_per_task and not exact(got.gpus, n * ask.gpus_per_task):
            out.append(f"{got.gpus} GPUs on {node} for {n} tasks of {ask.gpus_per_task}")
        if ask.exclusive and got.cpus != cluster.capacity[node].cpus:
            out.append(f"--exclusive but {got.cpus} CPUs of {node}")
        if ask.mem is not None and got.mem_mb < ask.mem:
            out.append(f"{got.mem_mb} MB on {node}, less than --mem={ask.mem}")
        if ask.mem_per_cpu is not None and got.mem_mb < ask.mem_per_cpu * got.cpus:
            out.append(f"{got.mem_mb} MB on {node} for {got.cpus} CPUs at --mem-per-cpu={ask.mem_per_cpu}")
    gpus = sum(r.gpus for r in alloc.values())
    if ask.gpus and gpus < ask.gpus:  # (with --ntasks-per-node, Slurm alone may give more)
        out.append(f"{gpus} GPUs in all, not the --gpus={ask.gpus} asked")
    for node, n in sub.layout.items():  # where the advisor's layout starts the tasks
        got = alloc.get(node)
        if got is None:
            out.append(f"the layout puts {n} tasks on {node}, outside the allocation")
        elif (ask.per_node is not None and n > ask.per_node) or got.cpus < n * ask.cpus \
                or got.gpus < n * ask.gpus_per_task:
            out.append(f"the layout puts {n} tasks on {node} ({got.cpus} CPUs, {got.gpus} GPUs there)")
    if sub.layout and sum(sub.layout.values()) != ask.tasks():
        out.append(f"the layout has {sum(sub.layout.values())} tasks, not {ask.tasks()}")
    return out
