"""A ground truth for the closed-loop benchmark that the speed model was not designed around.
FROZEN on 2026-12-02, committed before any model was fitted to, or any setting measured or
tuned on, its speeds. Never change a constant here to improve a figure: write a new truth.

Why a new one: ``straggler.py`` (frozen 2026-12-01) was that truth until the speed model was
given a pace per node after the loop missed its target on it; it is a validation truth now.

What it models, none of which the speed model's form names:

- **rack power caps**: each leaf switch's rack has a power budget; when more than 70 % of its
  GPUs are busy, every GPU in the rack is clocked down, linearly to 0.7x at 100 % (a global,
  rack-wide effect: jobs that share no node slow each other);
- **a bottleneck law**: a job runs at the lesser of its compute rate and its network rate
  (the slower pipeline stage decides), not at the sum of compute and communication times;
- **input pipelines**: a worker on a node whose CPUs are allocated above 75 % waits for data,
  at 0.8x;
- a network rate that falls with the share of the NIC a job gets on its busiest node (every
  multi-node job on a node shares its NIC) and by half again across switches.
"""
from __future__ import annotations

_RATE = {"a3c": 5.0, "bert": 1.2, "cyclegan": 2.0, "deepspeech2": 2.0, "inception3": 3.5, "lstm": 4.0,
         "ncf": 12.0, "recommendation": 6.0, "resnet18": 7.0, "resnet50": 3.5, "transformer": 1.5,
         "vgg16": 2.5, "yolov3": 1.8}  # iterations/s of one worker alone at full clock
_GRADIENT = {"a3c": 0.1, "bert": 1.3, "cyclegan": 0.1, "deepspeech2": 0.4, "inception3": 0.1, "lstm": 0.3,
             "ncf": 0.1, "recommendation": 2.0, "resnet18": 0.05, "resnet50": 0.1, "transformer": 1.0,
             "vgg16": 0.55, "yolov3": 0.25}  # GB exchanged per iteration and worker
NIC_GB_S = 12.5       # 100 Gbit/s
CAP_FROM = 0.70       # rack GPU utilisation where the power cap starts
CAP_FLOOR = 0.70      # clock at a fully busy rack
CPU_BUSY = 0.75       # node CPU allocation beyond which input pipelines stall
CPU_STALL = 0.80


class PowerCapSpeeds:
    name = "power-cap"

    def speeds(self, nodes: list[dict], jobs: list[dict]) -> dict[str, float]:
        by_name = {n["name"]: n for n in nodes}
        gpus_used: dict[str, int] = {}
        cpus_used: dict[str, int] = {}
        nic_users: dict[str, int] = {}
        for job in jobs:
            spanned = {t["node"] for t in job["tasks"]}
            for t in job["tasks"]:
                gpus_used[t["node"]] = gpus_used.get(t["node"], 0) + t["gpus"]
                cpus_used[t["node"]] = cpus_used.get(t["node"], 0) + t["cpus"]
            if len(spanned) > 1:
                for n in spanned:
                    nic_users[n] = nic_users.get(n, 0) + 1
        clock = self._rack_clocks(nodes, gpus_used)
        out = {}
        for job in jobs:
            workers = [t for t in job["tasks"] if t["role"] == "worker"]
            spanned = {t["node"] for t in job["tasks"]}
            switches = {by_name[n]["switch"] for n in spanned}
            pace = min(clock[by_name[t["node"]]["switch"]] * self._input(by_name[t["node"]], cpus_used)
                       for t in workers)
            compute = _RATE.get(job["type"], 2.0) * len(workers) ** 0.9 * pace
            if len(spanned) == 1:
                out[job["id"]] = compute
                continue
            share = NIC_GB_S / max(nic_users.get(n, 1) for n in spanned)
            if len(switches) > 1:
                share *= 0.5
            network = share / max(1e-6, _GRADIENT.get(job["type"], 0.3)) * len(workers) ** 0.5
            out[job["id"]] = min(compute, network)
        return out

    @staticmethod
    def _rack_clocks(nodes: list[dict], gpus_used: dict[str, int]) -> dict:
        total: dict = {}
        busy: dict = {}
        for n in nodes:
            total[n["switch"]] = total.get(n["switch"], 0) + n["gpus"]
            busy[n["switch"]] = busy.get(n["switch"], 0) + min(n["gpus"], gpus_used.get(n["name"], 0))
        clocks = {}
        for switch, gpus in total.items():
            u = busy[switch] / gpus if gpus else 0.0
            over = max(0.0, (u - CAP_FROM) / (1.0 - CAP_FROM))
            clocks[switch] = 1.0 - (1.0 - CAP_FLOOR) * over
        return clocks

    @staticmethod
    def _input(node: dict, cpus_used: dict[str, int]) -> float:
        return CPU_STALL if cpus_used.get(node["name"], 0) > CPU_BUSY * node["cpus"] else 1.0
