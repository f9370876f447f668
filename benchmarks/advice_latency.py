"""Advice round trip through the daemon's socket: p50/p99 per cluster size and policy, and sustained
advices per second.

The daemon runs in its own process (as in production), over a simulated cluster built as in
benchmarks/decision_time.py (16, 1,000 and 10,000 nodes shaped like examples/clusters/16x8.toml,
~60 % of the GPUs taken by slurm-default's placements of the benchmark mixes, fragmented). It
records every decision into a SQLite store, as deployed. The client does what job_submit.lua
does: a new connection per request, one line out, one line back. Requests are the benchmark
mixes' jobs as the hook sends them (``loop.hook``: uniform per-task demand, memory per CPU). Claims
last 1 s, so the load stays near its level instead of filling up with promised capacity. Each
decision records its evidence (daemon/evidence.py) as the daemon does: predicted by the packaged
model's speed model, with ``--evidence-alternatives`` (default 2, the config's default) feasible
alternatives; 0 measures what the alternatives cost. The evidence is computed after the reply, by
the daemon's evidence worker, never during a request nor within 5 ms after one
(daemon/evidence_worker.py): during
the back-to-back runs below it waits, and what its queue (1,000) cannot hold is dropped;
``ev dropped`` is the share of the decisions with a layout to weigh (the others have no evidence
to compute: with claims lasting 1 s the sustained runs fill the cluster) left without evidence so.

    python benchmarks/advice_latency.py [--sizes 16,1000,10000] [--requests 500] [--seconds 5]
                                        [--hook-calls 300] [--no-spool] [--evidence-alternatives 2]

``--hook-calls N`` also runs the real hooks/job_submit.lua (under lua5.1 with the tests' mocked
``slurm``, tests/hooks/lua/driver.lua: one Lua state, as in slurmctld) N times against the same
daemon, cycling through three of the mix's job shapes 20 ms apart, and reports the time each call
took: with repeat requests most are answered from the daemon's ready answers (daemon/ready.py)
without a round trip, so this is the time a site's controller is blocked per advised job.

``--breakdown`` instead times the daemon's stages in-process (no socket), each request once, in
the order the socket path runs them: where a round trip's time goes.

Columns: round-trip p50/p99/max (ms) over sequential requests; advices/s with one client (the
hook is serialised by slurmctld's Lua lock) and with two client processes; the share answered
"place" (the rest are mostly "observe": the policy chose what Slurm would, so nothing is pinned). Targets: p99 <= 2 ms at 1,000 nodes, <= 20 ms at 10,000; >= 1,000 advices/s.
"""
from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import replace
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parents[1] / "tests" / "hooks"))
from decision_time import job_stream, loaded_snapshot, make_cluster

from slurm_advisor.daemon.client import DaemonUnavailable, call
from slurm_advisor.loop.hook import as_submitted
from slurm_advisor.loop.hook import hook_fields as submitted_fields

REPO = Path(__file__).resolve().parents[1]
POLICIES = ("slurm-default", "learned")
TARGET_P99_MS = {1000: 2.0, 10000: 20.0}
TARGET_PER_S = 1000


def hook_fields(job, slurm_id: int) -> dict:
    """What job_submit.lua sends for ``job`` (memory per CPU, as sbatch --mem-per-cpu): the
    loop's transcription of the hook, so that the daemon's whole path runs, the check whether
    Slurm would choose the same nodes included."""
    return submitted_fields(as_submitted(job, slurm_id), uid=0)


# -- the daemon process ---------------------------------------------------------------------
class LoadedSource:
    name = "simulated"

    def __init__(self, snapshot):
        self._snapshot = snapshot

    def snapshot(self):
        return self._snapshot


def build_daemon(nodes: int, policy: str, socket_path: Path, db: Path, spool: bool = True, alternatives: int = 2):
    """The daemon as the benchmark runs it (not started): (daemon, its service, its advisor).
    ``spool`` False: its spool directory cannot be made, so decisions are acknowledged from memory
    as before the spool (daemon/spool.py) — the spool's cost, measured on one machine."""
    from slurm_advisor.advisor import Advisor
    from slurm_advisor.daemon.build import model_version
    from slurm_advisor.daemon.config import DaemonConfig
    from slurm_advisor.daemon.daemon import Daemon
    from slurm_advisor.daemon.queue import NoQueue
    from slurm_advisor.daemon.service import AdviceService
    from slurm_advisor.daemon.state import speed_model_of
    from slurm_advisor.policies import make_policy
    from slurm_advisor.policies.slurm_default import SlurmDefaultPolicy
    from slurm_advisor.slurm.expressible import express
    from slurm_advisor.store import Store

    snapshot = loaded_snapshot(make_cluster(nodes))
    config = replace(DaemonConfig(), mode="advise", socket=socket_path, db=str(db), claim_ttl_s=1.0, refresh_s=1.0)
    if not spool:
        (socket_path.parent / "no-spool").write_text("")
        config = replace(config, spool_dir=socket_path.parent / "no-spool" / "spool")
    # as build_daemon: each decision's evidence predicted by the model's speed model (the packaged
    # model's for slurm-default)
    learned = policy == "learned"
    advisor = Advisor(make_policy(policy), fallback=SlurmDefaultPolicy() if learned else None,
                      predictor=speed_model_of(None) if learned else None)
    service = AdviceService(advisor, express, model_version=model_version(None) if learned else None,
                            has_switches=True, speed=(None, None) if learned else (speed_model_of(None),
                                                                                   model_version(None)),
                            alternatives=alternatives)
    return Daemon(config, LoadedSource(snapshot), NoQueue(), service, Store.open(str(db))), service, advisor


def serve(nodes: int, policy: str, socket_path: Path, db: Path, spool: bool = True, alternatives: int = 2) -> None:
    from slurm_advisor.daemon.server import AdvisorServer

    daemon, _, _ = build_daemon(nodes, policy, socket_path, db, spool, alternatives)
    server = AdvisorServer(socket_path, daemon.dispatcher(), 2.0, taken=daemon.ready is not None)
    daemon.start()
    # As `serve` stops: the loop ends, then the daemon (its decision writer process included).
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=server.shutdown, daemon=True).start())
    print(f"ready {len(daemon.state.latest().running)}", flush=True)
    server.serve_forever(poll_interval=0.2)
    server.server_close()
    daemon.stop()


# -- the stages, in-process -----------------------------------------------------------------
STAGES = ("reply_to", "service.advise", "advisor.advise", "slurm_choice", "express", "evidence", "claims.add",
          "state.snapshot", "patience.alone", "evidence (worker)")
TASK_BUCKETS = ((1, 1), (2, 8), (9, 16), (17, 64))


class FullCollections:
    """Python's full (generation 2) garbage collections while it is on: count and pause."""

    def __init__(self):
        self.pauses: list[float] = []
        self._started, self.on = 0.0, False

    def __call__(self, phase: str, info: dict) -> None:
        if not self.on or info["generation"] != 2:
            return
        if phase == "start":
            self._started = time.perf_counter()
        else:
            self.pauses.append(time.perf_counter() - self._started)


def breakdown(nodes: int, policy: str, n_requests: int) -> dict:
    """Time each stage of the daemon's advise path (Dispatcher.reply_to on the encoded request
    line, as the server calls it), each request once. Stages are timed by wrapping them, so a
    stage's time includes the stages inside it (``reply_to`` is the whole request);
    ``patience.alone`` is the hold check's prediction of a job's speed alone (learned only).
    Also: the policy's first warm-up (``Advisor.warm``, in the refresh thread at the daemon's
    start: what a request paid before it existed) and the full garbage collections during the
    requests."""
    import gc

    from slurm_advisor.daemon import protocol
    from slurm_advisor.daemon import service as service_module

    times: dict[str, list[float]] = {stage: [] for stage in STAGES}
    slurm_choice = service_module.slurm_choice

    def timed(owner, name: str, stage: str) -> None:
        inner = getattr(owner, name)

        def wrapper(*args, **kwargs):
            t0 = time.perf_counter()
            try:
                return inner(*args, **kwargs)
            finally:
                times[stage].append(time.perf_counter() - t0)
        setattr(owner, name, wrapper)

    collections = FullCollections()
    gc.callbacks.append(collections)
    with tempfile.TemporaryDirectory(prefix="advice-breakdown-") as tmp:
        daemon, service, advisor = build_daemon(nodes, policy, Path(tmp) / "advisor.sock", Path(tmp) / "advisor.db")
        warm_ups: list[float] = []
        warm = advisor.warm
        advisor.warm = lambda snapshot: warm_ups.append(_seconds(warm, snapshot))
        daemon.start()
        try:
            dispatcher = daemon.dispatcher()
            jobs = job_stream(n_requests, 11_000 + nodes)
            lines = [protocol.encode({"op": "advise", "job": hook_fields(j, 1000 + i)}) for i, j in enumerate(jobs)]
            for line in lines[:30]:  # warm up, as the round trips do
                dispatcher.reply_to(line, 0)
            for stage, (owner, name) in zip(STAGES, ((dispatcher, "reply_to"), (service, "advise"),
                                                     (advisor, "advise"), (service_module, "slurm_choice"),
                                                     (service, "_expressed"), (service, "_evidence"),
                                                     (daemon.state.claims, "add"),
                                                     (daemon.state, "snapshot"), (advisor.policy, "alone"),
                                                     (daemon.evidence, "_one"))):
                if hasattr(owner, name):
                    timed(owner, name, stage)
            collections.on = True
            for line in lines:
                dispatcher.reply_to(line, 0)
            collections.on = False
            daemon.evidence.drain(120)  # after the requests, in the worker: "evidence (worker)"
        finally:
            service_module.slurm_choice = slurm_choice  # a module function: the next run wraps it anew
            gc.callbacks.remove(collections)
            daemon.stop()
    return {"nodes": nodes, "policy": policy, "requests": n_requests,
            "stages": {stage: _percentiles(ts) for stage, ts in times.items() if ts},
            "advisor_by_tasks": {f"{lo}-{hi}": {"jobs": int(m.sum()), **_percentiles(np.array(times["advisor.advise"])[m])}
                                 for lo, hi in TASK_BUCKETS
                                 for m in [np.array([lo <= j.num_tasks <= hi for j in jobs])] if m.any()},
            "first_warm_up_ms": warm_ups[0] * 1e3,
            "full_collections": len(collections.pauses),
            "full_collection_max_ms": max(collections.pauses, default=0.0) * 1e3}


def _seconds(call, *args) -> float:
    t0 = time.perf_counter()
    call(*args)
    return time.perf_counter() - t0


def _percentiles(seconds) -> dict:
    ms = np.asarray(seconds) * 1e3
    return {"calls": len(ms), "mean_ms": float(ms.mean()), "p50_ms": float(np.percentile(ms, 50)),
            "p99_ms": float(np.percentile(ms, 99)), "max_ms": float(ms.max())}


def print_breakdown(row: dict) -> None:
    print(f"{row['nodes']} nodes, {row['policy']}: {row['requests']} requests in-process, ms")
    print(f"  {'stage':<18}{'calls':>6}{'mean':>8}{'p50':>8}{'p99':>8}{'max':>8}")
    for stage, r in row["stages"].items():
        print(f"  {stage:<18}{r['calls']:>6}{r['mean_ms']:>8.3f}{r['p50_ms']:>8.3f}{r['p99_ms']:>8.3f}{r['max_ms']:>8.2f}")
    for tasks, r in row["advisor_by_tasks"].items():
        print(f"  advisor, {tasks:>5} tasks{r['jobs']:>6}{r['mean_ms']:>8.3f}{r['p50_ms']:>8.3f}{r['p99_ms']:>8.3f}"
              f"{r['max_ms']:>8.2f}")
    print(f"  the policy's first warm-up (refresh thread): {row['first_warm_up_ms']:.1f} ms; full garbage "
          f"collections during the requests: {row['full_collections']} (longest {row['full_collection_max_ms']:.1f} ms)")


# -- the client -----------------------------------------------------------------------------
def round_trips(path: Path, requests: list[dict]) -> tuple[list[float], int]:
    times, placed = [], 0
    for fields in requests:
        t0 = time.perf_counter()
        reply = call(path, "advise", job=fields)
        times.append(time.perf_counter() - t0)
        placed += reply.get("action") == "place"
    return times, placed


def written(path: Path, decisions: int, timeout_s: float = 60.0) -> None:
    """Until the daemon's store holds ``decisions`` decisions."""
    deadline = time.monotonic() + timeout_s
    while call(path, "status").get("decisions_written", 0) < decisions:
        if time.monotonic() > deadline:
            raise RuntimeError(f"the daemon wrote fewer than {decisions} decisions in {timeout_s:g} s")
        time.sleep(0.05)


def _sustain(path: str, requests: list[dict], seconds: float, out) -> None:
    done, deadline, i = 0, time.monotonic() + seconds, 0
    while time.monotonic() < deadline:
        call(path, "advise", job=requests[i % len(requests)])
        done, i = done + 1, i + 1
    out.put(done)


def sustained(path: Path, requests: list[dict], seconds: float, clients: int) -> float:
    out = multiprocessing.Queue()
    procs = [multiprocessing.Process(target=_sustain, args=(str(path), requests[k::clients], seconds, out))
             for k in range(clients)]
    for p in procs:
        p.start()
    total = sum(out.get() for _ in procs)
    for p in procs:
        p.join()
    return total / seconds


def lua_case(fields: dict) -> dict:
    """The job_submit.lua descriptor fields for a request (the inverse of the hook's read_job)."""
    case = {k: fields[k] for k in ("comment", "num_tasks", "cpus_per_task", "tres_per_task", "time_limit")
            if fields.get(k) is not None}
    case["mem_per_cpu" if fields.get("mem_per_cpu") else "mem_per_node"] = fields["pn_min_memory"]
    return {**case, "name": "bench", "user_id": 0, "environment": {"HOME": "/root"}}


def hook_calls(path: Path, requests: list[dict], calls: int) -> list[float]:
    """The real hook's time per call (ms) over ``calls`` calls cycling through three job shapes."""
    from lua_driver import lua_literal  # tests/hooks: the same Lua encoding the hook tests use

    driver = REPO / "tests" / "hooks" / "lua" / "driver.lua"
    with tempfile.TemporaryDirectory(prefix="hook-bench-") as tmp:
        case = Path(tmp) / "jobs.lua"
        case.write_text("return {" + ",".join(lua_literal(lua_case(f)) for f in requests[:3]) + "}\n")
        env = {**os.environ, "SLURM_ADVISOR_SOCKET": str(path), "SLURM_ADVISOR_TIMEOUT": "0.5",
               "SLURM_ADVISOR_KILL_SWITCH": str(Path(tmp) / "disabled")}
        proc = subprocess.run(["lua5.1", str(driver), "bench", str(REPO / "hooks" / "job_submit.lua"), str(case),
                               str(calls), "0.02"], capture_output=True, text=True, env=env, timeout=600, check=True)
    return json.loads(proc.stdout)["times_ms"]


def measure(nodes: int, policy: str, n_requests: int, seconds: float, n_hook_calls: int = 0,
            spool: bool = True, alternatives: int = 2) -> dict:
    with tempfile.TemporaryDirectory(prefix="advice-bench-") as tmp:
        sock, db = Path(tmp) / "advisor.sock", Path(tmp) / "advisor.db"
        child = subprocess.Popen([sys.executable, __file__, "--serve", str(nodes), "--policy", policy,
                                  "--socket", str(sock), "--db", str(db), *([] if spool else ["--no-spool"]),
                                  "--evidence-alternatives", str(alternatives)],
                                 stdout=subprocess.PIPE, text=True)
        try:
            running = int(child.stdout.readline().split()[1])
            requests = [hook_fields(j, 1000 + i) for i, j in enumerate(job_stream(n_requests, 11_000 + nodes))]
            round_trips(sock, requests[:30])  # warm up: first torch calls, SQLite file creation
            written(sock, 30)  # and the decision writer process up (it boots beside the first requests)
            times, placed = round_trips(sock, requests)
            one = sustained(sock, requests, seconds, 1)
            two = sustained(sock, requests, seconds, 2)
            hook = hook_calls(sock, requests, n_hook_calls) if n_hook_calls else []
            status = call(sock, "status")
            taken = status.get("ready_taken", 0) if n_hook_calls else 0
        finally:
            child.send_signal(signal.SIGTERM)
            child.wait(timeout=30)
    ms = np.array(times) * 1e3
    return {"nodes": nodes, "policy": policy, "running": running, "requests": n_requests, "spool": spool,
            "p50_ms": float(np.percentile(ms, 50)), "p99_ms": float(np.percentile(ms, 99)), "max_ms": float(ms.max()),
            "placed_share": placed / n_requests, "per_s_1_client": one, "per_s_2_clients": two,
            "evidence_dropped_share": status.get("evidence_dropped", 0) / max(1, sum(
                status.get(f"evidence_{n}", 0) for n in ("recorded", "dropped", "failed", "queued"))),
            **({"hook_p50_ms": float(np.percentile(hook, 50)), "hook_p99_ms": float(np.percentile(hook, 99)),
                "hook_calls": len(hook), "hook_ready_share": taken / len(hook)} if hook else {})}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--sizes", default="16,1000,10000")
    ap.add_argument("--policies", default=",".join(POLICIES))
    ap.add_argument("--requests", type=int, default=500)
    ap.add_argument("--seconds", type=float, default=5.0, help="length of each sustained-rate run")
    ap.add_argument("--hook-calls", type=int, default=0, help="also time the real hook this many times")
    ap.add_argument("--breakdown", action="store_true", help="time the daemon's stages in-process instead")
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "advice_latency.json")
    ap.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--policy", help=argparse.SUPPRESS)
    ap.add_argument("--socket", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--db", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--evidence-alternatives", type=int, default=2,
                    help="feasible alternatives each decision's evidence weighs (the config's evidence_alternatives)")
    ap.add_argument("--no-spool", action="store_true",
                    help="acknowledge from memory, as before the spool: its cost, on the same machine")
    args = ap.parse_args(argv)
    if args.serve:
        serve(args.serve, args.policy, args.socket, args.db, not args.no_spool, args.evidence_alternatives)
        return 0
    if args.breakdown:
        rows = [breakdown(int(n), policy, args.requests) for n in args.sizes.split(",")
                for policy in args.policies.split(",")]
        for row in rows:
            print_breakdown(row)
        out = args.out.with_name(args.out.stem + "_breakdown.json")
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps({"rows": rows}, indent=2))
        return 0
    rows = []
    print(f"{'nodes':>6} {'running':>8}  {'policy':<14}{'p50 ms':>8}{'p99 ms':>8}{'max ms':>8}"
          f"{'/s 1 cl':>9}{'/s 2 cl':>9}{'placed':>8}{'p99 target':>11}{'ev dropped':>11}")
    for n in (int(s) for s in args.sizes.split(",")):
        for policy in args.policies.split(","):
            try:
                row = measure(n, policy, args.requests, args.seconds, args.hook_calls, not args.no_spool,
                              args.evidence_alternatives)
            except DaemonUnavailable as exc:
                print(f"{n:>6} {policy}: daemon failed: {exc}")
                return 1
            rows.append(row)
            target = TARGET_P99_MS.get(n)
            print(f"{n:>6} {row['running']:>8}  {policy:<14}{row['p50_ms']:>8.2f}{row['p99_ms']:>8.2f}"
                  f"{row['max_ms']:>8.1f}{row['per_s_1_client']:>9.0f}{row['per_s_2_clients']:>9.0f}"
                  f"{row['placed_share']:>8.0%}{'' if target is None else f'<={target:g}':>11}"
                  f"{row['evidence_dropped_share']:>11.0%}"
                  + (f"   hook p50/p99 {row['hook_p50_ms']:.2f}/{row['hook_p99_ms']:.2f} ms, "
                     f"{row['hook_ready_share']:.0%} ready" if "hook_p50_ms" in row else ""), flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"rows": rows, "target_per_s": TARGET_PER_S}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
