"""What the structured speed model sees of one job's placement (numpy; no torch here).

Only what a live cluster logs: the job's request, its tasks' nodes and roles, the jobs sharing
those nodes (a sample's ``neighbours``) and the nodes' capacities and switches. Per node of the
job: its own tasks there, the other jobs' tasks there by type slot, their share of the node's
CPUs, GPUs and memory, how many of them span nodes (they share the node's NIC), the node's
CPU allocation, and the node's own slot (``vocab.node_slot``: its fitted pace). Per job: the
communication of one iteration in units of the job's gradient,
as the placement shapes it -- a ring's ``2 (n-1)/n`` over its most shared NIC, a PS job's remote
and local worker-PS exchanges on its busiest node, the PS update work ``W/P`` -- whether it
crosses switches and how many of the visible jobs cross the same switch uplinks (the jobs that
share no node with it are not logged with a sample, so a local model cannot see them).
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from slurm_advisor.domain import Job, Node, RunningJob
from slurm_advisor.domain.jobtypes import profile_for, reference_speed
from slurm_advisor.learned.vocab import TypeVocab

# per-job scalars the parametric part reads
LOG_W, P_C, P_M, RING, INTRA, PS_NET, PS_LOC, UPDATE, CROSS, UPLINK, ALLREDUCE = range(11)
N_SCALARS = 11
# per-node columns
IS_W, IS_PS, OWN, CPU_O, GPU_O, MEM_O, NIC, ALLOC = range(8)
N_NODE = 8
N_RESID = 24


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
                vocab: TypeVocab) -> JobContext:
    job = subject.job
    per_node = subject.placement.per_node()
    k, n_slots = len(per_node), vocab.n_slots
    row = {name: i for i, (name, _, _) in enumerate(per_node)}
    nodes = np.zeros((k, N_NODE), dtype=np.float32)
    counts = np.zeros((k, n_slots), dtype=np.float32)
    used = np.zeros((k, 3), dtype=np.float64)
    my_switches = {node_of[n].switch for n, _, _ in per_node}
    uplink: dict[str | None, int] = {}
    for nb in neighbours:
        nb_nodes = nb.placement.per_node()
        multi = len(nb_nodes) > 1
        slot = vocab.slot(nb.job.type)
        for name, n_ps, n_w in nb_nodes:
            i = row.get(name)
            if i is None:
                continue
            d_ps, d_w = nb.job.ps_demand, nb.job.worker_demand
            used[i] += (n_ps * d_ps.cpus + n_w * d_w.cpus, n_ps * d_ps.gpus + n_w * d_w.gpus,
                        n_ps * d_ps.mem_mb + n_w * d_w.mem_mb)
            counts[i, slot] += n_w + 0.5 * n_ps
            nodes[i, NIC] += multi
        if multi and len(my_switches) > 1:
            theirs = {node_of[n].switch for n, _, _ in nb_nodes if n in node_of}
            if len(theirs) > 1:
                for s in theirs & my_switches:
                    uplink[s] = uplink.get(s, 0) + 1
    d_ps, d_w = job.ps_demand, job.worker_demand
    for i, (name, n_ps, n_w) in enumerate(per_node):
        node = node_of[name]
        cpus, gpus, mem = max(1, node.cpus), max(1, node.gpus), max(1, node.mem_mb)
        own_cpu = n_ps * d_ps.cpus + n_w * d_w.cpus
        nodes[i, :NIC] = (n_w > 0, n_ps > 0, n_ps + n_w - 1, used[i, 0] / cpus, used[i, 1] / gpus,
                          used[i, 2] / mem)
        nodes[i, ALLOC] = (own_cpu + used[i, 0]) / cpus
    scalars = _comm(job, per_node, nodes[:, NIC], len(my_switches) > 1, max(uplink.values(), default=0))
    node_slot = np.array([vocab.node_slot(name) for name, _, _ in per_node], dtype=np.int64)
    return JobContext(vocab.slot(job.type), scalars, nodes, counts, _resid(job, per_node, nodes, scalars, node_of),
                      node_slot)


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
    return job_context(sample.subject, sample.neighbours, {n.name: n for n in sample.nodes}, vocab)


def running_contexts(nodes: Sequence[Node], running: Sequence[RunningJob], targets: Sequence[RunningJob],
                     vocab: TypeVocab) -> list[JobContext]:
    """The contexts of ``targets`` among ``running``: their neighbours are the jobs sharing a node."""
    node_of = {n.name: n for n in nodes}
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
        out.append(job_context(rj, seen.values(), node_of, vocab))
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
