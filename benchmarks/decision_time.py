"""In-process decision time: Advisor.advise on a loaded snapshot, p50/p99 per policy and size.

Clusters are built like examples/clusters/16x8.toml (48 CPUs, 8 GPUs, 384 GB per node) at
16, 1,000 and 10,000 nodes, on switches of 32 nodes (at 16 nodes: two switches of 8, exactly
the example file). The running load is what slurm-default makes of the benchmarks' mixes
(half Philly-like, half large jobs): each switch block is filled to ~60 % of its GPUs, then a
quarter of its jobs leave and it is refilled, twice, so free capacity is fragmented as on a
cluster that has run for a while. Each decision is timed on a fresh snapshot object (as the
simulator and the daemon make one per decision); between decisions the advised job starts and
a random running job ends, so the load stays near its level.

    python benchmarks/decision_time.py [--sizes 16,1000,10000] [--decisions 300] [--search-model DIR]
                                       [--gap-ms 2] [--backends numpy,torch]

``--search-model`` adds a row for the search (``policies/search.py``) over that model directory,
and one for ``learned-fast`` (what that model's gate picked without the search)
(it needs a model trained with the site speed model; the shipped default has the older one).

``--backends numpy,torch`` times every model-backed row twice, side by side: the model as served
(``models.served``: numpy only, what the daemon runs) and as the torch checkpoint of the same
directory (``learned.checkpoint``: the site ensemble's forward pass in torch; the policy network's
is numpy in both), and ends with a table of the two p99s. Every try of a decision goes to each
backend in turn, so that a neighbour's burst on a shared machine falls on both alike; ``differ``
counts the decisions where the second backend's advice was not the first's (it should be 0).
The default, numpy, needs no torch.

Columns: p50/p99/max over all decisions (each at its fastest of ``--repeats`` tries), the p99
over the Philly-like and the large-mix decisions apart, the p99 of the first tries, and a least-
squares fit of decision time against the job's task count: the cost per job and per task (where
a policy's time goes: once per decision, or once per task it places).

BLAS and torch run single-threaded (OPENBLAS_NUM_THREADS, OMP_NUM_THREADS, MKL_NUM_THREADS = 1
unless set, as the daemon sets them): a decision's matrix products are small, and OpenBLAS's
threads, on a machine whose cores are busy, made them 5-10x slower.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):  # as the daemon (cli/main.py),
    os.environ.setdefault(_var, "1")                                          # before numpy and torch load

import numpy as np

from slurm_advisor.advisor import Advisor
from slurm_advisor.domain import ClusterSnapshot, Job, Node, RunningJob
from slurm_advisor.models import served
from slurm_advisor.policies.learned.adapter import policy_of, search_of
from slurm_advisor.policies.learned.agent import LearnedPolicy
from slurm_advisor.policies.patience import PatientPolicy
from slurm_advisor.policies.slurm_default import SlurmDefaultPolicy
from slurm_advisor.traces.synthetic import synthetic_jobs

REPO = Path(__file__).resolve().parents[1]
TARGET_P99_MS = {1000: 2.0, 10000: 20.0}


def make_cluster(n: int) -> tuple[Node, ...]:
    """``n`` nodes shaped as in examples/clusters/16x8.toml, on switches of 32 nodes (n <= 16:
    two switches of n/2)."""
    block = max(1, n // 2) if n <= 16 else 32
    width = len(str(n))
    return tuple(Node(f"gpu{i + 1:0{width}d}", 48, 8, 384_000, f"s{i // block + 1}") for i in range(n))


def job_stream(n: int, seed: int) -> list[Job]:
    """Half Philly-like, half large-mix jobs, interleaved, with ids unique across streams."""
    philly = synthetic_jobs(n, seed=seed, mix="philly")
    large = synthetic_jobs(n, seed=seed + 1, mix="large")
    out = []
    for i in range(n):
        src = philly[i] if i % 2 == 0 else large[i]
        out.append(Job(f"s{seed}-{i}", src.type, src.num_ps, src.num_workers, src.ps_demand,
                       src.worker_demand, src.iterations, 0.0))
    return out


def loaded_snapshot(nodes: tuple[Node, ...], load: float = 0.6, seed: int = 0) -> ClusterSnapshot:
    """The cluster with ~``load`` of its GPUs taken by slurm-default's placements (see module doc)."""
    rng = np.random.default_rng(seed)
    blocks: dict[str, list[Node]] = {}
    for node in nodes:
        blocks.setdefault(node.switch, []).append(node)
    slurm = SlurmDefaultPolicy()
    running: list[RunningJob] = []
    free = {}
    for b, members in enumerate(blocks.values()):
        snap = ClusterSnapshot.empty(tuple(members))
        jobs = iter(job_stream(20 * len(members), seed * 100_003 + b))
        gpus = 8 * len(members)
        for _ in range(3):
            while sum(rj.job.total_demand().gpus for rj in snap.running) < load * gpus:
                job = next(jobs)
                placement = slurm.place(snap, job)
                if placement is not None:
                    snap = snap.with_job(job, placement, float(rng.uniform(-3600, 0)))
            for rj in [rj for rj in snap.running if rng.random() < 0.25]:
                snap = snap.without_job(rj.job.id)
        while sum(rj.job.total_demand().gpus for rj in snap.running) < load * gpus:
            job = next(jobs)
            placement = slurm.place(snap, job)
            if placement is not None:
                snap = snap.with_job(job, placement, float(rng.uniform(-3600, 0)))
        running.extend(snap.running)
        free.update(snap.free.items())
    return ClusterSnapshot(nodes, free, tuple(running), 0.0)


def load_model(model_dir: Path | None, backend: str):
    """The model in ``model_dir`` (None: the shipped one) as served (numpy) or as the torch checkpoint."""
    if backend == "torch":
        from slurm_advisor.training import checkpoint  # torch: only when asked for

        return checkpoint.load(model_dir)
    return served.load(model_dir)


def advisors(nodes, search_model: Path | None = None, backend: str = "numpy") -> dict[str, Advisor]:
    """The rows that load a model, from ``backend``'s loading of it."""
    model = load_model(None, backend)
    speed = model.speed_model
    slurm = SlurmDefaultPolicy()

    def network():
        return LearnedPolicy(model.policy, model.schema, mode="greedy")

    rows = {
        "learned (default model)": Advisor(policy_of(model, None), fallback=slurm),
        "network": Advisor(network(), fallback=slurm),
        "network, patience 0.85": Advisor(PatientPolicy(network(), speed, 0.85), fallback=slurm),
        "slurm-default, patience 0.85": Advisor(PatientPolicy(SlurmDefaultPolicy(), speed, 0.85),
                                                fallback=slurm),
    }
    if search_model:
        site = load_model(search_model, backend)
        rows["search"] = Advisor(search_of(site, search_model), fallback=slurm)
        rows["learned-fast"] = Advisor(policy_of(site, search_model, fast=True), fallback=slurm)
        rows["slurm-default, site patience 0.85"] = Advisor(
            PatientPolicy(SlurmDefaultPolicy(), site.speed_model, 0.85), fallback=slurm)
    return rows


def all_advisors(nodes, search_model: Path | None, backends: list[str]) -> dict[str, dict[str, Advisor]]:
    """Each row's advisor per backend: slurm-default (no model) once, the model-backed rows once
    per backend, to be timed side by side."""
    per_backend = {b: advisors(nodes, search_model, b) for b in backends}
    out = {"slurm-default": {backends[0]: Advisor(SlurmDefaultPolicy())}}
    for name in per_backend[backends[0]]:
        out[name] = {b: per_backend[b][name] for b in backends}
    return out


def measure(advisor: Advisor, base: ClusterSnapshot, decisions: int, seed: int, repeats: int,
            gap_s: float = 0.0) -> dict:
    """Each decision is timed ``repeats`` times on fresh snapshot objects of the same state and
    counts at its fastest: on a shared machine a neighbour's burst otherwise decides the p99.
    The first try of each decision is kept too (``first_*``). ``gap_s``: an idle pause before
    every try (outside the timing), as a daemon waits between requests."""
    return measure_side_by_side([advisor], base, decisions, seed, repeats, gap_s)[0]


def measure_side_by_side(advisors: list[Advisor], base: ClusterSnapshot, decisions: int, seed: int,
                         repeats: int, gap_s: float = 0.0) -> list[dict]:
    """``measure`` of several advisors at once: each try of a decision goes to every advisor in
    turn, so that a neighbour's burst falls on all of them alike. The cluster moves on by the
    first advisor's advice; ``differ`` counts the decisions where another's advice was not the same."""
    rng = np.random.default_rng(seed)
    jobs = job_stream(decisions, 7_000 + seed)
    snap = base
    times = [{"best": [], "first": [], "cpu": []} for _ in advisors]
    tasks, held, placed, differ = [], [0] * len(advisors), 0, [0] * len(advisors)
    for i, job in enumerate(jobs):
        tries = [[] for _ in advisors]
        for _ in range(repeats):
            advice = [_timed(a, snap.at(float(i)), job, np.random.default_rng((seed, i)), gap_s, t)
                      for a, t in zip(advisors, tries)]
        for k, t in enumerate(tries):
            times[k]["best"].append(min(w for w, _ in t))
            times[k]["cpu"].append(min(c for _, c in t))
            times[k]["first"].append(t[0][0])
            held[k] += advice[k].held
            differ[k] += (advice[k].placement, advice[k].held) != (advice[0].placement, advice[0].held)
        tasks.append(job.num_tasks)
        if advice[0].placement is not None:
            placed += 1
            snap = snap.with_job(job, advice[0].placement, float(i))
            victim = snap.running[int(rng.integers(len(snap.running) - 1))]
            snap = snap.without_job(victim.job.id)
    return [_row(t, tasks, decisions, repeats, placed, h, d) for t, h, d in zip(times, held, differ)]


def _timed(advisor: Advisor, fresh: ClusterSnapshot, job: Job, rng, gap_s: float, tries: list):
    """One try (a new snapshot object per decision, as the simulator makes): its advice; its wall
    and CPU time appended to ``tries``."""
    if gap_s:
        time.sleep(gap_s)
    c0 = time.process_time()  # outside the wall-clock window: a system call in this VM
    w0 = time.perf_counter()
    advice = advisor.advise(fresh, job, rng)
    w1 = time.perf_counter()
    tries.append((w1 - w0, time.process_time() - c0))
    return advice


def _row(t: dict, tasks: list[int], decisions: int, repeats: int, placed: int, held: int, differ: int) -> dict:
    def ms(xs, q):
        return float(np.percentile(np.array(xs) * 1000.0, q))
    best = t["best"]
    per_task_ms, per_job_ms = np.polyfit(tasks, np.array(best) * 1000.0, 1)
    return {"decisions": decisions, "repeats": repeats, "placed": placed, "held": held, "differ": differ,
            "p50_ms": ms(best, 50), "p99_ms": ms(best, 99), "max_ms": ms(best, 100),
            # job_stream alternates: even decisions are Philly-like jobs, odd ones large-mix jobs
            "p99_ms_philly_jobs": ms(best[0::2], 99), "p99_ms_large_jobs": ms(best[1::2], 99),
            "cpu_p50_ms": ms(t["cpu"], 50), "cpu_p99_ms": ms(t["cpu"], 99),
            "first_p50_ms": ms(t["first"], 50), "first_p99_ms": ms(t["first"], 99),
            "per_job_ms": float(per_job_ms), "per_task_us": float(per_task_ms * 1000.0)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--sizes", default="16,1000,10000")
    ap.add_argument("--decisions", type=int, default=300)
    ap.add_argument("--repeats", type=int, default=3, help="tries per decision; the fastest counts")
    ap.add_argument("--only", default="", help="comma-separated policy rows to run (default: all)")
    ap.add_argument("--search-model", type=Path, help="a model directory to time the search over")
    ap.add_argument("--gap-ms", type=float, default=0.0,
                    help="idle before every try, as a daemon between requests (caches go cold)")
    ap.add_argument("--backends", default="numpy",
                    help="comma-separated: numpy (the model as served), torch (its torch checkpoint)")
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "decision_time.json")
    args = ap.parse_args(argv)
    backends = args.backends.split(",")
    rows = {}
    print(f"{'nodes':>6} {'running':>8}  {'policy':<40}{'p50 ms':>9}{'p99 ms':>9}{'max ms':>9}"
          f"{'philly':>9}{'large':>9}{'1st p99':>9}{'held':>6}{'differ':>7}{'target':>8}{'/job ms':>9}{'/task us':>9}")
    for n in (int(s) for s in args.sizes.split(",")):
        nodes = make_cluster(n)
        t0 = time.perf_counter()
        base = loaded_snapshot(nodes)
        gpu_load = 1 - base.free_array()[:, 1].sum() / base.layout.capacity[:, 1].sum()
        build_s = time.perf_counter() - t0
        for name, by_backend in all_advisors(nodes, args.search_model, backends).items():
            if args.only and name not in args.only.split(","):
                continue
            for advisor in by_backend.values():
                advisor.advise(base, job_stream(1, 99)[0], np.random.default_rng(0))  # warm caches
            measured = measure_side_by_side(list(by_backend.values()), base, args.decisions, seed=n,
                                            repeats=args.repeats, gap_s=args.gap_ms / 1e3)
            for backend, row in zip(by_backend, measured):
                label = name if len(by_backend) == 1 else f"{name} [{backend}]"
                row.update(nodes=n, running=len(base.running), gpu_load=float(gpu_load), build_s=build_s,
                           gap_ms=args.gap_ms, backend=backend)
                rows[f"{n}/{label}"] = row
                _print_row(n, len(base.running), label, row)
    if len(backends) > 1:
        side_by_side(rows, backends)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(rows, indent=2))
    return 0


def _print_row(n: int, running: int, label: str, row: dict) -> None:
    target = TARGET_P99_MS.get(n)
    print(f"{n:>6} {running:>8}  {label:<40}{row['p50_ms']:>9.2f}{row['p99_ms']:>9.2f}"
          f"{row['max_ms']:>9.1f}{row['p99_ms_philly_jobs']:>9.2f}{row['p99_ms_large_jobs']:>9.2f}"
          f"{row['first_p99_ms']:>9.2f}{row['held']:>6}{row['differ']:>7}"
          f"{'' if target is None else f'<={target:g}':>8}{row['per_job_ms']:>9.2f}{row['per_task_us']:>9.0f}",
          flush=True)


def side_by_side(rows: dict[str, dict], backends: list[str]) -> None:
    """Per row, the p99 under each backend (wall and CPU time: on a shared machine the CPU time
    is the steadier) and their ratio, first to second, and how many decisions differed."""
    first, second = backends[:2]
    print(f"\n{'nodes':>6}  {'policy':<36}{'wall p99 ms':>20}{'ratio':>7}{'CPU p99 ms':>20}{'ratio':>7}{'differ':>8}")
    print(f"{'':>44}{first:>10}{second:>10}{'':>7}{first:>10}{second:>10}")
    for key, row in rows.items():
        n, _, name = key.partition("/")
        base = name.removesuffix(f" [{first}]")
        other = rows.get(f"{n}/{base} [{second}]")
        if base == name or other is None:
            continue
        print(f"{n:>6}  {base:<36}{row['p99_ms']:>10.3f}{other['p99_ms']:>10.3f}{row['p99_ms'] / other['p99_ms']:>7.2f}"
              f"{row['cpu_p99_ms']:>10.3f}{other['cpu_p99_ms']:>10.3f}{row['cpu_p99_ms'] / other['cpu_p99_ms']:>7.2f}"
              f"{other['differ']:>8}")


if __name__ == "__main__":
    sys.exit(main())
