"""Property: every pin the advisor writes honours the job's request as the user wrote it.

Random clusters (2-40 nodes of a few shapes, partitions, features, optional leaf switches),
random loads, and random ``sbatch`` option sets drawn as the job_submit hook sends them
(``-n``, ``-N`` fixed and ranges, ``--ntasks-per-node``, ``-c``, ``--mem``, ``--mem-per-cpu``,
``--gpus-per-task``, ``--gpus-per-node``, ``-w``, ``-x``, ``--exclusive``, ``-p``,
``--contiguous``, ``--switches``, ``-C``, and now and then an option the advisor does not model
or one that keeps the job from starting now), through ``AdviceService.advise`` in advise and
enforce mode with every registered policy that builds without a trained model, and through
``Advisor.advise`` alone.

What "honours" means is written here once more from the options themselves (:func:`broken`),
not read from ``JobRequest.violations``, so that a bug there is caught too. Hypothesis runs
derandomized: the same examples on every run.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field, replace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from slurm_advisor.advisor import Advisor
from slurm_advisor.daemon.protocol import ProtocolError, parse_layout
from slurm_advisor.daemon.service import AdviceService
from slurm_advisor.domain import ClusterSnapshot, Node, Resources
from slurm_advisor.errors import InputError
from slurm_advisor.policies import BASELINES, FROM_MODEL, POLICIES, make_policy
from slurm_advisor.policies.base import Hold
from slurm_advisor.policies.slurm_default import SlurmDefaultPolicy
from slurm_advisor.slurm import hostlist
from slurm_advisor.slurm.expressible import express
from slurm_advisor.slurm.marker import MarkerError
from slurm_advisor.slurm.request import Mismatch, read

NO_VAL, NO_VAL16 = 4294967294, 65534
NOW = 1_700_000_000.0
SHAPES = ((8, 4, 32_000), (16, 8, 64_000), (4, 0, 16_000), (32, 8, 128_000), (8, 2, 32_000))
#: a node's partitions; the last: in none (a node ``scontrol show nodes`` lists outside every partition)
PARTITION_SETS = (frozenset({"batch"}), frozenset({"batch", "gpu"}), frozenset({"gpu"}), frozenset({"batch"}),
                  frozenset({"debug"}), frozenset())
FEATURE_SETS = (frozenset(), frozenset({"a100"}), frozenset({"a100", "ib"}), frozenset({"ib"}),
                frozenset({"bigmem"}))
#: the numeric fields sbatch leaves unset, as the hook passes them on (slurm_init_job_desc_msg, 22.05)
SENTINELS = {"ntasks_per_node": NO_VAL16, "shared": NO_VAL16, "contiguous": NO_VAL16, "req_switch": NO_VAL,
             "wait4switch": NO_VAL, "priority": NO_VAL, "pn_min_cpus": NO_VAL16, "pn_min_tmp_disk": NO_VAL,
             "max_cpus": NO_VAL, "core_spec": NO_VAL16, "ntasks_per_socket": NO_VAL16,
             "ntasks_per_core": NO_VAL16, "sockets_per_node": NO_VAL16, "cores_per_socket": NO_VAL16,
             "threads_per_core": NO_VAL16, "begin_time": 0}
#: options the advisor does not model: the job must then be left to Slurm
UNMODELLED = ({"tres_per_job": "gres:gpu:2"}, {"reservation": "maint"}, {"ntasks_per_socket": 2},
              {"mem_per_tres": "gres:gpu:4000"}, {"tres_per_node": "gres:gpu:a100:1"})
#: what keeps a job from starting now whatever its nodes (--hold, --dependency, --begin)
LATER = ({"priority": 0}, {"dependency": "afterok:7"}, {"begin_time": 2_100_000_000})  # --begin=2036-07-18


# -- what the test draws --------------------------------------------------------------------------
@dataclass(frozen=True)
class Cluster:
    snapshot: ClusterSnapshot
    default_partition: str | None

    def __repr__(self) -> str:  # what a failing example shows: every node and its free capacity
        rows = [f"{n.name} {n.cpus}c{n.gpus}g{n.mem_mb}m {n.switch or '-'} {'&'.join(sorted(n.features)) or '-'} "
                f"{','.join(sorted(n.partitions)) or '-'} free {tuple(free)}"
                for n, free in zip(self.snapshot.nodes, self.snapshot.free_array().tolist())]
        return f"Cluster(default_partition={self.default_partition!r}, nodes={rows})"

    def _repr_pretty_(self, printer, cycle) -> None:  # Hypothesis prints examples with this
        printer.text(repr(self))

    @property
    def partitioned(self) -> bool:
        return any(n.partitions for n in self.snapshot.nodes)

    @property
    def has_switches(self) -> bool:
        return any(n.switch for n in self.snapshot.nodes)


@dataclass(frozen=True)
class Options:
    """One job's sbatch options as the user wrote them (None / empty: not given)."""

    ps: int
    workers: int
    ntasks_given: bool = True                    # -n
    nodes: tuple[int, int | None] | None = None  # -N lo[-hi]
    ntasks_per_node: int | None = None
    cpus_per_task: int | None = None             # -c
    mem_per_cpu: int | None = None
    mem: int | None = None                       # --mem (per node)
    gpus_per_task: int | None = None
    gpus_per_node: int | None = None             # --gpus-per-node or --gres=gpu:K
    nodelist: frozenset[str] = frozenset()       # -w
    exclude: frozenset[str] = frozenset()        # -x
    shared: int | None = None                    # 0: --exclusive, 1: --oversubscribe
    partition: str | None = None                 # -p, maybe a comma list
    contiguous: bool = False
    switches: int | None = None
    constraint: frozenset[str] = frozenset()     # -C a&b
    extra: dict = field(default_factory=dict)    # an unmodelled option, or one that defers the start

    @property
    def tasks(self) -> int:
        return self.ps + self.workers


@dataclass(frozen=True)
class Case:
    cluster: Cluster
    opts: Options
    fields: dict          # what the hook sends for opts
    hold_cap: int         # the node-count cap HoldsForFewerNodes waits for
    seed: int             # the policies' generator


@st.composite
def clusters(draw) -> Cluster:
    """Nodes of a few shapes; a shape's nodes mostly share partitions and features, as a site's
    node types do; switches over consecutive nodes; a random load on each node or none."""
    count = draw(st.integers(2, 40))
    partitioned = draw(st.booleans())
    switches = draw(st.integers(0, 4))
    kinds = [(shape, draw(st.sampled_from(PARTITION_SETS)), draw(st.sampled_from(FEATURE_SETS))) for shape in SHAPES]
    nodes, free = [], {}
    for i in range(count):
        (cpus, gpus, mem), partitions, features = draw(st.sampled_from(kinds))
        partitions = draw(st.sampled_from((partitions,) * 4 + PARTITION_SETS)) if partitioned else frozenset()
        features = draw(st.sampled_from((features,) * 4 + FEATURE_SETS))
        name = f"n{i + 1}"
        nodes.append(Node(name, cpus, gpus, mem, f"s{i * switches // count + 1}" if switches else None,
                          features, partitions))
        used = draw(st.one_of(st.just((0, 0, 0)), st.tuples(st.integers(0, cpus), st.integers(0, gpus),
                                                             st.integers(0, mem // 1000))))
        free[name] = Resources(cpus - used[0], gpus - used[1], mem - used[2] * 1000)
    default = draw(st.sampled_from(("batch", "gpu", "debug", None))) if partitioned else None
    return Cluster(ClusterSnapshot(nodes, free), default)


def rarely(values: tuple, otherwise):
    """One of ``values`` one time in five, else ``otherwise`` (what a failing example shrinks to)."""
    return st.integers(0, 5 * len(values) - 1).map(lambda k: values[k - 4 * len(values)]
                                                  if k >= 4 * len(values) else otherwise)


def maybe(strategy):
    """None (the option not given) two times in three."""
    return st.one_of(st.none(), st.none(), strategy)


@st.composite
def options(draw, names: list[str]) -> Options:
    """One job's options; half the jobs ask only what leaves Slurm its own per-node choice (no
    -w, --ntasks-per-node, --mem, --gpus-per-node, --exclusive, --contiguous, --switches): those
    are the jobs a policy's hold may cap."""
    ps, workers = draw(st.integers(0, 2)), draw(st.integers(1, 12))
    tasks = ps + workers
    node_sets = st.frozensets(st.sampled_from(names), min_size=1, max_size=3)
    nodes = draw(maybe(st.one_of(
        st.integers(1, min(tasks, 6)).map(lambda k: (k, k)),
        st.tuples(st.integers(1, 4), st.integers(0, 4)).map(lambda t: (t[0], t[0] + t[1])),
        st.integers(1, 4).map(lambda k: (k, None)))))
    opts = Options(
        ps, workers, ntasks_given=draw(st.sampled_from((True, True, True, False))), nodes=nodes,
        cpus_per_task=draw(maybe(st.integers(1, 4))), mem_per_cpu=draw(maybe(st.integers(1, 8).map(lambda k: k * 500))),
        gpus_per_task=draw(maybe(st.integers(1, 2))), exclude=draw(maybe(node_sets)) or frozenset(),
        partition=draw(maybe(st.sampled_from(("batch", "gpu", "debug", "batch,gpu")))),
        constraint=draw(st.sampled_from((frozenset(),) * 4 + FEATURE_SETS[1:])),
        extra=draw(rarely(UNMODELLED + LATER, {})))
    if not draw(st.booleans()):
        return opts
    return replace(
        opts, ntasks_per_node=draw(maybe(st.integers(1, tasks))),
        mem=None if opts.mem_per_cpu else draw(maybe(st.integers(1, 48).map(lambda k: k * 1000))),  # not both
        gpus_per_node=draw(maybe(st.integers(1, 8))), nodelist=draw(maybe(node_sets)) or frozenset(),
        shared=draw(maybe(st.sampled_from((0, 1)))), contiguous=draw(st.sampled_from((False, False, True))),
        switches=draw(maybe(st.integers(1, 2))))


@st.composite
def cases(draw) -> Case:
    cluster = draw(clusters())
    opts = draw(options([n.name for n in cluster.snapshot.nodes]))
    fields = hook_fields(opts, cluster, draw(st.booleans()), draw(st.integers(0, 2)))
    return Case(cluster, opts, fields, hold_cap=draw(st.integers(1, 3)), seed=draw(st.integers(0, 2**16)))


def hook_fields(opts: Options, cluster: Cluster, sentinels: bool, spelling: int) -> dict:
    """The fields job_submit.lua sends for ``opts``; ``sentinels``: unset numbers as Slurm holds them
    (NO_VAL, NO_VAL16) rather than null; ``spelling``: 22.05's ``gres:gpu:K``, 24.11's ``gres/gpu:K``
    (with ``cpu=c`` in tres_per_task), or ``gres/gpu=K``."""
    gres = ("gres:gpu:{}", "gres/gpu:{}", "gres/gpu={}")[spelling]
    out: dict = dict(SENTINELS) if sentinels else {}
    order = cluster.snapshot.index
    out.update({
        "comment": f"x slurm-advisor: type=resnet50 ps={opts.ps} workers={opts.workers}", "user_id": 1000,
        "num_tasks": opts.tasks if opts.ntasks_given else None, "cpus_per_task": opts.cpus_per_task,
        "partition": opts.partition, "time_limit": 60,
        "req_nodes": hostlist.compress(sorted(opts.nodelist, key=order)) if opts.nodelist else None,
        "exc_nodes": ",".join(sorted(opts.exclude)) if opts.exclude else None,
        "features": "&".join(sorted(opts.constraint)) or None,
    })
    if opts.nodes is not None:
        out["min_nodes"], out["max_nodes"] = opts.nodes
    for name, value in (("ntasks_per_node", opts.ntasks_per_node), ("shared", opts.shared),
                        ("req_switch", opts.switches), ("contiguous", 1 if opts.contiguous else None)):
        if value is not None:
            out[name] = value
    if opts.switches is not None:
        out["wait4switch"] = 300
    if opts.mem_per_cpu is not None:
        out["pn_min_memory"], out["mem_per_cpu"] = opts.mem_per_cpu, True
    elif opts.mem is not None:
        out["pn_min_memory"], out["mem_per_cpu"] = opts.mem, False
    if opts.gpus_per_task is not None:
        cpu = f"cpu={opts.cpus_per_task}," if spelling == 1 and opts.cpus_per_task else ""
        out["tres_per_task"] = cpu + gres.format(opts.gpus_per_task)
    if opts.gpus_per_node is not None:
        out["tres_per_node"] = gres.format(opts.gpus_per_node)
    out.update(opts.extra)
    return out


# -- what "honours the request" means, from the options alone --------------------------------------
def broken(cluster: Cluster, opts: Options, layout: list[tuple[str, str]], partition: str | None) -> list[str]:
    """What ``layout`` ((role, node) per task) breaks of ``opts`` on ``cluster`` as it was before the
    job; ``partition``: the one(s) the job runs in (None: not checked)."""
    snap = cluster.snapshot
    out = []
    roles = Counter(role for role, _ in layout)
    if (roles["ps"], roles["worker"]) != (opts.ps, opts.workers):
        out.append(f"tasks {dict(roles)}, not ps={opts.ps} workers={opts.workers}")
    per_node = Counter(node for _, node in layout)
    if any(n not in snap.layout.index for n in per_node):
        return [*out, f"unknown nodes in {sorted(per_node)}"]
    lo, hi = opts.nodes if opts.nodes is not None else (1, None)
    if not lo <= len(per_node) <= (hi or len(per_node)):
        out.append(f"{len(per_node)} nodes, not in -N {lo}-{hi or ''}")
    if opts.nodelist - set(per_node):
        out.append(f"-w nodes left out: {sorted(opts.nodelist - set(per_node))}")
    if opts.exclude & set(per_node):
        out.append(f"-x nodes used: {sorted(opts.exclude & set(per_node))}")
    index = sorted(snap.index(n) for n in per_node)
    if opts.contiguous and index != list(range(index[0], index[0] + len(index))):
        out.append(f"not contiguous: {index}")
    if opts.switches is not None and len({snap.node(n).switch for n in per_node}) > opts.switches:
        out.append(f"more than {opts.switches} switches")
    if partition is not None and not any(all(p in snap.node(n).partitions for n in per_node)
                                         for p in partition.split(",")):
        out.append(f"nodes outside partition {partition}")
    c = opts.cpus_per_task or 1
    for name, k in per_node.items():
        node, free = snap.node(name), snap.free[name]
        if opts.ntasks_per_node is not None and k > opts.ntasks_per_node:
            out.append(f"{k} tasks on {name}, more than --ntasks-per-node={opts.ntasks_per_node}")
        if not opts.constraint <= node.features:
            out.append(f"{name} lacks features {sorted(opts.constraint - node.features)}")
        if opts.shared == 0 and free != node.capacity:
            out.append(f"--exclusive on {name}, which is not idle")
        gpus = max(k * (opts.gpus_per_task or 0), opts.gpus_per_node or 0)
        mem = k * c * opts.mem_per_cpu if opts.mem_per_cpu else opts.mem or 0
        if k * c > free.cpus or gpus > free.gpus or mem > free.mem_mb:
            out.append(f"{name}: {k} tasks of -c {c} need {k * c} CPUs, {gpus} GPUs, {mem} MB; free {free}")
    return out


def cap_broken(cluster: Cluster, opts: Options, cap: int, partition: str | None) -> list[str]:
    """What a node-count cap breaks: outside the user's -N range, or a job that runs on the empty
    cluster within its request but not on ``cap`` nodes of it (Slurm then rejects it at submission:
    "Requested node configuration is not available")."""
    lo, hi = opts.nodes if opts.nodes is not None else (1, None)
    out = [] if lo <= cap <= (hi or cap) else [f"cap {cap} outside -N {lo}-{hi or ''}"]
    c = opts.cpus_per_task or 1
    slots = []
    for node in cluster.snapshot.nodes:
        if (node.name in opts.exclude or not opts.constraint <= node.features
                or (partition is not None and not any(p in node.partitions for p in partition.split(",")))):
            continue
        fits = [node.cpus // c, opts.ntasks_per_node or opts.tasks]
        if opts.gpus_per_task:
            fits.append(node.gpus // opts.gpus_per_task)
        if opts.mem_per_cpu:
            fits.append(node.mem_mb // (c * opts.mem_per_cpu))
        if (opts.gpus_per_node or 0) > node.gpus or (opts.mem or 0) > node.mem_mb:
            fits.append(0)
        slots.append(min(fits))
    slots.sort(reverse=True)
    if sum(slots[:hi or opts.tasks]) >= opts.tasks > sum(slots[:cap]):
        out.append(f"the job fits on its partition's empty nodes, but never on {cap}: task slots {slots}")
    return out


def runs_in(cluster: Cluster, opts: Options) -> str | None:
    """The partition(s) Slurm runs the job in; None where the cluster knows no partitions."""
    if not cluster.partitioned:
        return None
    return opts.partition or cluster.default_partition or "(Slurm's default, unknown to the advisor)"


# -- the policies ----------------------------------------------------------------------------------
class HoldsForFewerNodes:
    """A test policy that always waits for a node-count cap, as ``search`` may: the ``cap`` path."""

    name = "holds"

    def __init__(self, cap: int):
        self.cap = cap

    def place(self, snapshot, job, rng):
        return Hold("waits for fewer nodes", max_nodes=self.cap)

    def score_nodes(self, snapshot, job):
        return {}


#: registered policies that load a trained model (torch): not baselines of this test
LEARNED = {*FROM_MODEL, "search"}


def baselines() -> list:
    """Every registered policy that builds without a model: not the learned ones, nor the oracle
    (it needs the simulator's ground-truth speed model)."""
    out = []
    for name in POLICIES:
        if name in LEARNED:
            continue
        try:
            out.append(make_policy(name))
        except InputError:
            continue
    return out


BUILT = baselines()


def test_the_policies_under_test_are_every_baseline() -> None:
    assert set(BASELINES) <= {p.name for p in BUILT}


def service(cluster: Cluster, policy) -> AdviceService:
    return AdviceService(Advisor(policy, fallback=SlurmDefaultPolicy()), express, has_switches=cluster.has_switches,
                         default_partition=cluster.default_partition)


def advise(cluster: Cluster, policy, fields: dict, mode: str, seed: int = 0) -> tuple[dict, object]:
    """(reply, decision) of the daemon's service for the hook's ``fields``."""
    reply, decision, _, _ = service(cluster, policy).advise(cluster.snapshot, dict(fields), mode,
                                                            decision_id="d-000000000001",
                                                            rng=np.random.default_rng(seed))
    return reply, decision


def check_reply(cluster: Cluster, opts: Options, reply: dict, decision) -> None:
    """The reply and decision for one job honour ``opts`` (see the module docstring)."""
    action = reply["action"]
    assert action in ("place", "cap", "observe"), reply
    if action == "place":
        assert not opts.extra, f"an unmodelled or deferred job was pinned: {opts.extra}"
        layout = [(role, node) for role, nodes in parse_layout(reply["layout"]).items() for node in nodes]
        assert sorted(layout) == sorted(decision.layout)
        problems = broken(cluster, opts, list(decision.layout), runs_in(cluster, opts))
        assert problems == [], f"pin {reply['nodes']} ({reply['layout']}) breaks the request: {problems}"
        distinct = {node for _, node in layout}
        assert set(hostlist.expand(reply["nodes"])) == distinct
        assert reply["min_nodes"] == reply["max_nodes"] == len(distinct)
        assert reply["num_tasks"] == opts.tasks
    elif action == "cap":
        assert reply["mode"] == "enforce" and not opts.extra
        assert reply["max_nodes"] >= (opts.nodes[0] if opts.nodes is not None else 1)
        problems = cap_broken(cluster, opts, reply["max_nodes"], runs_in(cluster, opts))
        assert problems == [], f"cap {reply['max_nodes']} breaks the request: {problems}"


PROPERTY = settings(derandomize=True, database=None, max_examples=300, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@PROPERTY
@given(cases())
def test_every_pin_and_cap_honours_the_request_as_written(case: Case) -> None:
    for policy in (*BUILT, HoldsForFewerNodes(case.hold_cap)):
        for mode in ("advise", "enforce"):
            try:
                reply, decision = advise(case.cluster, policy, case.fields, mode, case.seed)
            except ProtocolError:
                return  # refused (the marker and the task count disagree): the hook leaves the job be
            check_reply(case.cluster, case.opts, reply, decision)


@PROPERTY
@given(cases())
def test_the_advisor_alone_places_only_within_the_request(case: Case) -> None:
    cluster, opts = case.cluster, case.opts
    try:
        sub = read(case.fields, now=NOW)
    except (Mismatch, MarkerError):
        return  # the daemon refuses the job
    if sub.unmodelled:
        return
    job = sub.job("j-1")
    # the partition only where the user named one: the advisor alone does not know Slurm's default
    partition = opts.partition if cluster.partitioned and opts.partition and "," not in opts.partition else None
    for policy in BUILT:
        advice = Advisor(policy, fallback=SlurmDefaultPolicy()).advise(cluster.snapshot, job,
                                                                       np.random.default_rng(case.seed))
        if advice.placement is None:
            continue
        assert job.request.violations(cluster.snapshot, advice.placement) == []
        layout = [(t.role.value, t.node) for t in advice.placement.tasks]
        problems = broken(cluster, opts, layout, partition)
        assert problems == [], f"{policy.name} placed {layout}: {problems} (violations() saw none)"


# -- the issue's own lines on the 4-node testbed, idle and partly busy -----------------------------
TESTBED = tuple(Node(f"n{i}", 8, 4, 32_000, partitions=frozenset({"batch"})) for i in range(1, 5))
LOADS = {
    "idle": {},
    # half of n1's GPUs taken (the --gpus-per-node=4 job that waited 21 s), n3 full
    "busy": {"n1": Resources(2, 2, 4000), "n3": Resources(8, 4, 32_000)},
}
ISSUE_LINES = {
    "-N 2 --exclude=n1 -n 8 -c 1 --mem-per-cpu=1000 (ps=2 workers=6)":
        Options(2, 6, nodes=(2, 2), exclude=frozenset({"n1"}), cpus_per_task=1, mem_per_cpu=1000),
    "-N 2 --ntasks-per-node=4 -n 8": Options(0, 8, nodes=(2, 2), ntasks_per_node=4),
    "-N 2 --ntasks-per-node=4 --gpus-per-node=4 (ps=0 workers=8)":
        Options(0, 8, ntasks_given=False, nodes=(2, 2), ntasks_per_node=4, gpus_per_node=4),
    "-w n4 -n 2": Options(0, 2, nodelist=frozenset({"n4"})),
    "-w n2 --exclude=n1 -n 2": Options(0, 2, nodelist=frozenset({"n2"}), exclude=frozenset({"n1"})),
    "-N 2 -n 2": Options(0, 2, nodes=(2, 2)),
    "-N 2 --gpus-per-node=2 -n 4": Options(0, 4, nodes=(2, 2), gpus_per_node=2),
    "-N 1 --gpus-per-node=4 -n 4": Options(0, 4, nodes=(1, 1), gpus_per_node=4),
    "-n 4 --gpus-per-task=1 --exclusive -N 2": Options(0, 4, nodes=(2, 2), gpus_per_task=1, shared=0),
}


@pytest.mark.parametrize("load", sorted(LOADS))
@pytest.mark.parametrize("line", sorted(ISSUE_LINES))
def test_the_issues_lines_are_pinned_only_as_written(line, load) -> None:
    taken = LOADS[load]
    cluster = Cluster(ClusterSnapshot(TESTBED, {n.name: n.capacity - taken.get(n.name, Resources()) for n in TESTBED}),
                      "batch")
    opts = ISSUE_LINES[line]
    hold = HoldsForFewerNodes(opts.nodes[0] if opts.nodes else 1)  # a cap inside -N: the widening one is below
    for spelling in range(3):
        fields = hook_fields(opts, cluster, sentinels=True, spelling=spelling)
        for policy in (*BUILT, hold):
            for mode in ("advise", "enforce"):
                reply, decision = advise(cluster, policy, fields, mode)
                check_reply(cluster, opts, reply, decision)


# -- the examples the property found, shrunk: each was a bug, fixed since ---------------------------
def two_nodes(first: frozenset[str], second: frozenset[str], default: str | None = "batch") -> Cluster:
    nodes = (Node("n1", 8, 4, 32_000, partitions=first), Node("n2", 8, 4, 32_000, partitions=second))
    return Cluster(ClusterSnapshot.empty(nodes), default)


def test_a_node_in_no_partition_first_does_not_open_every_node() -> None:
    # n1 is in no partition (scontrol show nodes lists it so); the job runs in the default one, batch
    # (this pinned it to n1: only the first node was asked whether the cluster names partitions)
    cluster, opts = two_nodes(frozenset(), frozenset({"batch"})), Options(0, 1, ntasks_per_node=1)
    reply, decision = advise(cluster, SlurmDefaultPolicy(), hook_fields(opts, cluster, True, 0), "advise")
    assert (reply["action"], reply["nodes"]) == ("place", "n2")
    check_reply(cluster, opts, reply, decision)


def test_a_first_node_in_some_partition_keeps_the_partition() -> None:
    # the same job with n1 in another partition: pinned inside batch
    cluster, opts = two_nodes(frozenset({"debug"}), frozenset({"batch"})), Options(0, 1, ntasks_per_node=1)
    reply, decision = advise(cluster, SlurmDefaultPolicy(), hook_fields(opts, cluster, True, 0), "advise")
    assert (reply["action"], reply["nodes"]) == ("place", "n2")
    check_reply(cluster, opts, reply, decision)


def test_a_cap_never_widens_the_users_node_count() -> None:
    # a hold's cap of 2 for -N 1 was sent as --nodes=1-2
    cluster, opts = two_nodes(frozenset(), frozenset(), None), Options(0, 2, nodes=(1, 1))
    reply, decision = advise(cluster, HoldsForFewerNodes(2), hook_fields(opts, cluster, True, 0), "enforce")
    assert reply["action"] == "observe"
    check_reply(cluster, opts, reply, decision)


def test_more_nodes_than_the_markers_tasks_is_answered() -> None:
    # -N 2 without -n, a marker of one task: Slurm's node choice raised ValueError for a 1-task job on
    # 2 nodes, so the daemon answered an error and recorded no decision
    cluster, opts = two_nodes(frozenset(), frozenset(), None), Options(0, 1, ntasks_given=False, nodes=(2, 2))
    reply, decision = advise(cluster, SlurmDefaultPolicy(), hook_fields(opts, cluster, True, 0), "advise")
    assert reply["action"] == "observe" and "unmodelled option: -N/--nodes" in reply["reason"]
    check_reply(cluster, opts, reply, decision)


@pytest.mark.parametrize("opts", [
    Options(0, 12, partition="gpu"), Options(0, 12, constraint=frozenset({"ib"})),
    Options(0, 12, exclude=frozenset({"n1"})),
], ids=["-p gpu", "-C ib", "-x n1"])
def test_a_cap_fits_the_nodes_the_request_allows(opts) -> None:
    # only n1 holds 12 tasks; the job's partition, features or -x leave it n2 and n3 (8 CPUs each)
    nodes = (Node("n1", 32, 0, 64_000, partitions=frozenset({"batch"})),
             Node("n2", 8, 0, 32_000, features=frozenset({"ib"}), partitions=frozenset({"gpu", "batch"})),
             Node("n3", 8, 0, 32_000, features=frozenset({"ib"}), partitions=frozenset({"gpu", "batch"})))
    cluster = Cluster(ClusterSnapshot.empty(nodes), "batch")
    reply, decision = advise(cluster, HoldsForFewerNodes(1), hook_fields(opts, cluster, True, 0), "enforce")
    check_reply(cluster, opts, reply, decision)  # today: cap max_nodes=1
