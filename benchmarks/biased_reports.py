"""Biased speed reports against retrain's gate: is a model learned from them ever promoted?

A site's store is built as weeks of live running would leave it: a trace of jobs on
examples/clusters/16x8.toml run by three heuristics (slurm-default, random, spread) under the
held-out truth ``benchmarks/truths/site_holdout.py`` (which no model here was designed or tuned
on, and which is not the gate's prior), six owners taking turns, each job's decision (its marker
with ``iters=`` unless ``--no-iters``), its outcome as Slurm saw it (start and end) and one speed
report; the live speed samples are what the daemon would have built from the reports. Then each
scenario distorts the reports (and the samples built from them) and runs ``retrain`` on the
store, as the nightly cron would:

- ``honest``: as measured;
- ``all x nodes^3``: every job reports its speed times its node count cubed (issue 40's case);
- ``all x 2``: every job reports twice its speed (wrong, but the same ranking);
- ``one owner x nodes^3`` and ``one owner random``: uid 1001 alone (random: x 10^U(-1, 1) per job).

For each: promoted or not and why, the owners left out, and what the candidate does under the
truth (avg JCT over slurm-default's on a fresh trace, seed 301), promoted or not. Figures are one
fixed seed: a different seed moves the JCT ratios by a few percent.

    python benchmarks/biased_reports.py --out benchmarks/results/biased_reports.json
"""
from __future__ import annotations

import argparse
import json
import math
import re
import sys
import tempfile
import time
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from slurm_advisor.domain.decision import Decision
from slurm_advisor.domain.outcome import Outcome
from slurm_advisor.domain.speed_report import SpeedReport
from slurm_advisor.experiments.demo import loaded_trace
from slurm_advisor.learned.hyper import Hyper
from slurm_advisor.retrain.evaluate import replay_jct
from slurm_advisor.retrain.retrain import RetrainSettings, run_retrain
from slurm_advisor.sim.clusterfile import read_cluster
from slurm_advisor.sim.engine import Simulation
from slurm_advisor.sim.runner import build_advisor
from slurm_advisor.speedmodels import load_speed_model
from slurm_advisor.store import Store
from slurm_advisor.training.judge import Judge

REPO = Path(__file__).resolve().parents[1]
TRUTH = f"{REPO / 'benchmarks' / 'truths' / 'site_holdout.py'}:SiteHoldoutSpeeds"
OWNERS = tuple(range(1000, 1006))
LIAR = 1001
RECORD_POLICIES = ("slurm-default", "random", "spread")
T0 = datetime(2026, 11, 1, tzinfo=UTC).timestamp()


def bias(name: str, rng: np.random.Generator):
    """scenario -> (owner, nodes, job id) -> factor on the reported speed (one per job)."""
    drawn: dict[str, float] = {}

    def random(owner, nodes, job):
        return drawn.setdefault(job, float(10 ** rng.uniform(-1, 1))) if owner == LIAR else 1.0

    return {
        "honest": lambda owner, nodes, job: 1.0,
        "all x nodes^3": lambda owner, nodes, job: float(nodes) ** 3,
        "all x 2": lambda owner, nodes, job: 2.0,
        "one owner x nodes^3": lambda owner, nodes, job: float(nodes) ** 3 if owner == LIAR else 1.0,
        "one owner random": random,
    }[name]


SCENARIOS = ("honest", "all x nodes^3", "all x 2", "one owner x nodes^3", "one owner random")


def site_store(db: str, nodes, truth, jobs, scenario: str, iters: bool, seed: int) -> None:
    """The store of a site that ran ``jobs`` under the three heuristics, reports distorted by ``scenario``."""
    factor = bias(scenario, np.random.default_rng(seed))
    samples, decisions, reports, outcomes = [], [], [], []
    offset = 0.0
    for p, policy in enumerate(RECORD_POLICIES):
        run_jobs = [replace(j, id=f"{p}-{j.id}") for j in jobs]
        recorded = []
        result = Simulation(nodes, run_jobs, build_advisor(policy, truth), truth, seed=seed + p,
                            recorder=recorded.extend, sample_noise=0.02).run()
        owner = {j.id: OWNERS[i % len(OWNERS)] for i, j in enumerate(run_jobs)}
        for s in recorded:
            samples.append(replace(s, time=T0 + offset + s.time, source="live",
                                   speed=s.speed * factor(owner[s.subject.job.id], len(s.subject.placement.nodes()),
                                                          s.subject.job.id)))
        by_id = {r.job_id: r for r in result.records}
        for i, job in enumerate(run_jobs):
            r, did = by_id.get(job.id), f"d-{p:02x}{i:010x}"
            decisions.append(Decision(did, datetime.fromtimestamp(T0 + offset + job.submit_time, UTC), "advise",
                                      "place", policy, None, job.type, owner[job.id], _fields(job, iters)))
            if r is None or not math.isfinite(r.end):
                continue
            start, end = T0 + offset + r.start, T0 + offset + r.end
            outcomes.append(Outcome(job.id, r.state, did, T0 + offset + job.submit_time, start, end, ()))
            speed = job.iterations / (r.end - r.start) * factor(owner[job.id], r.num_nodes, job.id)
            reports.append((SpeedReport(job.id, owner[job.id], speed * (end - start), end - start, end, did, end), None))
        offset += max(r.end for r in result.records) + 3600.0
    with Store.open(db) as store:
        store.record_samples(samples)
        store.record_decisions(decisions)
        store.record_reports(reports)
        store.record_outcomes(outcomes)


def _fields(job, iters: bool) -> dict:
    d = job.worker_demand
    comment = f"slurm-advisor: type={job.type} ps={job.num_ps} workers={job.num_workers}"
    if iters:
        comment += f" iters={job.iterations:g}"
    return {"comment": comment, "num_tasks": job.num_tasks, "cpus_per_task": d.cpus,
            "pn_min_memory": max(1, d.mem_mb // max(1, d.cpus)), "mem_per_cpu": True,
            "tres_per_task": f"gres:gpu:{d.gpus}" if d.gpus else None}


def run(scenario: str, iters: bool, nodes, truth, jobs, test_jobs, hp: Hyper, seed: int) -> dict:
    with tempfile.TemporaryDirectory(prefix="biased-reports-") as work:
        db = str(Path(work) / "site.db")
        site_store(db, nodes, truth, jobs, scenario, iters, seed)
        lines: list[str] = []
        started = time.time()
        try:
            result = run_retrain(db, Path(work) / "models", nodes, RetrainSettings(hyper=hp), log=lines.append,
                                 progress=False)
        except Exception as exc:  # noqa: BLE001 -- a refused retrain is a row, not a crash
            left_out = sorted(m.group(1) for line in lines if (m := re.match(r"reports of uid (\d+) left out", line)))
            return {"scenario": scenario, "iters": iters, "promoted": False, "reason": f"retrain refused: {exc}",
                    "discounted": left_out, "true_ratio": None, "seconds": round(time.time() - started, 1)}
        truth_judge = Judge(truth, "the truth")
        base = replay_jct(nodes, test_jobs, truth_judge, None, seed)
        cand = replay_jct(nodes, test_jobs, truth_judge, Path(work) / "models" / result.candidate, seed) \
            if result.candidate else math.nan
        owners = result.data.get("owners", {})
        return {"scenario": scenario, "iters": iters, "promoted": result.promoted, "reason": result.reason,
                "discounted": sorted(owners.get("discounted", {})), "judge_owners": owners.get("judge_owners"),
                "candidate_prior": result.metrics.get("candidate_metrics", {}).get("prior_avg_jct"),
                "true_ratio": round(cand / base, 3) if math.isfinite(cand) and base > 0 else None,
                "seconds": round(time.time() - started, 1)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "biased_reports.json")
    ap.add_argument("--jobs", type=int, default=120, help="jobs in the site's trace (x3 heuristics)")
    ap.add_argument("--episodes", type=int, default=30, help="RL episodes per retrain")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--scenarios", default=",".join(SCENARIOS), help="comma-separated subset")
    ap.add_argument("--no-iters", action="store_true", help="markers without iters=: Slurm's clock cannot check")
    args = ap.parse_args(argv)
    nodes = read_cluster(REPO / "examples" / "clusters" / "16x8.toml")
    truth = load_speed_model(TRUTH)
    jobs = loaded_trace(nodes, truth, args.jobs, 201 + args.seed)
    test_jobs = loaded_trace(nodes, truth, args.jobs, 301 + args.seed)
    hp = replace(Hyper(), rl_episodes=args.episodes, episode_jobs=min(80, args.jobs), speed_epochs=40,
                 warm_episodes=2, warm_epochs=20, seed=args.seed)
    rows = []
    print(f"{'scenario':<22} {'iters=':>6} {'promoted':>8} {'discounted':>10} {'truth/sd':>8}  reason")
    for scenario in args.scenarios.split(","):
        row = run(scenario, not args.no_iters, nodes, truth, jobs, test_jobs, hp, args.seed)
        rows.append(row)
        ratio = "-" if row["true_ratio"] is None else f"{row['true_ratio']:.3f}"
        print(f"{scenario:<22} {'yes' if row['iters'] else 'no':>6} {'yes' if row['promoted'] else 'no':>8} "
              f"{','.join(row['discounted']) or '-':>10} {ratio:>8}  {row['reason'][:150]}", flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"truth": "site_holdout", "cluster": "examples/clusters/16x8.toml",
                                    "jobs": args.jobs, "episodes": args.episodes, "seed": args.seed,
                                    "rows": rows}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
