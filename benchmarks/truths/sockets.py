"""A ground truth for the closed-loop benchmark that no part of the project was designed around.
FROZEN on 2026-12-07, committed before any model was fitted to, or any setting measured or
tuned on, its speeds. Never change a constant here to improve a figure: write a new truth.

Why a new one: ``fabric.py`` and ``power_cap.py`` (frozen 2026-12-02) have both been measured
after design changes were made (the rack inputs, the pace per node), so they are validation
truths now; issue 40 asks for the loop's figures on a truth the project never saw.

What it models, none of which the speed model's form names:

- **two CPU sockets per node**, each owning half the node's GPUs and CPUs; the tasks on a node
  take the first socket's GPUs in the order the jobs are listed (the order they started), then
  the second's. A job whose GPUs on a node span both sockets exchanges over the inter-socket
  link there, at 0.3 of the in-socket rate; a job whose tasks share a socket with another job's
  tasks loses 10 % of its compute on that node per such job (shared L3 and memory controller);
- **a CPU-starved input pipeline**: a worker task's data loading needs 2 CPUs per GPU; a task
  given fewer runs at the ratio it got (a job asked what Slurm gave it, so its own request
  decides this, not its neighbours);
- **a latency-bound exchange**: each iteration pays, besides the bytes over the slowest link,
  a fixed 2 ms per hop of a ring over the job's nodes (all-reduce) or 4 ms per PS round trip
  when any PS is on another node than a worker; these dominate small models;
- **jitter by rack**: racks are numbered by name; odd-numbered racks lose 15 % of their link
  rate (older cabling), even ones none;
- **synchronous training**: a job runs at the pace of its slowest worker node.
"""
from __future__ import annotations

_STEP_S = {"a3c": 0.18, "bert": 0.90, "cyclegan": 0.45, "deepspeech2": 0.60, "inception3": 0.28, "lstm": 0.22,
           "ncf": 0.05, "recommendation": 0.12, "resnet18": 0.12, "resnet50": 0.32, "transformer": 0.70,
           "vgg16": 0.42, "yolov3": 0.50}  # seconds of compute per iteration on one worker, alone
_GRADIENT_GB = {"a3c": 0.04, "bert": 1.3, "cyclegan": 0.11, "deepspeech2": 0.45, "inception3": 0.09, "lstm": 0.3,
                "ncf": 0.06, "recommendation": 1.4, "resnet18": 0.045, "resnet50": 0.1, "transformer": 0.9,
                "vgg16": 0.55, "yolov3": 0.25}  # GB each worker exchanges per iteration
IN_SOCKET_GB_S = 60.0
CROSS_SOCKET = 0.3     # inter-socket rate over in-socket
NIC_GB_S = 12.5        # 100 Gbit/s per node
ODD_RACK_LINK = 0.85   # the link rate of odd-numbered racks
SOCKET_NEIGHBOUR = 0.10
CPUS_PER_GPU = 2.0
RING_HOP_S = 0.002
PS_ROUND_TRIP_S = 0.004


class SocketSpeeds:
    name = "sockets"

    def speeds(self, nodes: list[dict], jobs: list[dict]) -> dict[str, float]:
        by_name = {n["name"]: n for n in nodes}
        sockets = _sockets(by_name, jobs)          # job id -> node -> set of sockets its GPUs use
        sharers = _socket_sharers(sockets)         # (node, socket) -> job ids there
        nic_users: dict[str, int] = {}
        for job in jobs:
            spanned = {t["node"] for t in job["tasks"]}
            if len(spanned) > 1:
                for n in spanned:
                    nic_users[n] = nic_users.get(n, 0) + 1
        out = {}
        for job in jobs:
            workers = [t for t in job["tasks"] if t["role"] == "worker"]
            pace = min(_pace(job, t, sockets, sharers) for t in workers)
            compute_s = _STEP_S.get(job["type"], 0.35) / pace
            out[job["id"]] = 1.0 / (compute_s + _comm_seconds(job, workers, by_name, sockets, nic_users))
        return out


def _sockets(by_name: dict, jobs: list[dict]) -> dict[str, dict[str, set[int]]]:
    """Which sockets each job's GPUs use on each node: socket 0's GPUs first, in job order."""
    taken: dict[str, int] = {}
    out: dict[str, dict[str, set[int]]] = {}
    for job in jobs:
        mine: dict[str, set[int]] = {}
        for t in job["tasks"]:
            node, half = t["node"], max(1, by_name[t["node"]]["gpus"] // 2)
            first = taken.get(node, 0)
            used = {min(1, g // half) for g in range(first, first + max(1, t["gpus"]))}
            taken[node] = first + t["gpus"]
            mine.setdefault(node, set()).update(used)
        out[job["id"]] = mine
    return out


def _socket_sharers(sockets: dict[str, dict[str, set[int]]]) -> dict[tuple[str, int], set[str]]:
    out: dict[tuple[str, int], set[str]] = {}
    for job_id, per_node in sockets.items():
        for node, used in per_node.items():
            for s in used:
                out.setdefault((node, s), set()).add(job_id)
    return out


def _pace(job: dict, task: dict, sockets: dict, sharers: dict) -> float:
    """A worker task's compute pace: its CPUs for its input pipeline, its socket neighbours."""
    node = task["node"]
    others = {j for s in sockets[job["id"]].get(node, ()) for j in sharers.get((node, s), ())} - {job["id"]}
    fed = min(1.0, task["cpus"] / (CPUS_PER_GPU * max(1, task["gpus"]))) if task["gpus"] else 1.0
    return fed * (1.0 - SOCKET_NEIGHBOUR) ** len(others)


def _comm_seconds(job: dict, workers: list[dict], by_name: dict, sockets: dict, nic_users: dict) -> float:
    """Seconds one iteration spends exchanging: bytes over the slowest link, plus latency."""
    w = len(workers)
    if w + job["num_ps"] <= 1:
        return 0.0
    spanned = sorted({t["node"] for t in job["tasks"]})
    mine = sockets[job["id"]]
    link = min(IN_SOCKET_GB_S * (CROSS_SOCKET if len(mine.get(n, ())) > 1 else 1.0) for n in spanned)
    if len(spanned) > 1:
        link = min(link, min(NIC_GB_S / nic_users.get(n, 1) * _rack_factor(by_name[n]["switch"]) for n in spanned))
    volume = _GRADIENT_GB.get(job["type"], 0.3)
    if job["num_ps"] == 0:
        exchanged = 2.0 * (w - 1) / w * volume
        latency = RING_HOP_S * (len(spanned) - 1) * 2
    else:
        exchanged = 2.0 * volume * w / job["num_ps"]
        ps_nodes = {t["node"] for t in job["tasks"] if t["role"] == "ps"}
        latency = PS_ROUND_TRIP_S if ps_nodes != {t["node"] for t in workers} or len(spanned) > 1 else 0.0
    return exchanged / link + latency


def _rack_factor(switch: str | None) -> float:
    digits = "".join(c for c in (switch or "") if c.isdigit())
    return ODD_RACK_LINK if digits and int(digits) % 2 else 1.0
