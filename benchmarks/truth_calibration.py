"""Ground-truth calibration: how much each truth charges for sharing a node and for spreading.

Three measurements per truth (`contention`, `gavel`, `pollux`), on the 16x8 cluster (two switches):

* **neighbours**: slowdown (speed alone / speed) of a 1-GPU job beside 0, 1, 3 or 7 other 1-GPU
  jobs on its 8-GPU node, each on its own GPU (neighbours cycle through the Philly mix).
  Published measurements of jobs sharing a server but not a GPU: about 1.1x.
* **spread**: slowdown of a job split over two nodes of one switch, and over two switches,
  against the job consolidated on one node (comm-heavy jobs: order 1.3-3x; compute-bound: ~1).
* **cost**: microseconds per ``speeds(nodes, running, only)`` call as the simulator makes it:
  all 10,000 nodes of a large cluster, three running jobs (one spanning two switches), one
  asked for. A call must cost O(jobs asked about and their neighbours), not O(nodes).
* **replay**: ``examples/traces/philly-small.csv`` at a low offered load (no queueing) under
  ``slurm-default``: mean and max slowdown (run time / run time alone) of the 1-GPU jobs that
  shared a node with another job at some point.

    python benchmarks/truth_calibration.py --out benchmarks/results/truth_calibration.json
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

from shared_data import SHARED  # benchmarks/ is the script directory: on sys.path

from slurm_advisor.domain import Job, Node, Placement, Resources, RunningJob
from slurm_advisor.sim.clusterfile import read_cluster
from slurm_advisor.sim.runner import compare
from slurm_advisor.sim.trace import read_trace
from slurm_advisor.sim.workload import at_offered_load
from slurm_advisor.speedmodels import load_speed_model

REPO = Path(__file__).resolve().parents[1]
PS = Resources(4, 0, 16_000)
WORKER = Resources(4, 1, 24_000)
TARGETS = ("resnet50", "resnet18", "lstm", "ncf", "vgg16", "bert")
NEIGHBOUR_MIX = ("resnet18", "ncf", "lstm", "resnet50", "yolov3", "bert", "deepspeech2")
NEIGHBOUR_COUNTS = (0, 1, 3, 7)
# (label, type, PS tasks, workers): comm-heavy first, compute-bound last.
SPREAD_JOBS = (("vgg16 2PS+8w", "vgg16", 2, 8), ("vgg16 8w all-reduce", "vgg16", 0, 8),
               ("resnet50 2PS+8w", "resnet50", 2, 8), ("bert 8w all-reduce", "bert", 0, 8),
               ("deepspeech2 8w", "deepspeech2", 0, 8), ("yolov3 4w", "yolov3", 0, 4))


def truths() -> dict:
    return {"contention": load_speed_model("contention"),
            "gavel": load_speed_model(f"gavel:{SHARED / 'gavel' / 'simulation_throughputs.json'}"),
            "pollux": load_speed_model(f"pollux:{SHARED / 'pollux' / 'models'}")}


def _running(job_id: str, job_type: str, num_ps: int, nodes: list[str]) -> RunningJob:
    job = Job(job_id, job_type, num_ps, len(nodes) - num_ps, PS, WORKER, 1000.0)
    return RunningJob(job, Placement.of(job, nodes))


def neighbours(truth, nodes) -> dict:
    """target type -> {count: slowdown} on one node."""
    out = {}
    for target in TARGETS:
        me = _running("me", target, 0, [nodes[0].name])
        alone = truth.speeds(nodes, [me], {"me"})["me"]
        row = {}
        for k in NEIGHBOUR_COUNTS:
            others = [_running(f"o{i}", NEIGHBOUR_MIX[i % len(NEIGHBOUR_MIX)], 0, [nodes[0].name]) for i in range(k)]
            row[k] = alone / truth.speeds(nodes, [me, *others], {"me"})["me"]
        out[target] = row
    return out


def _split(num_ps: int, num_workers: int, a: str, b: str) -> list[str]:
    """PS tasks then workers, alternating halves between nodes ``a`` and ``b``."""
    ps = [a if i % 2 == 0 else b for i in range(num_ps)]
    return ps + [a] * (num_workers // 2) + [b] * (num_workers - num_workers // 2)


def spread(truth, nodes) -> dict:
    """job label -> slowdown on 2 nodes of one switch and on 2 nodes of two switches."""
    first = nodes[0]
    same = next(n.name for n in nodes[1:] if n.switch == first.switch)
    other = next(n.name for n in nodes if n.switch != first.switch)
    out = {}
    for label, job_type, num_ps, num_workers in SPREAD_JOBS:
        packed = truth.speeds(nodes, [_running("j", job_type, num_ps, [first.name] * (num_ps + num_workers))])["j"]
        row = {}
        for name, second in (("2 nodes", same), ("2 switches", other)):
            rj = _running("j", job_type, num_ps, _split(num_ps, num_workers, first.name, second))
            row[name] = packed / truth.speeds(nodes, [rj])["j"]
        out[label] = row
    return out


def cost(truth, calls: int = 2000) -> float:
    """Microseconds per call on a 10,000-node cluster (1,250 switches of 8 nodes)."""
    nodes = tuple(Node(f"n{i:05d}", 48, 8, 384_000, f"s{i // 8}") for i in range(10_000))
    running = [_running("a", "vgg16", 0, ["n00000", "n00000", "n09999", "n09999"]),
               _running("b", "resnet50", 0, ["n00000"]), _running("c", "bert", 0, ["n09999"])]
    truth.speeds(nodes, running, {"a"})  # first call builds what is kept per nodes tuple
    started = time.perf_counter()
    for _ in range(calls):
        truth.speeds(nodes, running, {"a"})
    return (time.perf_counter() - started) / calls * 1e6


def replay(truth, nodes, load: float) -> dict:
    """Slowdowns of the trace's 1-GPU jobs that ever shared a node, under slurm-default."""
    jobs = at_offered_load(read_trace(REPO / "examples" / "traces" / "philly-small.csv"), nodes, truth, load)
    shared: set[str] = set()

    def record(samples) -> None:
        shared.update(s.subject.job.id for s in samples if s.neighbours)

    result = compare(nodes, jobs, truth, ["slurm-default"], recorder=record)["slurm-default"]
    one_gpu = [r for r in result.records if r.gpus == 1 and r.num_nodes == 1]
    sharing = [r.slowdown for r in one_gpu if r.job_id in shared]
    return {"load": load, "one_gpu_jobs": len(one_gpu), "sharing": len(sharing),
            "mean": statistics.fmean(sharing) if sharing else 1.0, "max": max(sharing, default=1.0)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "truth_calibration.json")
    ap.add_argument("--load", type=float, default=0.05)
    ap.add_argument("--no-replay", action="store_true", help="skip the simulator replay")
    args = ap.parse_args(argv)
    nodes = read_cluster(REPO / "examples" / "clusters" / "16x8.toml")
    started = time.perf_counter()
    results = {}
    for name, truth in truths().items():
        results[name] = {"neighbours": neighbours(truth, nodes), "spread": spread(truth, nodes),
                         "us_per_call_10k_nodes": cost(truth)}
        if not args.no_replay:
            results[name]["replay"] = replay(truth, nodes, args.load)
    _print(results)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"results": results, "seconds": time.perf_counter() - started},
                                   indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


def _print(results: dict) -> None:
    print("1-GPU job beside k other 1-GPU jobs on its node: slowdown vs alone")
    print(f"{'truth':<12}{'job':<10}" + "".join(f"{'k=' + str(k):>8}" for k in NEIGHBOUR_COUNTS))
    for name, r in results.items():
        for target, row in r["neighbours"].items():
            print(f"{name:<12}{target:<10}" + "".join(f"{row[k]:>8.2f}" for k in NEIGHBOUR_COUNTS))
    print("\nsplit over 2 nodes (one switch) / 2 switches: slowdown vs consolidated on one node")
    print(f"{'truth':<12}{'job':<22}{'2 nodes':>9}{'2 switches':>12}")
    for name, r in results.items():
        for label, row in r["spread"].items():
            print(f"{name:<12}{label:<22}{row['2 nodes']:>9.2f}{row['2 switches']:>12.2f}")
    print("\nspeeds() on 10,000 nodes, 3 running jobs, 1 asked for: "
          + ", ".join(f"{name} {r['us_per_call_10k_nodes']:.0f} us" for name, r in results.items()))
    if all("replay" in r for r in results.values()):
        load = next(iter(results.values()))["replay"]["load"]
        print(f"\nphilly-small.csv at load {load}, slurm-default: 1-GPU jobs that shared a node")
        print(f"{'truth':<12}{'1-GPU jobs':>11}{'sharing':>9}{'mean':>8}{'max':>8}")
        for name, r in results.items():
            p = r["replay"]
            print(f"{name:<12}{p['one_gpu_jobs']:>11}{p['sharing']:>9}{p['mean']:>8.2f}{p['max']:>8.2f}")


if __name__ == "__main__":
    sys.exit(main())
