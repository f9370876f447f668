"""How much is there to gain at all on a truth, and where does the loop lose it (issue 40)?

On the closed loop's traces (``large`` mix at the demo's offered load, 16x8 cluster), each trace
is run by:

- ``slurm-default``: the loop's yardstick;
- ``search/true``: the deployed search (``policies/search.py``: Slurm's choice as the base,
  every baseline as a proposer, no network) scoring its candidates with the *ground truth
  itself* instead of a fitted model: what the search could do if its speed model were perfect,
  an upper bound on what the loop can learn with these candidates. ``advise`` as the daemon
  serves it in advise mode (a hold is left to Slurm), ``enforce`` with holds as node-count caps;
- ``search/true wide``: the same, its candidates allowed more nodes than Slurm's choice;
- ``search/fitted``: the same search over a speed model fitted as a retrain fits it, on the
  speeds logged while slurm-default ran ``--fit-traces`` other traces of the same truth (one
  loop cycle's worth each): what the fitted model gives up against the truth;
- ``oracle``: the myopic reference (``policies/oracle.py``).

    python benchmarks/loop_headroom.py --truth benchmarks/truths/sockets.py:SocketSpeeds \
        [--seeds 71,72,73] [--jobs 120] [--fit-traces 171,172] [--rows ...] [--out ...]

Rows (``--rows``, comma-separated): slurm-default, true-advise, true-advise-nohold (the search
without its hold candidate), true-enforce, true-wide, fitted-advise, fitted-advise-nohold,
fitted-enforce, oracle. Each prints how many of its decisions left Slurm's choice.

Prints avg JCT (h) per trace and its ratio to slurm-default; writes JSON. One simulation per
cell, sim seed 0: the policies are deterministic given the trace, so the noise is the traces'.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Collection, Iterable, Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np

from slurm_advisor.advisor import Advisor
from slurm_advisor.domain import ClusterSnapshot, Job, Node, Placement, RunningJob
from slurm_advisor.experiments.demo import loaded_trace
from slurm_advisor.experiments.experiment import record
from slurm_advisor.learned.hyper import Hyper
from slurm_advisor.loop.hook import as_submitted
from slurm_advisor.policies import make_policy
from slurm_advisor.policies.search import PROPOSERS, SearchPolicy
from slurm_advisor.policies.slurm_default import SlurmDefaultPolicy
from slurm_advisor.policies.speed import WhatIf
from slurm_advisor.sim.clusterfile import read_cluster
from slurm_advisor.sim.engine import Simulation
from slurm_advisor.sim.runner import build_advisor
from slurm_advisor.speedmodels import load_speed_model
from slurm_advisor.training.train import avg_jct

REPO = Path(__file__).resolve().parents[1]


class TruthEnsemble:
    """A ground truth behind the ``SpeedEnsemble`` protocol, one member: the search as it would
    choose with a perfect speed model. Every question asks the truth about the whole cluster
    (the running jobs, plus what the case starts), so non-local truths are answered right."""

    name = "truth"
    local = False

    def __init__(self, truth):
        self.truth = truth

    def warm(self, snapshot: ClusterSnapshot) -> None:
        pass

    def speeds(self, nodes: Sequence[Node], running: Sequence[RunningJob],
               only: Collection[str] | None = None) -> dict[str, float]:
        return self.truth.speeds(nodes, running, only)

    def predict(self, snapshot: ClusterSnapshot, job: Job, placement: Placement) -> float:
        return self.predict_after(snapshot, job, placement, ())

    def predict_after(self, snapshot: ClusterSnapshot, job: Job, placement: Placement,
                      gone: Iterable[RunningJob]) -> float:
        left = {rj.job.id for rj in gone}
        running = [rj for rj in snapshot.running if rj.job.id not in left and rj.job.id != job.id]
        return self.truth.speeds(snapshot.nodes, [*running, RunningJob(job, placement, snapshot.time)], {job.id})[job.id]

    def log_speeds_what_if(self, snapshot: ClusterSnapshot, cases: Sequence[WhatIf]) -> np.ndarray:
        out = []
        for started, asked in cases:
            ids = {s.job.id for s in started}
            running = [rj for rj in snapshot.running if rj.job.id not in ids] + list(started)
            speeds = self.truth.speeds(snapshot.nodes, running, {rj.job.id for rj, _ in asked})
            out += [math.log(max(1e-9, speeds[rj.job.id])) for rj, _ in asked]
        return np.array([out])


class WideSearch(SearchPolicy):
    """The search with candidates over any number of nodes (the deployed one keeps to Slurm's width)."""

    def _candidates(self, snapshot, job, base, rng):
        out, seen = [(self.base.name, base)], {tuple(sorted(base.per_node()))}
        for p in self.proposers:
            placement = p.place(snapshot, job, rng)
            if isinstance(placement, Placement) and tuple(sorted(placement.per_node())) not in seen \
                    and snapshot.fits(job, placement):
                seen.add(tuple(sorted(placement.per_node())))
                out.append((p.name, placement))
        return out


def search(speed, *, hold: bool, wide: bool = False) -> SearchPolicy:
    proposers = [make_policy(name) for name in PROPOSERS]
    cls = WideSearch if wide else SearchPolicy
    return cls(SlurmDefaultPolicy(), proposers, speed, hold=hold)


def run(nodes, jobs, policy, truth, mode: str) -> tuple[float, int]:
    """Avg JCT as the daemon would serve ``policy`` in ``mode`` (advise: holds left to Slurm), and
    how many decisions took another candidate than Slurm's choice (a hold counts)."""
    enforce = mode == "enforce"
    taken = [0]
    if isinstance(policy, SearchPolicy):
        place = policy.place

        def counting(snapshot, job, rng):
            out = place(snapshot, job, rng)
            taken[0] += any(v > policy.margin for v in policy.last.values()) and out is not None
            return out
        policy.place = counting
    advisor = Advisor(policy, fallback=SlurmDefaultPolicy(), holds=enforce, caps=enforce)
    return avg_jct(Simulation(nodes, jobs, advisor, truth, seed=0).run()), taken[0]


def fitted_model(nodes, truth, fit_seeds: Sequence[int], jobs: int, hp: Hyper):
    """A speed model fitted as a retrain fits one, on slurm-default's logged speeds of other traces."""
    from slurm_advisor.learned.speed.fit import fit_site_model

    samples = []
    for s in fit_seeds:
        trace = [as_submitted(j, 1000 + i) for i, j in enumerate(loaded_trace(nodes, truth, jobs, s))]
        samples += record(nodes, trace, truth, ("slurm-default",), seed=s)
    model, _ = fit_site_model(samples, hp)
    return model, len(samples)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--truth", default="benchmarks/truths/sockets.py:SocketSpeeds")
    ap.add_argument("--seeds", type=lambda v: [int(x) for x in v.split(",")], default=[71, 72, 73])
    ap.add_argument("--jobs", type=int, default=120)
    ap.add_argument("--fit-traces", type=lambda v: [int(x) for x in v.split(",") if x], default=[171, 172],
                    help="trace seeds whose slurm-default speeds the fitted model learns from ('' to skip)")
    ap.add_argument("--rows", default="slurm-default,true-advise,true-enforce,true-wide,fitted-advise,oracle")
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "loop_headroom.json")
    args = ap.parse_args(argv)
    nodes = read_cluster(REPO / "examples" / "clusters" / "16x8.toml")
    truth = load_speed_model(args.truth)
    rows = args.rows.split(",")
    hp = replace(Hyper(), speed_epochs=40)
    policies = {"true-advise": lambda: (search(TruthEnsemble(truth), hold=True), "advise"),
                "true-advise-nohold": lambda: (search(TruthEnsemble(truth), hold=False), "advise"),
                "true-enforce": lambda: (search(TruthEnsemble(truth), hold=True), "enforce"),
                "true-wide": lambda: (search(TruthEnsemble(truth), hold=False, wide=True), "advise"),
                "oracle": lambda: (build_advisor("oracle", truth).policy, "advise")}
    info = {}
    if any(r.startswith("fitted") for r in rows) and args.fit_traces:
        started = time.time()
        model, n = fitted_model(nodes, truth, args.fit_traces, args.jobs, hp)
        info["fitted"] = {"samples": n, "traces": args.fit_traces, "seconds": round(time.time() - started, 1)}
        policies["fitted-advise"] = lambda: (search(model, hold=True), "advise")
        policies["fitted-advise-nohold"] = lambda: (search(model, hold=False), "advise")
        policies["fitted-enforce"] = lambda: (search(model, hold=True), "enforce")
    results: dict[str, list[float]] = {r: [] for r in rows}
    departures: dict[str, list[int]] = {r: [] for r in rows}
    for seed in args.seeds:
        # as the loop submits them: homogeneous Slurm jobs (loop/hook.py), numeric ids
        jobs = [as_submitted(j, 1000 + i) for i, j in enumerate(sorted(loaded_trace(nodes, truth, args.jobs, seed),
                                                                        key=lambda j: j.submit_time))]
        for r in rows:
            started = time.time()
            policy, mode = (SlurmDefaultPolicy(), "advise") if r == "slurm-default" else policies[r]()
            jct, taken = run(nodes, jobs, policy, truth, mode)
            results[r].append(jct)
            departures[r].append(taken)
            print(f"seed {seed} {r:<16} {jct / 3600:8.2f} h, {taken} decisions not Slurm's "
                  f"({time.time() - started:.0f} s)", file=sys.stderr)
    print(table(rows, args.seeds, results))
    out = {"truth": args.truth, "seeds": args.seeds, "jobs": args.jobs, "cluster": "examples/clusters/16x8.toml",
           "avg_jct": results, "departures": departures, **info}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=2))
    return 0


def table(rows, seeds, results) -> str:
    base = results.get("slurm-default")
    lines = [f"{'policy':<16} " + " ".join(f"{'seed ' + str(s):>16}" for s in seeds) + f" {'mean ratio':>10}"]
    for r in rows:
        cells, ratios = [], []
        for i, jct in enumerate(results[r]):
            ratio = jct / base[i] if base else math.nan
            ratios.append(ratio)
            cells.append(f"{jct / 3600:7.2f} h {ratio:5.2f}")
        lines.append(f"{r:<16} " + " ".join(f"{c:>16}" for c in cells) + f" {np.mean(ratios):>10.3f}")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
