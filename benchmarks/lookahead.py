"""Does looking further ahead pay? The search (``policies/search.py``) with a multi-step look-ahead,
against the one-step search it extends, on validation traces (issue 12 item 2).

The deployed search scores each candidate placement one step ahead: the job's own run time and
what it adds to its neighbours' (their completions projected), later arrivals left to the base
policy; and it never takes a candidate over more nodes than Slurm's, because the fragments such
a placement leaves are what the jobs behind it queue for, which one step does not see. The
look-ahead here sees them. For each candidate, every proposal over any number of nodes
included, the cluster is simulated on from now (``Simulation.continuing``): the job starts on
the candidate, the running jobs go on with the iterations they have left (what they have done
at their predicted speed since they started), the jobs the policy saw wait and has not placed
come again, and ``--arrivals`` later jobs arrive, drawn from the last 30 jobs it saw, at their
observed rate; slurm-default places them, with its backfill. The cost of a candidate is the
job-seconds of every job in the look-ahead, averaged over ``--draws`` draws of the arrivals
(the same draws for every candidate); the cheapest replaces the one-step search's own choice
when it saves more than ``--margin`` of the job's run time. Speeds come from the model's fitted
ensemble (``lookahead``) or, as the best any look-ahead of this kind could do, from the ground
truth itself (``lookahead-true``: a look-ahead that knew the true speeds).

    python benchmarks/lookahead.py --models M [--truths contention,site-holdout]
                                   [--traces 401,402,403] [--loads 0.5,0.7] [--arrivals 10] [--draws 4]
                                   [--same-width]

``M`` is what ``load_sweep.py --models M`` keeps (``M/<truth>-large/seed<S>/learned``). Prints,
per truth and load, each row's avg JCT against slurm-default's per trace and their mean, and
the look-ahead's decisions (how many differ from the one-step search's, ms per decision); writes
JSON. A look-ahead costs 50-800 ms a decision at 16 nodes: a benchmark, not a deployable policy.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time
import zlib
from collections import OrderedDict
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before numpy loads BLAS

import numpy as np  # after the thread settings

sys.path.insert(0, str(Path(__file__).resolve().parent))
import load_sweep  # the sweep's truths, traces and cluster

from slurm_advisor.advisor import Advisor
from slurm_advisor.domain import ClusterSnapshot, Job, Placement
from slurm_advisor.policies.isolated import IsolatedSpeeds
from slurm_advisor.policies.learned.adapter import load_search_policy
from slurm_advisor.policies.search import SearchPolicy, _ps_beside_workers, _remaining, _shape
from slurm_advisor.policies.slurm_default import SlurmDefaultPolicy
from slurm_advisor.sim.clusterfile import read_cluster
from slurm_advisor.sim.engine import Simulation
from slurm_advisor.sim.workload import at_offered_load
from slurm_advisor.speedmodels import load_speed_model

HISTORY = 30  # the recent jobs later arrivals are drawn from


class LookaheadSearch:
    """The one-step search's decision, overridden where the look-ahead finds a cheaper candidate."""

    def __init__(self, search: SearchPolicy, rollout_speeds, *, arrivals: int, draws: int, margin: float,
                 name: str, wider: bool = True):
        self.search, self.rollout_speeds, self.name, self.wider = search, rollout_speeds, name, wider
        self.arrivals, self.draws, self.margin = arrivals, draws, margin
        self.seen: OrderedDict[str, Job] = OrderedDict()
        self.started: set[str] = set()
        self.rollout_advisor = Advisor(SlurmDefaultPolicy())
        self.isolated: IsolatedSpeeds | None = None
        self.decisions = self.changed = 0
        self.seconds = 0.0

    def place(self, snapshot: ClusterSnapshot, job: Job, rng: np.random.Generator):
        self.seen[job.id] = job
        self.seen.move_to_end(job.id)
        if len(self.seen) > HISTORY:
            self.seen.popitem(last=False)
        self.started.update(rj.job.id for rj in snapshot.running)
        one_step = self.search.place(snapshot, job, rng)
        if not isinstance(one_step, Placement):
            return one_step  # None, or a hold
        named = self._candidates(snapshot, job, one_step, rng)
        choice = one_step
        if len(named) > 1:
            t0 = time.perf_counter()
            left = self._left(snapshot)
            later = [self._later_jobs(snapshot.time, job, d) for d in range(self.draws)]  # every candidate's
            costs = np.array([np.mean([self._cost(snapshot, job, p, left, jobs) for jobs in later]) for p in named])
            self.seconds += time.perf_counter() - t0
            self.decisions += 1
            own = job.iterations / self.search.speed.predict(snapshot, job, one_step)
            best = int(np.argmin(costs))
            if (costs[0] - costs[best]) / own > self.margin:
                choice = named[best]
                self.changed += 1
        self.started.add(job.id)
        return choice

    def score_nodes(self, snapshot: ClusterSnapshot, job: Job) -> dict[str, float]:
        return self.search.score_nodes(snapshot, job)

    def _candidates(self, snapshot, job: Job, one_step: Placement, rng) -> list[Placement]:
        """The one-step search's choice first, then Slurm's and every proposal, over any number of
        nodes (``wider``) or, as the search's own, over no more nodes than Slurm's."""
        base = self.search.base.place(snapshot, job, rng)
        proposals = [base, *(p.place(snapshot, job, rng) for p in self.search.proposers),
                     _ps_beside_workers(snapshot, job, base) if isinstance(base, Placement) else None]
        out, seen = [one_step], {_shape(one_step)}
        width = len(base.nodes()) if isinstance(base, Placement) and not self.wider else len(snapshot.nodes)
        for p in proposals:
            if (isinstance(p, Placement) and len(p.nodes()) <= width and _shape(p) not in seen
                    and snapshot.fits(job, p)):
                seen.add(_shape(p))
                out.append(p)
        return out

    def _later_jobs(self, now: float, job: Job, draw: int) -> list[Job]:
        """The jobs seen waiting (again, now) and ``arrivals`` drawn from the recent ones."""
        recent = list(self.seen.values())
        waiting = [dataclasses.replace(j, submit_time=now) for j in recent
                   if j.id not in self.started and j.id != job.id]
        if len(recent) < 3:
            return waiting
        times = sorted(j.submit_time for j in recent)
        rate = (len(times) - 1) / max(1.0, times[-1] - times[0])
        rng = np.random.default_rng([zlib.crc32(job.id.encode()), draw])  # the same draws for every candidate
        t, later = now, []
        for i in range(self.arrivals):
            t += rng.exponential(1.0 / rate)
            later.append(dataclasses.replace(recent[int(rng.integers(len(recent)))], id=f"~later{i}", submit_time=t))
        return waiting + later

    def _left(self, snapshot: ClusterSnapshot) -> dict[str, float]:
        """The running jobs' iterations left: what they have done at their speed now (before the
        job starts: one estimate for every candidate), at least a tenth, as the search's."""
        if not snapshot.running:
            return {}
        speeds = self.rollout_speeds.speeds(snapshot.nodes, snapshot.running)
        return {rj.job.id: float(_remaining(rj, snapshot.time, speeds[rj.job.id])) for rj in snapshot.running}

    def _cost(self, snapshot: ClusterSnapshot, job: Job, placement: Placement, left: dict[str, float],
              later: list[Job]) -> float:
        now, model = snapshot.time, self.rollout_speeds
        if self.isolated is None or self.isolated.empty.nodes != snapshot.nodes:
            self.isolated = IsolatedSpeeds(model, snapshot.nodes)
        sim = Simulation.continuing(snapshot.with_job(job, placement, now), {**left, job.id: job.iterations},
                                    later, self.rollout_advisor, model,
                                    isolated=self.isolated)
        return sum(r.end - max(r.submit, now) for r in sim.run().records)


def run_setting(nodes, truth_name: str, model: Path, trace: int, load: float, args) -> dict:
    spec, types = load_sweep.TRUTHS[truth_name]
    truth = load_speed_model(spec)
    _, _, (raw,) = load_sweep.traces("large", types, args.jobs, [trace])
    jobs = at_offered_load(raw, nodes, truth, load)
    fallback = SlurmDefaultPolicy()
    search = load_search_policy(model)
    policies = {"slurm-default": SlurmDefaultPolicy(), "search": search}
    for name, speeds in (("lookahead", search.speed), ("lookahead-true", truth)):
        policies[name] = LookaheadSearch(load_search_policy(model), speeds, arrivals=args.arrivals,
                                         draws=args.draws, margin=args.margin, name=name,
                                         wider=not args.same_width)
    out = {}
    for name, policy in policies.items():
        result = Simulation(nodes, jobs, Advisor(policy, fallback=fallback), truth, seed=0).run()
        out[name] = {"avg_jct": result.summary()["avg_jct"]}
        if isinstance(policy, LookaheadSearch):
            out[name].update(decisions=policy.decisions, changed=policy.changed,
                             ms_per_decision=1000 * policy.seconds / max(1, policy.decisions))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", type=Path, required=True, help="load_sweep.py's --models directory")
    ap.add_argument("--seed", type=int, default=1, help="the training seed whose model to use")
    ap.add_argument("--truths", default="contention,site-holdout")
    ap.add_argument("--traces", default="401,402,403", help="validation traces (load_sweep's first test seeds)")
    ap.add_argument("--loads", default="0.5,0.7")
    ap.add_argument("--arrivals", type=int, default=10, help="later arrivals in each look-ahead")
    ap.add_argument("--draws", type=int, default=4, help="draws of the later arrivals per candidate")
    ap.add_argument("--margin", type=float, default=0.1, help="least saving, as a share of the job's run time")
    ap.add_argument("--same-width", action="store_true",
                    help="candidates over no more nodes than Slurm's, as the one-step search's")
    ap.add_argument("--jobs", type=int, default=300, help="jobs per trace (as the sweep's)")
    ap.add_argument("--out", type=Path, default=load_sweep.REPO / "benchmarks" / "results" / "lookahead.json")
    args = ap.parse_args(argv)
    nodes = read_cluster(load_sweep.REPO / "examples" / "clusters" / "16x8.toml")
    traces = [int(t) for t in args.traces.split(",")]
    results: dict = {"args": {k: str(v) for k, v in vars(args).items()}, "settings": {}}
    for truth_name in args.truths.split(","):
        model = args.models / f"{truth_name}-large" / f"seed{args.seed}" / "learned"
        for load in [float(x) for x in args.loads.split(",")]:
            runs = [run_setting(nodes, truth_name, model, t, load, args) for t in traces]
            results["settings"][f"{truth_name}@{load}"] = dict(zip(map(str, traces), runs))
            print_setting(truth_name, load, traces, runs)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=1))
    print(f"wrote {args.out}")
    return 0


def print_setting(truth_name: str, load: float, traces: list[int], runs: list[dict]) -> None:
    print(f"\n{truth_name}, load {load}: avg JCT / slurm-default's, per trace ({', '.join(map(str, traces))}) and mean")
    for name in runs[0]:
        ratios = [r[name]["avg_jct"] / r["slurm-default"]["avg_jct"] for r in runs]
        extra = ""
        if "changed" in runs[0][name]:
            extra = (f"   changed {sum(r[name]['changed'] for r in runs)} of {sum(r[name]['decisions'] for r in runs)}"
                     f" decisions, {np.mean([r[name]['ms_per_decision'] for r in runs]):.0f} ms each")
        print(f"  {name:15s} " + "  ".join(f"{x:.3f}" for x in ratios) + f"   mean {np.mean(ratios):.3f}{extra}")


if __name__ == "__main__":
    sys.exit(main())
