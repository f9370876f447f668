"""sbatch submissions per second with the advisor's hook vs without, on two private testbeds.

Starts two 4-node testbeds side by side (.ci/slurm-testbed.sh with their own directories and
ports): one plain, one with hooks/job_submit.lua and a `slurm-advisor serve --source slurm`
daemon on its socket. Then submits batches of held jobs (`sbatch --hold`: they are accepted and
advised but never run, so the nodes do not fill and the controller does only submission work)
from ``--clients`` parallel submitters, alternating plain / hooked batches so that the machine's
drift hits both alike. Every hooked job carries the advisor's marker, so each one costs a full
advice round trip inside slurmctld's lock.

    python benchmarks/hook_overhead.py [--jobs 200] [--rounds 3] [--clients 4] [--policy slurm-default]
                                       [--hook-times] [--ready-keys 8] [--shapes 1]

``--hook-times`` installs a copy of the hook with one log line per advised job that says how
long the advice took inside slurmctld (the ready answer or the round trip), and prints the
distribution: the time the controller is blocked, apart from what the machine's CPUs make of it.
``--ready-keys 0`` turns the daemon's ready answers off (every advised job asks over the socket).
``--shapes K`` makes the advised jobs cycle through K job shapes (``SHAPES``: PS and worker counts),
as a site submits several repeating jobs: the daemon then keeps K ready answers.

Needs root and the testbed's Debian packages (the script installs them when missing). Both
testbeds and the daemon are stopped by their PIDs at the end.
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import re
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TESTBED = REPO / ".ci" / "slurm-testbed.sh"
BEDS = {"plain": ("/tmp/slurm-advisor-bench-plain", 16901, 17201),
        "hooked": ("/tmp/slurm-advisor-bench-hooked", 16911, 17211)}
# the advised jobs' (PS, workers), each marked `slurm-advisor: type=resnet50 ps=P workers=W` and
# submitted with -n P+W: --shapes K cycles through the first K (by default the first only)
SHAPES = ((1, 3), (0, 2), (1, 5), (0, 6))
TARGET_RATIO = 0.95
NICE = ["nice", "-n", os.environ.get("BENCH_NICE", "0")]


HOOK = REPO / "hooks" / "job_submit.lua"  # main() may swap in the timed copy
TIMED_HOOK = Path("/tmp/slurm-advisor-bench-timed-hook/job_submit.lua")  # the module beside it is timed
TIMING = "advisor-advice-ms"


def timed_hook() -> Path:
    """hooks/ with one log line per advised job in the module: the advice's time in ms."""
    source = (REPO / "hooks" / "slurm_advisor.lua").read_text()
    call = "    local plan, why = advise(read_job(job_desc), true)\n"
    assert call in source, "the hook's advise call moved: update benchmarks/hook_overhead.py"
    TIMED_HOOK.parent.mkdir(exist_ok=True)
    (TIMED_HOOK.parent / "slurm_advisor.lua").write_text(source.replace(call, "    local t0 = core.gettime()\n" + call +
                                         f'    slurm.log_info("{TIMING} %.3f", (core.gettime() - t0) * 1000)\n'))
    TIMED_HOOK.write_text((REPO / "hooks" / "job_submit.lua").read_text())
    return TIMED_HOOK


CTLD_LOG = Path(BEDS["hooked"][0]) / "log" / "slurmctld.log"


def hook_times(since_line: int) -> list[float]:
    lines = CTLD_LOG.read_text(errors="replace").splitlines()[since_line:]
    return sorted(float(m.group(1)) for line in lines if (m := re.search(TIMING + r" ([\d.]+)", line)))


def log_lines() -> int:
    return len(CTLD_LOG.read_text(errors="replace").splitlines()) if CTLD_LOG.exists() else 0


def bed_env(name: str) -> dict[str, str]:
    root, port, node_port = BEDS[name]
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_ADVISOR_")}
    env.update(SLURM_ADVISOR_TESTBED_DIR=root, SLURM_ADVISOR_TESTBED_PORT=str(port),
               SLURM_ADVISOR_TESTBED_NODE_PORT=str(node_port), SLURM_CONF=f"{root}/etc/slurm.conf")
    if name == "hooked":
        env["SLURM_ADVISOR_TESTBED_HOOK"] = str(HOOK)
    return env


def testbed(name: str, action: str) -> None:
    subprocess.run(["bash", str(TESTBED), action], env=bed_env(name), check=True, stdout=subprocess.DEVNULL)


def start_daemon(policy: str, mode: str, ready_keys: int = 8) -> subprocess.Popen:
    env = bed_env("hooked")
    root = BEDS["hooked"][0]
    proc = subprocess.Popen([*NICE, sys.executable, "-m", "slurm_advisor.cli", "serve", "--source", "slurm",
                             "--socket", f"{root}/advisor.sock", "--db", f"{root}/advisor.db",
                             "--policy", policy, "--mode", mode],
                            env={**env, "SLURM_ADVISOR_READY_KEYS": str(ready_keys)}, stderr=subprocess.DEVNULL)
    from slurm_advisor.daemon.client import DaemonUnavailable, call
    deadline = time.monotonic() + 60
    while True:
        try:
            call(f"{root}/advisor.sock", "health")
            return proc
        except DaemonUnavailable:
            if time.monotonic() > deadline or proc.poll() is not None:
                raise SystemExit("the daemon did not start") from None
            time.sleep(0.2)


def submit_batch(name: str, jobs: int, clients: int, marked: bool = True, shapes: int = 1) -> float:
    """Submissions per second for ``jobs`` held jobs from ``clients`` parallel submitters; marked
    jobs cycle through the first ``shapes`` of ``SHAPES``."""
    env = bed_env(name)

    def one(i):
        ps, workers = SHAPES[i % shapes] if marked else SHAPES[0]
        comment = f"slurm-advisor: type=resnet50 ps={ps} workers={workers}" if marked else "an ordinary job"
        args = ["sbatch", "--hold", "--parsable", "-n", str(ps + workers), "--output=/dev/null",
                "--comment", comment, "--wrap=true"]
        subprocess.run(args, env=env, check=True, stdout=subprocess.DEVNULL, timeout=60)

    t0 = time.perf_counter()
    with ThreadPoolExecutor(clients) as pool:
        list(pool.map(one, range(jobs)))
    rate = jobs / (time.perf_counter() - t0)
    subprocess.run(["scancel", "--state=PENDING", "--user=root"], env=env, check=False)
    return rate


def cpu_seconds(pid: int) -> float:
    """User + system CPU so far of process ``pid`` (all its threads) and of its live children
    (the daemon's decision writer process), from /proc."""
    total = 0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:  # ended meanwhile
            continue
        if stat.parent.name == str(pid) or fields[1] == str(pid):
            total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


def advised_actions(since: datetime) -> dict[str, int]:
    """How many decisions the daemon recorded per action since ``since`` (place, cap, observe:
    stamped only, none), so the figure says which path the advised submissions took."""
    from slurm_advisor.store import Store
    time.sleep(1.0)  # the daemon's writer commits within 0.05 s of a decision
    with Store.open(f"{BEDS['hooked'][0]}/advisor.db", create=False) as store:
        return dict(collections.Counter(d.action + (" (ready)" if d.extra.get("ready") else "")
                                        for d in store.load_decisions() if d.time >= since))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--jobs", type=int, default=200, help="submissions per batch")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--policy", default="slurm-default")
    ap.add_argument("--mode", default="advise", help="the daemon's mode (observe: the exchange only)")
    ap.add_argument("--hook-times", action="store_true", help="log and report the advice's time inside slurmctld")
    ap.add_argument("--ready-keys", type=int, default=8, help="the daemon's ready_keys (0: every job asks)")
    ap.add_argument("--shapes", type=int, default=1, choices=range(1, len(SHAPES) + 1),
                    help="advised jobs cycle through this many job shapes")
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "hook_overhead.json")
    args = ap.parse_args(argv)
    global HOOK
    if args.hook_times:
        HOOK = timed_hook()
    daemon = None
    started = datetime.now(UTC)
    try:
        for name in BEDS:
            testbed(name, "start")
        daemon = start_daemon(args.policy, args.mode, args.ready_keys)
        first_line = log_lines()
        rates: dict[str, list[float]] = {"plain": [], "unmarked": [], "hooked": []}
        daemon_ms: list[float] = []  # the daemon's CPU per advised submission, per round
        print(f"{'round':>5} {'plain /s':>10} {'unmarked /s':>12} {'advised /s':>11} {'ratio':>7}")
        for r in range(args.rounds):
            rates["plain"].append(submit_batch("plain", args.jobs, args.clients))
            rates["unmarked"].append(submit_batch("hooked", args.jobs, args.clients, marked=False))
            cpu0 = cpu_seconds(daemon.pid)
            rates["hooked"].append(submit_batch("hooked", args.jobs, args.clients, shapes=args.shapes))
            daemon_ms.append((cpu_seconds(daemon.pid) - cpu0) / args.jobs * 1e3)
            print(f"{r + 1:>5} {rates['plain'][-1]:>10.1f} {rates['unmarked'][-1]:>12.1f} "
                  f"{rates['hooked'][-1]:>11.1f} {rates['hooked'][-1] / rates['plain'][-1]:>7.3f}", flush=True)
        plain, unmarked, hooked = (sorted(v)[len(v) // 2] for v in rates.values())
        ratio = hooked / plain
        print(f"median {plain:>10.1f} {unmarked:>12.1f} {hooked:>11.1f} {ratio:>7.3f}   "
              f"(target ratio >= {TARGET_RATIO}; advised / unmarked on the same controller "
              f"{hooked / unmarked:.3f})")
        print(f"daemon CPU (its decision writer included) per advised submission: {sorted(daemon_ms)[len(daemon_ms) // 2]:.2f} ms "
              f"(median of the rounds; during the batch, so a refresh may fall in or out)")
        actions = advised_actions(started)
        print("what the advised submissions were told:", ", ".join(f"{a} {n}" for a, n in sorted(actions.items())))
        times = hook_times(first_line) if args.hook_times else []
        if times:
            print(f"advice inside slurmctld, ms: p50 {times[len(times) // 2]:.2f}  p90 "
                  f"{times[int(len(times) * 0.9)]:.2f}  p99 {times[int(len(times) * 0.99)]:.2f}  "
                  f"mean {sum(times) / len(times):.2f}  ({len(times)} advised jobs)")
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"rates": rates, "median_plain": plain, "median_unmarked": unmarked,
                                        "median_advised": hooked, "ratio": ratio, "actions": actions,
                                        "ratio_to_unmarked": hooked / unmarked, "jobs": args.jobs,
                                        "ready_keys": args.ready_keys, "shapes": args.shapes, "hook_ms": times,
                                        "daemon_cpu_ms_per_advised": daemon_ms,
                                        "clients": args.clients, "policy": args.policy, "mode": args.mode}, indent=2))
    finally:
        if daemon is not None:
            daemon.send_signal(signal.SIGTERM)
            daemon.wait(timeout=30)
        for name in BEDS:
            testbed(name, "stop")
    return 0


if __name__ == "__main__":
    sys.exit(main())
