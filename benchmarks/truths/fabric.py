"""A ground truth for the closed-loop benchmark that the speed model was not designed around.
FROZEN on 2026-12-02, committed before any model was fitted to, or any setting measured or
tuned on, its speeds. Never change a constant here to improve a figure: write a new truth.

Why a new one: ``power_cap.py`` (frozen 2026-12-02) was that truth; the loop missed its target
there because a rack-wide effect is invisible in a sample of the job's own nodes. Whatever is
changed for that makes ``power_cap`` a validation truth, and the next figure needs a truth
nobody has looked at: this one, written before that change was designed.

What it models, none of which the speed model's form names:

- **two node generations**: in every rack the first half of the nodes (by name order within
  the rack) are the current generation, the second half an older one at 0.6x compute;
- **a sum law with a slowest-link network**: one iteration takes the compute time plus the
  communication time over the job's slowest link (not the lesser or the greater of two rates);
- **NVLink islands of 4 GPUs**: a job's GPUs on a node talk over NVLink while it holds at most
  4 of them there; with more, that node's exchange goes over PCIe, at a quarter of the rate;
- **memory bandwidth per node**: each task draws a type-dependent share of the node's memory
  bandwidth; when the node's draws exceed 1.0, every task there slows by 1 / total;
- **oversubscribed uplinks shared by every job crossing them** (2:1): cross-rack traffic gets
  half a NIC divided among all the jobs, anywhere, that cross the same rack's uplink;
- **synchronous training**: a job runs at the pace of its slowest worker.
"""
from __future__ import annotations

_STEP_S = {"a3c": 0.20, "bert": 0.85, "cyclegan": 0.50, "deepspeech2": 0.55, "inception3": 0.30, "lstm": 0.25,
           "ncf": 0.08, "recommendation": 0.16, "resnet18": 0.14, "resnet50": 0.30, "transformer": 0.65,
           "vgg16": 0.40, "yolov3": 0.55}  # seconds of compute per iteration on one current-generation worker
_GRADIENT_GB = {"a3c": 0.05, "bert": 1.3, "cyclegan": 0.1, "deepspeech2": 0.5, "inception3": 0.1, "lstm": 0.35,
                "ncf": 0.05, "recommendation": 1.6, "resnet18": 0.05, "resnet50": 0.1, "transformer": 1.0,
                "vgg16": 0.55, "yolov3": 0.25}  # GB each worker exchanges per iteration
_MEMBW = {"a3c": 0.10, "bert": 0.12, "cyclegan": 0.14, "deepspeech2": 0.12, "inception3": 0.14, "lstm": 0.16,
          "ncf": 0.22, "recommendation": 0.24, "resnet18": 0.16, "resnet50": 0.14, "transformer": 0.12,
          "vgg16": 0.15, "yolov3": 0.14}  # share of a node's memory bandwidth one worker task draws
OLD_PACE = 0.6
NVLINK_GB_S = 150.0
PCIE_GB_S = NVLINK_GB_S / 4
NIC_GB_S = 25.0       # 200 Gbit/s per node
UPLINK_SHARE = 0.5    # 2:1 oversubscribed rack uplinks
NVLINK_ISLAND = 4     # GPUs of one job on a node that NVLink connects
PS_DRAW = 0.5         # a PS task draws this fraction of a worker's memory bandwidth


class FabricSpeeds:
    name = "fabric"

    def speeds(self, nodes: list[dict], jobs: list[dict]) -> dict[str, float]:
        by_name = {n["name"]: n for n in nodes}
        pace = _generations(nodes)
        draw: dict[str, float] = {}
        nic_users: dict[str, int] = {}
        uplink_users: dict[str, int] = {}
        for job in jobs:
            spanned = {t["node"] for t in job["tasks"]}
            for t in job["tasks"]:
                share = _MEMBW.get(job["type"], 0.15) * (1.0 if t["role"] == "worker" else PS_DRAW)
                draw[t["node"]] = draw.get(t["node"], 0.0) + share
            if len(spanned) > 1:
                for n in spanned:
                    nic_users[n] = nic_users.get(n, 0) + 1
            racks = {by_name[n]["switch"] for n in spanned}
            if len(racks) > 1:
                for r in racks:
                    uplink_users[r] = uplink_users.get(r, 0) + 1
        out = {}
        for job in jobs:
            workers = [t for t in job["tasks"] if t["role"] == "worker"]
            slowest = min(pace[t["node"]] / max(1.0, draw.get(t["node"], 0.0)) for t in workers)
            compute_s = _STEP_S.get(job["type"], 0.4) / slowest
            comm_s = _comm_seconds(job, workers, by_name, nic_users, uplink_users)
            out[job["id"]] = 1.0 / (compute_s + comm_s)
        return out


def _generations(nodes: list[dict]) -> dict[str, float]:
    """Each node's compute pace: 1.0, or OLD_PACE for the second half of its rack by name."""
    racks: dict = {}
    for n in nodes:
        racks.setdefault(n["switch"], []).append(n["name"])
    pace = {}
    for names in racks.values():
        names = sorted(names)
        for i, name in enumerate(names):
            pace[name] = 1.0 if i < (len(names) + 1) // 2 else OLD_PACE
    return pace


def _comm_seconds(job: dict, workers: list[dict], by_name: dict, nic_users: dict, uplink_users: dict) -> float:
    """Seconds one iteration spends exchanging gradients over the job's slowest link."""
    w = len(workers)
    if w + job["num_ps"] <= 1:
        return 0.0
    volume = _GRADIENT_GB.get(job["type"], 0.3)
    spanned = {t["node"] for t in job["tasks"]}
    gpus_on: dict[str, int] = {}
    for t in job["tasks"]:
        gpus_on[t["node"]] = gpus_on.get(t["node"], 0) + t["gpus"]
    # within a node: NVLink while the job holds an island's worth of GPUs there, else PCIe
    intra = min(NVLINK_GB_S if gpus_on.get(n, 0) <= NVLINK_ISLAND else PCIE_GB_S for n in spanned)
    link = intra
    if len(spanned) > 1:
        link = min(link, NIC_GB_S / max(nic_users.get(n, 1) for n in spanned))
        racks = {by_name[n]["switch"] for n in spanned}
        if len(racks) > 1:
            link = min(link, NIC_GB_S * UPLINK_SHARE / max(uplink_users.get(r, 1) for r in racks))
    if job["num_ps"] == 0:
        exchanged = 2.0 * (w - 1) / w * volume  # a ring all-reduce
    else:
        exchanged = 2.0 * volume * w / job["num_ps"]  # the busiest PS shard's traffic
    return exchanged / link
