"""What it costs that the live path advises only layouts Slurm's per-node counts express, and what
exact layouts (``-m arbitrary``, Slurm 23.11+) buy back.

On a real Slurm the daemon differs from the simulator in two ways (README, "On a real Slurm"):
every task of a job gets the same demand (a PS task is allocated a worker's GPUs), and Slurm,
not the policy, decides how many tasks each pinned node gets (``slurm/expressible.py``). Each
policy runs every trace four ways, side by side in one run:

- ``simulated``: as the simulator runs it today (PS tasks ask ``ps_demand``, the policy's layout);
- ``uniform``: every job's ``ps_demand`` replaced by its ``worker_demand`` (what Slurm allocates);
- ``expressed``: uniform, and every placement passed through ``express()`` as the daemon's
  ``AdviceService`` does (:class:`ExpressedPolicy`), the fallback's too. Where Slurm would not
  start the job on the advised nodes now, the daemon replies ``none`` and the job is Slurm's own:
  here, cons_tres' unpinned choice (``slurm-default``).
- ``exact``: uniform, and every placement passed through ``exact()`` as the daemon does for a job
  submitted with ``-m arbitrary`` on Slurm 23.11+ (24.11 here): the policy's own per-node counts
  where each node holds its tasks, else Slurm's own choice, as for ``expressed``.

Traces: ``examples/traces/large-mix.csv`` and synthetic ``large`` traces of seeds 61-66
(used nowhere else: not the training 11, judge 41 or test 31-33 seeds of placement_quality.py,
nor the demo's 1-3 that made the default model), arrivals scaled to offered load 0.6 under the
``contention`` truth (of the original demands, so all three ways see the same arrivals), on
``examples/clusters/16x8.toml``. The learned policy is the packaged default model, with
slurm-default as its fallback (as the daemon has it). ``util`` is the simulator's: GPUs
*allocated* (a uniform PS task's GPU counts); ``useful util`` counts only the GPUs the job
asked for in the original trace.

    python benchmarks/expressible_cost.py [--jobs 300] [--out benchmarks/results/expressible_cost.json]
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from dataclasses import replace
from functools import partial
from pathlib import Path

import numpy as np

from slurm_advisor.advisor import Advisor
from slurm_advisor.domain import ClusterSnapshot, Job, Placement
from slurm_advisor.policies import PolicyContext, make_policy
from slurm_advisor.policies.base import Hold, Policy
from slurm_advisor.policies.slurm_default import SlurmDefaultPolicy
from slurm_advisor.sim.clusterfile import read_cluster
from slurm_advisor.sim.engine import Simulation
from slurm_advisor.sim.metrics import SimResult
from slurm_advisor.sim.trace import read_trace
from slurm_advisor.sim.workload import at_offered_load, offered_load
from slurm_advisor.slurm.expressible import exact, express
from slurm_advisor.slurm.release import Release
from slurm_advisor.speedmodels import load_speed_model
from slurm_advisor.traces.synthetic import synthetic_jobs

REPO = Path(__file__).resolve().parents[1]
POLICIES = ("slurm-default", "learned")
VARIANTS = ("simulated", "uniform", "expressed", "exact")
#: how each variant turns a placement into what Slurm allocates (None: as the policy chose it)
EXPRESS = {"expressed": express, "exact": partial(exact, release=Release(24, 11, 5))}
SEEDS = (61, 62, 63, 64, 65, 66)
OFFERED_LOAD = 0.6
SIM_SEED = 0


class ExpressedPolicy:
    """``inner``'s placement as Slurm lays it out when the job is pinned to its nodes (``how``:
    ``express``, or ``exact`` for an arbitrary-distribution pin); None and Holds unchanged. Where
    Slurm would not start the job there now, Slurm's own choice."""

    def __init__(self, inner: Policy, counts: Counter, how=express):
        self.inner, self.counts, self.name, self.how = inner, counts, inner.name, how
        self._slurm = SlurmDefaultPolicy()

    def place(self, snapshot: ClusterSnapshot, job: Job, rng: np.random.Generator) -> Placement | Hold | None:
        placement = self.inner.place(snapshot, job, rng)
        if placement is None or isinstance(placement, Hold):
            return placement
        self.counts["placements"] += 1
        expressed = self.how(snapshot, job, placement)
        if expressed is None or not snapshot.fits(job, expressed):
            self.counts["refused"] += 1  # the daemon replies "none": Slurm places the job itself
            return self._slurm.place(snapshot, job)
        if sorted(expressed.per_node()) != sorted(placement.per_node()):
            self.counts["changed"] += 1
            if _node_counts(expressed) != _node_counts(placement):
                self.counts["counts_changed"] += 1  # else only PS tasks moved
        return expressed

    def score_nodes(self, snapshot: ClusterSnapshot, job: Job) -> dict[str, float]:
        return self.inner.score_nodes(snapshot, job)


def _node_counts(placement: Placement) -> list[tuple[str, int]]:
    return sorted((node, ps + workers) for node, ps, workers in placement.per_node())


def uniform(jobs: list[Job]) -> list[Job]:
    """What Slurm allocates: every task the worker's demand."""
    return [replace(j, ps_demand=j.worker_demand) if j.num_ps else j for j in jobs]


def run_one(nodes, jobs: list[Job], truth, policy: str, variant: str) -> tuple[SimResult, Counter]:
    counts: Counter = Counter()
    inner = make_policy(policy, PolicyContext(truth=truth))
    fallback = SlurmDefaultPolicy() if policy == "learned" else None
    if variant in EXPRESS:
        inner = ExpressedPolicy(inner, counts, EXPRESS[variant])
        fallback = ExpressedPolicy(fallback, counts, EXPRESS[variant]) if fallback else None
    trace = jobs if variant == "simulated" else uniform(jobs)
    sim = Simulation(nodes, trace, Advisor(inner, fallback=fallback), truth, seed=SIM_SEED)
    return sim.run(), counts


def figures(result: SimResult, asked_gpus: dict[str, int], counts: Counter, seconds: float) -> dict:
    s = result.summary()
    useful = sum(asked_gpus[r.job_id] * (r.end - r.start) for r in result.records)
    span = result.makespan
    return {"avg_jct_h": s["avg_jct"] / 3600, "p95_jct_h": s["p95_jct"] / 3600,
            "mean_slowdown": s["mean_slowdown"], "utilization": s["utilization"],
            "useful_utilization": useful / (result.total_gpus * span) if span else 0.0,
            "jobs": s["jobs"], "timeouts": s["timeouts"], "skipped": s["skipped"],
            "fallbacks": s["fallbacks"], "holds": s["holds"],
            "express": {k: counts[k] for k in ("placements", "changed", "counts_changed", "refused")},
            "seconds": round(seconds, 1)}


def traces(n: int) -> dict[str, list[Job]]:
    out = {"large-mix.csv": read_trace(REPO / "examples" / "traces" / "large-mix.csv")}
    out.update({f"large seed {s}": synthetic_jobs(n, seed=s, mix="large") for s in SEEDS})
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jobs", type=int, default=300, help="jobs per synthetic trace (large-mix.csv has 200)")
    ap.add_argument("--only", default="", help="comma-separated trace names to run (default: all)")
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "expressible_cost.json")
    args = ap.parse_args(argv)
    nodes = read_cluster(REPO / "examples" / "clusters" / "16x8.toml")
    truth = load_speed_model("contention")
    only = {t for t in args.only.split(",") if t}
    out: dict = {"cluster": "16x8", "truth": "contention", "offered_load": OFFERED_LOAD, "sim_seed": SIM_SEED,
                 "jobs_per_synthetic_trace": args.jobs, "traces": {}}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    for tname, raw in traces(args.jobs).items():
        if only and tname not in only:
            continue
        jobs = at_offered_load(raw, nodes, truth, OFFERED_LOAD)
        asked = {j.id: j.total_demand().gpus for j in jobs}
        row: dict = {"jobs": len(jobs), "ps_jobs": sum(1 for j in jobs if j.num_ps),
                     # GPU time asked for over GPU time offered, once PS tasks hold a worker's GPUs
                     "offered_load_uniform": offered_load(uniform(jobs), nodes, truth), "policies": {}}
        for policy in POLICIES:
            per = {}
            for variant in VARIANTS:
                started = time.perf_counter()
                result, counts = run_one(nodes, jobs, truth, policy, variant)
                per[variant] = figures(result, asked, counts, time.perf_counter() - started)
                print(f"  [{tname}] {policy} {variant}: {per[variant]['avg_jct_h']:.1f} h "
                      f"({per[variant]['seconds']} s)", file=sys.stderr)
            base = per["simulated"]
            for variant in VARIANTS[1:]:
                per[variant]["vs_simulated"] = {k: per[variant][k] / base[k] if base[k] else None
                                                for k in ("avg_jct_h", "p95_jct_h", "utilization")}
            row["policies"][policy] = per
        out["traces"][tname] = row
        args.out.write_text(json.dumps(out, indent=2))
    print_table(out)
    return 0


def print_table(out: dict) -> None:
    print(f"{'trace':<16}{'policy':<15}{'variant':<11}{'avg_jct_h':>10}{'p95_jct_h':>10}{'util':>6}"
          f"{'useful':>7}{'avg x':>7}{'p95 x':>7}{'util x':>7}{'t/o':>5}{'express chg/cnt/ref of n':>26}")
    for tname, row in out["traces"].items():
        for policy, per in row["policies"].items():
            for variant, v in per.items():
                r = v.get("vs_simulated", {})
                ratio = [f"{r[k]:>7.3f}" if r else f"{'':>7}" for k in ("avg_jct_h", "p95_jct_h", "utilization")]
                e = v["express"]
                ex = f"{e['changed']}/{e['counts_changed']}/{e['refused']} of {e['placements']}" if e["placements"] else ""
                print(f"{tname:<16}{policy:<15}{variant:<11}{v['avg_jct_h']:>10.1f}{v['p95_jct_h']:>10.1f}"
                      f"{v['utilization']:>6.2f}{v['useful_utilization']:>7.2f}{''.join(ratio)}{v['timeouts']:>5}"
                      f"{ex:>26}")
    for policy in POLICIES:
        for variant in VARIANTS[1:]:
            ratios = [row["policies"][policy][variant]["vs_simulated"]["avg_jct_h"] for row in out["traces"].values()
                      if policy in row["policies"]]
            if ratios:
                print(f"{policy} {variant}/simulated avg JCT: {_spread(ratios)}")
    rows = [row["policies"] for row in out["traces"].values() if set(POLICIES) <= set(row["policies"])]
    for variant in VARIANTS:
        ratios = [p["learned"][variant]["avg_jct_h"] / p["slurm-default"][variant]["avg_jct_h"] for p in rows]
        print(f"learned/slurm-default avg JCT, both {variant}: {_spread(ratios)}")
    # On a real Slurm without the advisor, jobs get uniform demand and Slurm's own (unpinned) layout.
    for variant in ("expressed", "exact"):
        ratios = [p["learned"][variant]["avg_jct_h"] / p["slurm-default"]["uniform"]["avg_jct_h"] for p in rows]
        print(f"learned {variant} / slurm-default uniform (Slurm without the advisor) avg JCT: {_spread(ratios)}")
    # what exact layouts buy over Slurm's own per-node counts, the same policy both ways
    for policy in POLICIES:
        ratios = [row["policies"][policy]["exact"]["avg_jct_h"] / row["policies"][policy]["expressed"]["avg_jct_h"]
                  for row in out["traces"].values() if policy in row["policies"]]
        print(f"{policy} exact/expressed avg JCT: {_spread(ratios)}")


def _spread(ratios: list[float]) -> str:
    if not ratios:
        return "no traces"
    return (f"mean {np.mean(ratios):.3f}, range {min(ratios):.3f}-{max(ratios):.3f} over {len(ratios)} traces "
            f"({' '.join(f'{r:.3f}' for r in ratios)})")


if __name__ == "__main__":
    sys.exit(main())
