"""A ground truth the learned speed model was not designed around: a plug-in, frozen on
2026-12-01 before the closed-loop benchmark ran on it (no parameter tuned since).

What it models, none of which the speed model's features name directly:

- hardware that differs node by node (a fixed factor per node name, 0.6 to 1.0: older GPUs,
  throttling), invisible to features that only count nodes and demands;
- synchronous training waits for its slowest worker (the job runs at its worst node's pace);
- a node whose GPUs are all busy runs each of them slower (power and thermal caps);
- traffic across nodes and across switches costs in proportion to the model's size class.
"""
from __future__ import annotations

import zlib

_BASE = {"a3c": 6.0, "bert": 1.0, "cyclegan": 1.5, "deepspeech2": 2.5, "inception3": 3.0, "lstm": 5.0,
         "ncf": 10.0, "recommendation": 8.0, "resnet18": 6.0, "resnet50": 4.0, "transformer": 1.2,
         "vgg16": 2.0, "yolov3": 2.0}  # iterations/s of one worker alone, on the fastest node
_HEAVY = {"bert", "recommendation", "transformer", "vgg16"}  # large gradients or embeddings: communication-bound


def _node_factor(name: str) -> float:
    return 0.6 + 0.4 * (zlib.crc32(name.encode()) % 1000) / 999.0


class StragglerSpeeds:
    def __init__(self, busy_penalty: float = 0.15, cross_node: float = 0.2, cross_switch: float = 0.3):
        self.busy_penalty, self.cross_node, self.cross_switch = busy_penalty, cross_node, cross_switch

    def speeds(self, nodes: list[dict], jobs: list[dict]) -> dict[str, float]:
        by_name = {n["name"]: n for n in nodes}
        used: dict[str, int] = {}
        for job in jobs:
            for task in job["tasks"]:
                used[task["node"]] = used.get(task["node"], 0) + task["gpus"]
        out = {}
        for job in jobs:
            workers = [t for t in job["tasks"] if t["role"] == "worker"]
            pace = min(self._pace(by_name[t["node"]], used) for t in workers)
            spanned = {t["node"] for t in job["tasks"]}
            switches = {by_name[n]["switch"] for n in spanned}
            weight = 2.0 if job["type"] in _HEAVY else 1.0
            comm = 1.0 + weight * (self.cross_node * (len(spanned) - 1) + self.cross_switch * (len(switches) - 1))
            base = _BASE.get(job["type"], 2.0) * len(workers) ** 0.9
            out[job["id"]] = base * pace / comm
        return out

    def _pace(self, node: dict, used: dict[str, int]) -> float:
        full = node["gpus"] > 0 and used.get(node["name"], 0) >= node["gpus"]
        return _node_factor(node["name"]) * (1.0 - self.busy_penalty if full else 1.0)
