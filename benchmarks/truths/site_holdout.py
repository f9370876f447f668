"""A held-out ground truth for the learning benchmarks: site-named job types and a speed law of
a form unlike ``contention``. FROZEN on 2026-12-01, committed before any model was fitted to,
or any policy or hyperparameter was measured or tuned on, its speeds. Never change a constant
here to improve a figure; a truth that has been tuned against is no longer held out: write a
new one instead and freeze it the same way.

It stands for a site the project was not built around: NVLink servers with one 100 GbE NIC
each on 2:1 oversubscribed leaf switches, and job types the site names as it likes (none of
them is in ``slurm_advisor/domain/jobtypes.py``; traces declare no model size). Any other type
name gets parameters derived from a hash of the name, so every trace runs under it.

Per iteration (one worker's minibatch; a job of W workers makes W iterations per step) a
synchronous job takes

    t = max over its worker nodes (compute * host(node)) + comm + ps_update

* ``host(node) = 1 + 0.12 * host_intensity * (1 - exp(-others / 0.3))``: what other jobs'
  tasks take of the node's CPUs (``others``, a share of its cores) slows input pipelines and
  host copies, saturating: a job beside many others is ~10-18 % slower, never multiples
  (Crux, SIGCOMM'24: +11 % for a GPT job beside BERT). Contention's law is linear per resource.
* ``comm``: an all-reduce job (no PS) reduces inside each node over NVLink (240 Gbit/s), then
  runs a ring over its nodes: ``2 (n-1)/n x gradient`` at the slowest share it gets of a NIC
  (100 Gbit/s, shared equally by the multi-node jobs on that node) or, if it spans leaf
  switches, of a switch uplink (``nodes on the switch x NIC / 2``, shared equally by every
  job crossing that switch's uplink: a global effect, which a model that sees only the job's
  own nodes cannot know). Intra- over inter-node bandwidth is 2.4x, as NCCL all-reduce bus
  bandwidth inside vs between two A100 nodes (NVIDIA/nccl-tests#175).
* a PS job: every worker exchanges ``2 x gradient / num_ps`` with every PS; a PS node's NIC
  carries that for every worker not on its node (incast), at its share of the NIC.
* ``ps_update``: each PS sums every worker's shard of the gradient on its own cores, 0.15 s
  per GB (12 bytes moved per 4-byte value at ~20 GB/s of one core's stream bandwidth); when its
  node's CPUs are allocated above 90 % the PS competes with input pipelines for memory
  bandwidth and updates 1.6x slower (a threshold, where contention is linear).
"""
from __future__ import annotations

import math
import zlib

NIC_GBPS = 100.0
NVLINK_GBPS = 240.0
UPLINK_OVERSUB = 2.0
PS_UPDATE_S_PER_GB = 0.15
BUSY_NODE_SHARE = 0.9
BUSY_PS_FACTOR = 1.6
HOST_MAX = 0.12
HOST_SCALE = 0.3

# name: (compute s per iteration on one GPU, gradient MB, host intensity 0.2-1.5)
SITE_TYPES: dict[str, tuple[float, float, float]] = {
    "ctr-ranker-v3": (0.02, 600.0, 1.4),     # embedding-heavy recommender: network and host bound
    "asr-conformer-l": (0.35, 480.0, 0.8),
    "vit-h-pretrain": (0.6, 2500.0, 0.5),    # large dense model: communication heavy
    "seg-unet-3d": (0.9, 120.0, 0.6),        # compute bound
    "gnn-sage-prod": (0.08, 40.0, 1.5),      # neighbour sampling on the host
    "lm-lora-13b": (1.5, 100.0, 0.3),        # adapters: small gradients, long steps
    "diffusion-xl": (0.8, 5000.0, 0.4),      # the most communication-bound
    "tabular-sweep": (0.01, 2.0, 1.0),       # tiny models in hyperparameter sweeps
}


def type_params(name: str) -> tuple[float, float, float]:
    """A site type's parameters; any other name gets a fixed draw from its hash."""
    if name in SITE_TYPES:
        return SITE_TYPES[name]
    h = zlib.crc32(name.encode())
    compute = 0.01 * 10 ** (2.2 * ((h % 1000) / 999.0))           # 0.01 - 1.6 s
    grad = 2.0 * 10 ** (3.4 * (((h // 1000) % 1000) / 999.0))     # 2 MB - 5 GB
    host = 0.2 + 1.3 * (((h // 1_000_000) % 1000) / 999.0)
    return compute, grad, host


class SiteHoldoutSpeeds:
    """The plug-in (``benchmarks/truths/site_holdout.py:SiteHoldoutSpeeds``)."""

    def speeds(self, nodes: list[dict], jobs: list[dict]) -> dict[str, float]:
        by_name = {n["name"]: n for n in nodes}
        per_switch: dict[str, int] = {}
        for n in nodes:
            per_switch[n["switch"]] = per_switch.get(n["switch"], 0) + 1
        cpus_used: dict[str, float] = {}
        cpus_of_job: dict[tuple[str, str], float] = {}
        multi_on_node: dict[str, int] = {}
        crossing: dict[str, int] = {}
        for job in jobs:
            spanned = {t["node"] for t in job["tasks"]}
            for t in job["tasks"]:
                cpus_used[t["node"]] = cpus_used.get(t["node"], 0.0) + t["cpus"]
                key = (job["id"], t["node"])
                cpus_of_job[key] = cpus_of_job.get(key, 0.0) + t["cpus"]
            if len(spanned) > 1:
                for node in spanned:
                    multi_on_node[node] = multi_on_node.get(node, 0) + 1
                switches = {by_name[node]["switch"] for node in spanned}
                if len(switches) > 1:
                    for s in switches:
                        crossing[s] = crossing.get(s, 0) + 1
        out = {}
        for job in jobs:
            compute, grad_mb, host = type_params(job["type"])
            workers = [t for t in job["tasks"] if t["role"] == "worker"]
            slowest = 0.0
            for t in workers:
                node = by_name[t["node"]]
                others = (cpus_used[t["node"]] - cpus_of_job[(job["id"], t["node"])]) / max(1, node["cpus"])
                slowdown = 1.0 + HOST_MAX * host * (1.0 - math.exp(-others / HOST_SCALE))
                slowest = max(slowest, compute * slowdown)
            grad_gb = grad_mb / 1000.0
            if job["num_ps"] == 0:
                comm = self._allreduce(job, grad_gb, by_name, per_switch, multi_on_node, crossing)
                update = 0.0
            else:
                comm, update = self._ps(job, grad_gb, by_name, cpus_used, multi_on_node)
            out[job["id"]] = len(workers) / (slowest + comm + update)
        return out

    @staticmethod
    def _nic_share(node: str, multi_on_node: dict[str, int]) -> float:
        return NIC_GBPS / 8.0 / max(1, multi_on_node.get(node, 1))  # GB/s

    def _allreduce(self, job, grad_gb, by_name, per_switch, multi_on_node, crossing) -> float:
        per_node: dict[str, int] = {}
        for t in job["tasks"]:
            per_node[t["node"]] = per_node.get(t["node"], 0) + 1
        local = max(per_node.values())
        t = 2.0 * (local - 1) / local * grad_gb / (NVLINK_GBPS / 8.0) if local > 1 else 0.0
        n = len(per_node)
        if n == 1:
            return t
        bw = min(self._nic_share(node, multi_on_node) for node in per_node)
        switches = {by_name[node]["switch"] for node in per_node}
        if len(switches) > 1:
            for s in switches:
                uplink = per_switch[s] * NIC_GBPS / 8.0 / UPLINK_OVERSUB
                bw = min(bw, uplink / max(1, crossing.get(s, 1)))
        return t + 2.0 * (n - 1) / n * grad_gb / bw

    def _ps(self, job, grad_gb, by_name, cpus_used, multi_on_node) -> tuple[float, float]:
        ps_nodes = [t["node"] for t in job["tasks"] if t["role"] == "ps"]
        worker_nodes = [t["node"] for t in job["tasks"] if t["role"] == "worker"]
        shard = 2.0 * grad_gb / len(ps_nodes)
        comm = update = 0.0
        for node in set(ps_nodes):
            shards_here = ps_nodes.count(node)
            remote = sum(1 for w in worker_nodes if w != node)
            comm = max(comm, remote * shard * shards_here / self._nic_share(node, multi_on_node))
            busy = cpus_used[node] / max(1, by_name[node]["cpus"]) > BUSY_NODE_SHARE
            per_ps = PS_UPDATE_S_PER_GB * grad_gb * len(worker_nodes) / len(ps_nodes)
            update = max(update, per_ps * (BUSY_PS_FACTOR if busy else 1.0))
        # a worker on a node with no PS also waits for its own NIC: all shards cross it
        for node in set(worker_nodes) - set(ps_nodes):
            comm = max(comm, shard * len(ps_nodes) / self._nic_share(node, multi_on_node))
        return comm, update
