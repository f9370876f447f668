"""A ground truth for the closed-loop benchmark that no part of the project was designed around.
FROZEN on 2026-12-08, committed before any model was fitted to, or any setting measured or
tuned on, its speeds. Never change a constant here to improve a figure: write a new truth.

Why a new one: ``sockets.py`` (frozen 2026-12-07) was measured and then diagnosed (the search's
headroom, its proposers, holding in advise mode), so it is a validation truth now; issue 40 asks
for the loop's figures on a truth the project never saw.

What it models, none of which the speed model's form names:

- **two GPU generations, and a gain that depends on the model**: about a third of the nodes
  (chosen by a hash of the node's name: a later purchase racked wherever there was room) carry
  a newer GPU. Tensor-core-bound models (transformers, large CNNs) run up to 2x faster on it;
  CPU- or embedding-bound ones (A3C, NCF, recommendation) gain almost nothing. A job whose
  workers sit on both generations runs at its slowest worker's pace (synchronous training);
- **a storage gateway per rack**: every worker streams its input from the parallel file system
  through its rack's gateway (12 GB/s). When the workers in a rack ask for more than that, all
  of them, whatever job they belong to, get the gateway's share (jobs on other nodes of the
  rack slow each other);
- **no page cache under memory pressure**: on a node whose tasks have more than 80 % of its
  memory allocated, the input can no longer be cached, and each worker there reads it twice
  from the gateway;
- **partial overlap of compute and communication** (gradient buckets sent during the backward
  pass): an iteration takes ``max(compute, comm) + 0.3 * min(compute, comm)``, neither their
  sum nor the greater alone;
- **hierarchical all-reduce**: inside a node over PCIe (24 GB/s), between nodes over the NIC
  (25 GB/s, shared equally by the multi-node jobs on that node), and a job whose nodes sit
  under more than one switch pays 3 ms per iteration more (the spine's extra hops) at half the
  rate; a PS job sends every remote worker's gradient shard through each PS node's NIC share.
"""
from __future__ import annotations

import zlib

_COMPUTE_S = {"a3c": 0.15, "bert": 1.00, "cyclegan": 0.50, "deepspeech2": 0.60, "inception3": 0.32, "lstm": 0.25,
              "ncf": 0.06, "recommendation": 0.14, "resnet18": 0.12, "resnet50": 0.34, "transformer": 0.80,
              "vgg16": 0.45, "yolov3": 0.55}  # seconds per iteration of one worker, older GPU, fed and alone
_NEW_GEN_GAIN = {"a3c": 1.0, "bert": 2.0, "cyclegan": 1.5, "deepspeech2": 1.3, "inception3": 1.6, "lstm": 1.1,
                 "ncf": 1.0, "recommendation": 1.05, "resnet18": 1.4, "resnet50": 1.7, "transformer": 2.0,
                 "vgg16": 1.6, "yolov3": 1.5}  # speed-up of the compute on the newer GPU
_INPUT_MB_S = {"a3c": 5.0, "bert": 40.0, "cyclegan": 250.0, "deepspeech2": 300.0, "inception3": 400.0,
               "lstm": 30.0, "ncf": 200.0, "recommendation": 600.0, "resnet18": 500.0, "resnet50": 350.0,
               "transformer": 40.0, "vgg16": 300.0, "yolov3": 450.0}  # input a worker reads at full pace
_GRADIENT_GB = {"a3c": 0.03, "bert": 1.3, "cyclegan": 0.11, "deepspeech2": 0.45, "inception3": 0.1, "lstm": 0.3,
                "ncf": 0.05, "recommendation": 1.5, "resnet18": 0.045, "resnet50": 0.1, "transformer": 1.0,
                "vgg16": 0.55, "yolov3": 0.25}  # GB each worker exchanges per iteration
NEW_GEN_SHARE = 3          # one node in this many (by name hash) has the newer GPU
GATEWAY_MB_S = 12000.0     # each rack's storage gateway
MEMORY_PRESSURE = 0.80     # allocated share of a node's memory above which the page cache is gone
OVERLAP_RESIDUE = 0.3      # the share of the shorter of compute and comm that does not overlap
PCIE_GB_S = 24.0
NIC_GB_S = 25.0            # 200 Gbit/s per node
SPINE_LATENCY_S = 0.003
SPINE_RATE = 0.5


class IngestSpeeds:
    name = "ingest"

    def speeds(self, nodes: list[dict], jobs: list[dict]) -> dict[str, float]:
        by_name = {n["name"]: n for n in nodes}
        starved = _gateway_shares(by_name, jobs)   # rack -> share of its input demand served
        nic_users: dict[str, int] = {}
        for job in jobs:
            spanned = {t["node"] for t in job["tasks"]}
            if len(spanned) > 1:
                for n in spanned:
                    nic_users[n] = nic_users.get(n, 0) + 1
        out = {}
        for job in jobs:
            workers = [t for t in job["tasks"] if t["role"] == "worker"] or job["tasks"]
            compute = max(_compute_seconds(job, t, by_name, starved) for t in workers)
            comm = _comm_seconds(job, workers, by_name, nic_users)
            out[job["id"]] = 1.0 / (max(compute, comm) + OVERLAP_RESIDUE * min(compute, comm))
        return out


def _new_generation(name: str) -> bool:
    return zlib.crc32(name.encode()) % NEW_GEN_SHARE == 0


def _rack(node: dict) -> str:
    return node.get("switch") or "rack"


def _pressured(by_name: dict, jobs: list[dict]) -> set[str]:
    """The nodes whose allocated memory is above ``MEMORY_PRESSURE`` of what they have."""
    used: dict[str, float] = {}
    for job in jobs:
        for t in job["tasks"]:
            used[t["node"]] = used.get(t["node"], 0.0) + t["mem_mb"]
    return {n for n, mb in used.items() if mb > MEMORY_PRESSURE * max(1, by_name[n]["mem_mb"])}


def _gateway_shares(by_name: dict, jobs: list[dict]) -> dict[str, float]:
    """Per rack, the share of its workers' input demand its gateway serves (1.0: all of it)."""
    pressured = _pressured(by_name, jobs)
    demand: dict[str, float] = {}
    for job in jobs:
        rate = _INPUT_MB_S.get(job["type"], 200.0)
        for t in job["tasks"]:
            if t["role"] == "worker":
                reads = 2.0 if t["node"] in pressured else 1.0
                rack = _rack(by_name[t["node"]])
                demand[rack] = demand.get(rack, 0.0) + rate * reads * max(1, t["gpus"])
    return {rack: min(1.0, GATEWAY_MB_S / d) if d > 0 else 1.0 for rack, d in demand.items()}


def _compute_seconds(job: dict, task: dict, by_name: dict, starved: dict) -> float:
    node = by_name[task["node"]]
    gain = _NEW_GEN_GAIN.get(job["type"], 1.2) if _new_generation(node["name"]) else 1.0
    return _COMPUTE_S.get(job["type"], 0.35) / (gain * starved.get(_rack(node), 1.0))


def _comm_seconds(job: dict, workers: list[dict], by_name: dict, nic_users: dict) -> float:
    """Seconds one iteration's exchange takes on its own (before overlap with compute)."""
    volume = _GRADIENT_GB.get(job["type"], 0.3)
    spanned = sorted({t["node"] for t in job["tasks"]})
    racks = {_rack(by_name[n]) for n in spanned}
    remote = 1.0 if len(racks) <= 1 else SPINE_RATE
    latency = SPINE_LATENCY_S if len(racks) > 1 else 0.0
    if job["num_ps"] == 0:
        gpus_on = {}
        for t in workers:
            gpus_on[t["node"]] = gpus_on.get(t["node"], 0) + max(1, t["gpus"])
        inside = max((2.0 * (g - 1) / g * volume / PCIE_GB_S for g in gpus_on.values()), default=0.0)
        n = len(gpus_on)
        if n <= 1:
            return inside
        nic = min(NIC_GB_S / nic_users.get(node, 1) for node in gpus_on) * remote
        return inside + 2.0 * (n - 1) / n * volume / nic + latency
    ps_nodes = [t["node"] for t in job["tasks"] if t["role"] == "ps"]
    shard = 2.0 * volume / job["num_ps"]
    slowest = 0.0
    for ps in set(ps_nodes):
        far = sum(1 for t in workers if t["node"] != ps) * ps_nodes.count(ps)
        near = len(workers) * ps_nodes.count(ps) - far
        seconds = near * shard / PCIE_GB_S
        if far:
            seconds += far * shard / (NIC_GB_S / nic_users.get(ps, 1) * remote) + latency
        slowest = max(slowest, seconds)
    return slowest
