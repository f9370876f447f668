"""What the structured speed model sees of one job's placement (numpy; no torch here).

Only what a live cluster logs: the job's request, its tasks' nodes and roles, the jobs sharing
those nodes (a sample's ``neighbours``) and the nodes' capacities and switches. Per node of the
job: its own tasks there, the other jobs' tasks there by type slot, their share of the node's
CPUs, GPUs and memory, how many of them span nodes (they share the node's NIC), the node's
CPU allocation, and the node's own slot (``vocab.node_slot``: its fitted pace). Per job: the
communication of one iteration in units of the job's gradient,
as the placement shapes it -- a ring's ``2 (n-1)/n`` over its most shared NIC, a PS job's remote
and local worker-PS exchanges on its busiest node, the PS update work ``W/P`` -- whether it
crosses switches and how many of the visible jobs cross the same switch uplinks. Per rack (the
nodes of a leaf switch, from a sample's ``switches``, ``domain.SwitchLoad``): the share of its
GPUs allocated on the racks of the job's workers, and how many known jobs cross its uplink --
rack-wide effects (power caps, oversubscribed uplinks) reach jobs that share no node with the
jobs causing them. Samples logged without switch loads say so (an input of 0), as do clusters
without switches.
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from slurm_advisor.domain import (
    ClusterSnapshot,
    Job,
    Node,
    RunningJob,
    SwitchLoad,
    running_switch_loads,
    switch_loads,
)
from slurm_advisor.domain.cluster import NodeLayout
from slurm_advisor.domain.jobtypes import profile_for, reference_speed
from slurm_advisor.domain.observation import crossed_uplinks, uplink_users
from slurm_advisor.domain.running_jobs import RunningJobs
from slurm_advisor.learned.speed.vocab import TypeVocab

# per-job scalars the parametric part reads
LOG_W, P_C, P_M, RING, INTRA, PS_NET, PS_LOC, UPDATE, CROSS, UPLINK, ALLREDUCE, RACK_BUSY, RACK_UP = range(13)
N_SCALARS = 13
# per-node columns
IS_W, IS_PS, OWN, CPU_O, GPU_O, MEM_O, NIC, ALLOC = range(8)
N_NODE = 8
N_RESID = 28
N_RESID_WITHOUT_RACKS = 24  # speed models fitted before the rack inputs read only the first 24


@dataclass(frozen=True, slots=True)
class JobContext:
    slot: int
    scalars: np.ndarray   # [N_SCALARS]
    nodes: np.ndarray     # [k, N_NODE]
    counts: np.ndarray    # [k, n_slots]: other jobs' tasks on each node, by type slot (a PS counts half)
    resid: np.ndarray     # [N_RESID]: inputs of the learned residual
    node_slot: np.ndarray  # [k] int: each node's pace slot (0: the typical node)


_prior_cache: dict[tuple, tuple[float, float]] = {}


def prior(job: Job) -> tuple[float, float]:
    """Published (or declared) facts: log of a reference step time and of the model size (MB)."""
    key = (job.type, job.model_size_mb, job.batch_size)
    out = _prior_cache.get(key)
    if out is None:
        p = profile_for(job.type, job.model_size_mb, job.batch_size)
        out = (-math.log(reference_speed(p)), math.log1p(p.model_size_mb))
        _prior_cache[key] = out
    return out


def job_context(subject: RunningJob, neighbours: Iterable[RunningJob], node_of: Mapping[str, Node],
                vocab: TypeVocab, racks: Mapping[str, SwitchLoad] | None = None) -> JobContext:
    """``racks``: the load of (at least) the switches of the subject's nodes, the subject
    counted in; None where unknown."""
    job = subject.job
    per_node = subject.placement.per_node()
    k, n_slots = len(per_node), vocab.n_slots
    row = {name: i for i, (name, _, _) in enumerate(per_node)}
    # Accumulated in Python: whole numbers and halves, so the sums are those numpy's arrays held
    # (a numpy element update per neighbour and node cost most of a context).
    used = [[0, 0, 0] for _ in range(k)]  # other jobs' CPUs, GPUs, memory on each node
    nic = [0] * k  # multi-node jobs on each node (they share its NIC)
    counts = [[0.0] * n_slots for _ in range(k)]  # other jobs' tasks by type slot (a PS counts half)
    my_switches = {node_of[n].switch for n, _, _ in per_node}
    crossing = len(my_switches) > 1
    uplink: dict[str | None, int] = {}
    for nb in neighbours:
        nb_nodes = nb.placement.per_node()
        multi = len(nb_nodes) > 1
        slot = vocab.slot(nb.job.type)
        d_ps, d_w = nb.job.ps_demand, nb.job.worker_demand
        for name, n_ps, n_w in nb_nodes:
            i = row.get(name)
            if i is None:
                continue
            u = used[i]
            u[0] += n_ps * d_ps.cpus + n_w * d_w.cpus
            u[1] += n_ps * d_ps.gpus + n_w * d_w.gpus
            u[2] += n_ps * d_ps.mem_mb + n_w * d_w.mem_mb
            counts[i][slot] += n_w + 0.5 * n_ps
            nic[i] += multi
        if multi and crossing:
            theirs = {node_of[n].switch for n, _, _ in nb_nodes if n in node_of}
            if len(theirs) > 1:
                for s in theirs & my_switches:
                    uplink[s] = uplink.get(s, 0) + 1
    d_ps, d_w = job.ps_demand, job.worker_demand
    rows = []
    for i, (name, n_ps, n_w) in enumerate(per_node):
        node = node_of[name]
        cpus, gpus, mem = max(1, node.cpus), max(1, node.gpus), max(1, node.mem_mb)
        u_cpu, u_gpu, u_mem = (float(x) for x in used[i])
        own_cpu = n_ps * d_ps.cpus + n_w * d_w.cpus
        rows.append((n_w > 0, n_ps > 0, n_ps + n_w - 1, u_cpu / cpus, u_gpu / gpus, u_mem / mem, nic[i],
                     (own_cpu + u_cpu) / cpus))
    nodes = np.array(rows, dtype=np.float32).reshape(k, N_NODE)
    scalars = _comm(job, per_node, nodes[:, NIC], crossing, max(uplink.values(), default=0))
    node_slot = np.array([vocab.node_slot(name) for name, _, _ in per_node], dtype=np.int64)
    rack = _rack_inputs(per_node, node_of, racks)
    # the parametric part's rack terms: the busiest worker rack's GPU share, and the other jobs
    # crossing the uplinks this job crosses (0 where the loads are unknown)
    scalars[RACK_BUSY] = rack[1]
    scalars[RACK_UP] = max(0.0, 4.0 * rack[3] - 1.0) if scalars[CROSS] else 0.0
    resid = np.concatenate([_resid(job, per_node, nodes, scalars, node_of), rack])
    return JobContext(vocab.slot(job.type), scalars, nodes, np.array(counts, dtype=np.float32).reshape(k, n_slots),
                      resid, node_slot)


def _rack_inputs(per_node, node_of: Mapping[str, Node], racks: Mapping[str, SwitchLoad] | None) -> np.ndarray:
    """(known, GPU share allocated on the busiest rack holding a worker, mean over the job's
    racks, most jobs crossing one of its racks' uplinks / 4)."""
    job_racks = [racks.get(node_of[n].switch) for n, _, _ in per_node] if racks else []
    if not job_racks or any(r is None for r in job_racks):
        return np.zeros(4, dtype=np.float32)
    on_workers = [r.gpu_busy for r, (_, _, n_w) in zip(job_racks, per_node) if n_w > 0] or [0.0]
    distinct = {r.switch: r for r in job_racks}.values()
    return np.array([1.0, max(on_workers), float(np.mean([r.gpu_busy for r in distinct])),
                     max(r.crossing for r in distinct) / 4.0], dtype=np.float32)


def _comm(job: Job, per_node, nic: np.ndarray, cross: bool, uplink: int) -> np.ndarray:
    w, p, g = job.num_workers, job.num_ps, len(per_node)
    out = np.zeros(N_SCALARS, dtype=np.float32)
    out[LOG_W] = math.log(w)
    out[P_C], out[P_M] = prior(job)
    share = 1.0 + nic  # the job's own traffic and every other multi-node job's on each NIC
    if p == 0:
        local = max(c[2] for c in per_node)
        out[RING] = 2.0 * (g - 1) / g * float(share.max()) if g > 1 else 0.0
        out[INTRA] = 2.0 * (local - 1) / local
        out[ALLREDUCE] = 1.0
    else:
        pair = 2.0 / p
        remote = np.array([ps * (w - wk) + wk * (p - ps) for _, ps, wk in per_node], dtype=np.float32)
        local = np.array([ps * wk for _, ps, wk in per_node], dtype=np.float32)
        out[PS_NET] = float((remote * share).max()) * pair if g > 1 else 0.0
        out[PS_LOC] = float(local.max()) * pair
        out[UPDATE] = w / p
    out[CROSS] = float(cross)
    out[UPLINK] = float(uplink) if cross else 0.0
    return out


def _resid(job: Job, per_node, nodes: np.ndarray, s: np.ndarray, node_of) -> np.ndarray:
    w, g = job.num_workers, len(per_node)
    wk = nodes[:, IS_W] > 0
    on_w = nodes[wk] if wk.any() else nodes
    ps_nodes = nodes[nodes[:, IS_PS] > 0]
    first = node_of[per_node[0][0]]
    most_w = max(c[2] for c in per_node)
    return np.array([
        s[LOG_W], math.log1p(job.num_ps), s[ALLREDUCE], math.log(g), float(g > 1), s[CROSS],
        most_w / w, math.log1p(s[RING]), math.log1p(s[INTRA]), math.log1p(s[PS_NET]), math.log1p(s[PS_LOC]),
        math.log1p(s[UPDATE]), nodes[:, NIC].max() / 4.0, nodes[:, NIC].mean() / 4.0, s[UPLINK] / 4.0,
        on_w[:, CPU_O].max(), on_w[:, CPU_O].mean(), on_w[:, GPU_O].max(), on_w[:, MEM_O].max(),
        ps_nodes[:, ALLOC].max() if len(ps_nodes) else 0.0, s[P_C] / 5.0, s[P_M] / 8.0,
        job.worker_demand.cpus / max(1, first.cpus), job.worker_demand.gpus / max(1, first.gpus),
    ], dtype=np.float32)


def sample_context(sample, vocab: TypeVocab) -> JobContext:
    racks = {w.switch: w for w in sample.switches} or None
    return job_context(sample.subject, sample.neighbours, {n.name: n for n in sample.nodes}, vocab, racks)


class RackLoads:
    """Every switch's load in a snapshot, with jobs started or ended (as a sample would have
    logged it then). The last snapshot's own loads are kept: a decision asks about one snapshot
    many times (each candidate placement, each neighbour), and successive snapshots share their
    running jobs (patched, not recounted). Owned by whoever asks (a speed ensemble)."""

    def __init__(self):
        # (free array, running jobs, layout, their uplink users, GPUs per switch, the loads)
        self._last: tuple = (None, None, None, None, {}, {})

    def __call__(self, snapshot: ClusterSnapshot, add: Iterable[RunningJob] = (),
                 remove: Iterable[RunningJob] = ()) -> dict[str, SwitchLoad]:
        loads, totals = self._of(snapshot)
        changes = [(rj, +1) for rj in add] + [(rj, -1) for rj in remove]
        if not changes or not loads:
            return loads
        out = dict(loads)
        for rj, sign in changes:
            gpus: dict[str, int] = {}  # per switch (nodes on none have no rack: left out, as in uplink_users)
            for n, n_ps, n_w in rj.placement.per_node():
                sw = snapshot.node(n).switch
                if sw is not None:
                    gpus[sw] = gpus.get(sw, 0) + n_ps * rj.job.ps_demand.gpus + n_w * rj.job.worker_demand.gpus
            for sw, g in gpus.items():
                if sw in out and totals.get(sw):
                    w = out[sw]
                    out[sw] = SwitchLoad(sw, w.gpu_busy + sign * g / totals[sw], w.crossing + sign * (len(gpus) > 1))
        return out

    def _of(self, snapshot: ClusterSnapshot) -> tuple[dict[str, SwitchLoad], dict[str, float]]:
        free, running = snapshot.free_array(), snapshot.running_jobs
        cached = self._last  # one read: another thread (the daemon's ready answers) may replace it
        if cached[0] is not free or cached[1] is not running:
            layout = snapshot.layout
            if cached[2] is not layout:
                totals = np.bincount(layout.switch_id, weights=layout.capacity[:, 1].astype(np.float64),
                                     minlength=len(layout.switch_names))
                cached = (None, running, layout, _uplink_users(layout, running),
                          dict(zip(layout.switch_names, totals.tolist())))
            elif cached[1] is not running:
                cached = (None, running, layout, _uplink_users(layout, running), cached[4])
            # a new free array alone (the daemon's claims, a mask): the GPU shares only, O(nodes)
            cached = (free, running, layout, cached[3], cached[4], switch_loads(snapshot, crossing=cached[3]))
            self._last = cached
        return cached[5], cached[4]


def rack_loads(snapshot: ClusterSnapshot, add: Iterable[RunningJob] = (), remove: Iterable[RunningJob] = ()
               ) -> dict[str, SwitchLoad]:
    """``RackLoads`` asked once (nothing kept)."""
    return RackLoads()(snapshot, add, remove)


def _uplink_users(layout: NodeLayout, running: RunningJobs) -> np.ndarray:
    """``uplink_users`` of ``running``, patched from a recent map's by the jobs that started or
    ended since (an event, a claim), or counted over every running job: a walk over 10,000
    running jobs took ~5 ms in a decision of the search."""
    def build(r):
        return uplink_users(layout, r.values())

    def patch(kept, gone, new):
        out = kept.copy()
        for jobs, sign in ((gone, -1), (new, +1)):
            for rj in jobs:
                spanned = crossed_uplinks(layout, rj)
                if spanned:
                    out[spanned] += sign
        return out

    # Kept per layout: a map kept from another cluster (the empty map is one object for all)
    # gave uplink counts of the wrong length, an IndexError in the next test that used them.
    return layout.uplinks.get(running, build, patch)


def running_contexts(nodes: Sequence[Node], running: Sequence[RunningJob], targets: Sequence[RunningJob],
                     vocab: TypeVocab) -> list[JobContext]:
    """The contexts of ``targets`` among ``running``: their neighbours are the jobs sharing a node."""
    node_of = {n.name: n for n in nodes}
    racks = running_switch_loads(nodes, running)
    wanted = {n for rj in targets for n in rj.placement.nodes()}
    on: dict[str, list[RunningJob]] = {}
    for rj in running:
        for n in rj.placement.nodes():
            if n in wanted:
                on.setdefault(n, []).append(rj)
    out = []
    for rj in targets:
        seen: dict[str, RunningJob] = {}
        for n in rj.placement.nodes():
            for other in on.get(n, ()):
                if other.job.id != rj.job.id:
                    seen[other.job.id] = other
        out.append(job_context(rj, seen.values(), node_of, vocab, racks))
    return out


@dataclass(frozen=True)
class Batch:
    """Contexts stacked and padded to the most nodes any job of the batch uses."""

    slot: np.ndarray      # [S] int
    scalars: np.ndarray   # [S, N_SCALARS]
    nodes: np.ndarray     # [S, K, N_NODE]
    counts: np.ndarray    # [S, K, n_slots]
    mask: np.ndarray      # [S, K] 1 where a node is real
    resid: np.ndarray     # [S, N_RESID]
    node_slot: np.ndarray  # [S, K] int (0 on padding)

    @classmethod
    def of(cls, contexts: Sequence[JobContext], n_slots: int) -> Batch:
        s = len(contexts)
        k = max(len(c.nodes) for c in contexts)
        nodes = np.zeros((s, k, N_NODE), dtype=np.float32)
        counts = np.zeros((s, k, n_slots), dtype=np.float32)
        mask = np.zeros((s, k), dtype=np.float32)
        node_slot = np.zeros((s, k), dtype=np.int64)
        for i, c in enumerate(contexts):
            m = len(c.nodes)
            nodes[i, :m], counts[i, :m], mask[i, :m], node_slot[i, :m] = c.nodes, c.counts, 1.0, c.node_slot
        return cls(np.array([c.slot for c in contexts], dtype=np.int64), np.stack([c.scalars for c in contexts]),
                   nodes, counts, mask, np.stack([c.resid for c in contexts]), node_slot)
