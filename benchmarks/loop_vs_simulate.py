"""The same model served through the daemon (``slurm-advisor loop``, retrain off) against the
simulator running it directly (``slurm-advisor simulate``), on the same trace and truth.

Issue 40 measured the loop serving a model at 1.572x slurm-default where ``simulate`` gave 0.944x.
This is the harness that says how far apart the two paths are, per seed and truth:

- ``sim``: the policy in the plain simulator on the trace as generated;
- ``sim as submitted``: the same on the trace as the loop submits it (Slurm jobs are homogeneous:
  every task gets the largest of the PS and worker demands; limits in whole minutes);
- ``sim as served``: the same as ``simulate --served-as MODE``: in advise mode a hold is left
  to Slurm (the hook cannot delay a job); in enforce mode it is a node-count cap the job pends
  under, started by Slurm's own rule within it (the policy is not asked again); in both the
  policy decides a job once (one it leaves to Slurm starts by Slurm's own rule) and a pin runs
  with the tasks per node Slurm gives it;
- ``loop``: the daemon's path (hook fields, claims, pins, caps, releases, the layouts it can
  express), on the as-submitted trace;
- ``same nodes``, ``same start``: job by job, the share of the jobs whose node set (whose start)
  is the same in the loop, as the daemon recorded it from the queue, and in ``sim as served``
  (``slurm_advisor/loop/agreement.py``). Every placement either path runs is one the live path
  can express (``sim as served`` plays a pin as Slurm lays it out), so no job is left out.

Each avg JCT is over slurm-default's on the same jobs in the same path. The model is the
packaged default (trained by the demo on the embedded 8x8 cluster); ``--model`` takes another.
One run per seed; the simulator is deterministic for a seed, so the noise is between seeds.

    python benchmarks/loop_vs_simulate.py --out benchmarks/results/loop_vs_simulate.json
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import time
from pathlib import Path

from slurm_advisor.experiments.demo import loaded_trace
from slurm_advisor.loop.agreement import agreement, recorded, simulated
from slurm_advisor.loop.driver import Loop, LoopSettings
from slurm_advisor.loop.hook import as_submitted
from slurm_advisor.models.meta import DEFAULT_MODEL_DIR
from slurm_advisor.sim.clusterfile import default_cluster
from slurm_advisor.sim.engine import Simulation
from slurm_advisor.sim.runner import build_advisor
from slurm_advisor.speedmodels import load_speed_model

REPO = Path(__file__).resolve().parents[1]
TRUTHS = {"contention": "contention",
          "site-holdout": f"{REPO / 'benchmarks' / 'truths' / 'site_holdout.py'}:SiteHoldoutSpeeds"}


def avg_jct(nodes, jobs, policy: str, truth, model: Path, seed: int, holds: bool = True,
            caps: bool = False) -> tuple[float, int]:
    """(avg JCT, the policy's holds: decisions to wait although the job fitted); ``holds``,
    ``caps``: as ``build_advisor``'s (the plain simulator by default)."""
    result = Simulation(nodes, jobs, build_advisor(policy, truth, model, holds=holds, caps=caps), truth,
                        seed=seed).run()
    value = result.summary().get("avg_jct")
    return (float(value) if value is not None else math.nan), result.holds


def one(nodes, truth_name: str, seed: int, jobs_n: int, model: Path, mode: str) -> dict:
    truth = load_speed_model(TRUTHS[truth_name])
    trace = loaded_trace(nodes, truth, jobs_n, seed)
    submitted = [as_submitted(j, 1000 + i) for i, j in enumerate(sorted(trace, key=lambda j: j.submit_time))]
    row = {"truth": truth_name, "seed": seed, "jobs": jobs_n, "mode": mode}
    for name, jobs in (("sim", trace), ("sim_as_submitted", submitted)):
        (learned, holds), (base, _) = avg_jct(nodes, jobs, "learned", truth, model, 0), \
            avg_jct(nodes, jobs, "slurm-default", truth, model, 0)
        row[name], row[f"{name}_holds"] = round(learned / base, 3), holds
    served, served_jobs = simulated(nodes, submitted, build_advisor("learned", truth, model, holds=mode == "enforce",
                                                                    caps=mode == "enforce"), truth)
    base, _ = avg_jct(nodes, submitted, "slurm-default", truth, model, 0)
    row["sim_as_served"] = round(float(served.summary()["avg_jct"]) / base, 3)  # simulate --served-as MODE
    with tempfile.TemporaryDirectory(prefix="loop-vs-sim-") as work:
        loop = Loop(nodes, truth, str(Path(work) / "loop.db"), Path(work) / "models",
                    LoopSettings(mode=mode, retrain=False, model=model))
        cycle = loop.run([trace])[0]
        row["per_job"] = agreement(recorded(str(Path(work) / "loop.db")), served_jobs)  # jobs, same_nodes, same_start
    row["loop"] = round(cycle["avg_jct"] / cycle["slurm_default_avg_jct"], 3)
    row["loop_outcomes_missing"] = cycle["advised"] - cycle["outcomes"]
    row["loop_slurm_chose"] = cycle["slurm_chose"]
    row["loop_over_sim_as_submitted"] = round(row["loop"] / row["sim_as_submitted"], 3)
    row["loop_over_sim_as_served"] = round(row["loop"] / row["sim_as_served"], 3)
    return row


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "loop_vs_simulate.json")
    ap.add_argument("--jobs", type=int, default=80)
    ap.add_argument("--seeds", default="41,42,43", help="trace seeds, comma-separated")
    ap.add_argument("--truths", default="contention,site-holdout")
    ap.add_argument("--model", type=Path, default=DEFAULT_MODEL_DIR, help="model directory the learned policy serves")
    ap.add_argument("--mode", default="advise", choices=("advise", "enforce"),
                    help="the daemon's mode (enforce: a hold becomes a node-count cap where one is expressible)")
    args = ap.parse_args(argv)
    nodes = default_cluster()
    rows, started = [], time.time()
    print(f"{'truth':<13} {'seed':>4} {'sim':>6} {'sim as sub.':>11} {'holds':>5} {'as served':>9} {'loop':>6} "
          f"{'loop/sim':>8} {'loop/served':>11} {'same nodes':>10} {'same start':>10} {'no outcome':>10}")
    for truth in args.truths.split(","):
        for seed in map(int, args.seeds.split(",")):
            row = one(nodes, truth, seed, args.jobs, args.model, args.mode)
            rows.append(row)
            print(f"{truth:<13} {seed:>4} {row['sim']:>6.3f} {row['sim_as_submitted']:>11.3f} "
                  f"{row['sim_as_submitted_holds']:>5} {row['sim_as_served']:>9.3f} {row['loop']:>6.3f} "
                  f"{row['loop_over_sim_as_submitted']:>8.3f} {row['loop_over_sim_as_served']:>11.3f} "
                  f"{row['per_job']['same_nodes']:>10.3f} {row['per_job']['same_start']:>10.3f} "
                  f"{row['loop_outcomes_missing']:>10}", flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"model": str(args.model), "cluster": "embedded default", "mode": args.mode,
                                    "seconds": round(time.time() - started, 1), "rows": rows}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
