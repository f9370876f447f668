"""Soak: well-behaved clients at a steady rate, alone and while abusive local users attack the
daemon's sockets (issue 39). Target: the well-behaved clients' p99 under abuse within 2x of
their p99 alone; the daemon's RSS and fd count flat.

The daemon is the real one (`slurm-advisor serve --source simulated --policy slurm-default`, its
default limits: client_timeout_s 2, max_connections 1024, max_connections_per_uid 64), in its own
process. One daemon serves ``--rounds`` alternations of a phase alone and a phase under abuse
(``--seconds`` / rounds each), so that whatever else runs on a shared machine weighs on both
conditions alike. The well-behaved client runs as root, as the hook does: a new connection per request,
`advise` and `report` alternating at ``--rate`` requests/s on a fixed schedule (open loop: a
late reply delays no later request), latency from the scheduled send to the reply.

The abusers are processes running as unprivileged uids (the benchmark runs as root; otherwise
as the current user, whose quota then binds the well-behaved client too), each at a set pace
so that, on a small machine, they compete with the daemon for its socket and not only for CPU:

- slowloris: 4 users x 60 connections, each sending one byte of a request every 0.5 s,
  reconnecting when dropped;
- non-readers: 4 users, each pipelining `health` requests and never reading a reply;
- connection flood: 2 users opening connections (~500/s each) and holding up to 200;
- garbage: 1 user sending malformed lines, huge integers and 70 KiB lines (~100/s);
- `.taken` flood: 1 user sending refused datagrams (~2,000/s).

    python benchmarks/soak.py [--seconds 30] [--rounds 3] [--rate 50] [--abusers slowloris,flood]
                              [--out benchmarks/results/soak.json]

Prints one row per condition (requests, failures, p50/p99/max ms, the daemon's RSS and fds at the
start and at most during that condition's phases), the p99 ratio, the daemon's counters and its
RSS/fds over time; the JSON holds every sample. Exit 1 when the ratio misses the target.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import select
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "daemon"))
from daemon_helpers import marked

from slurm_advisor.daemon.client import DaemonUnavailable, call

REPO = Path(__file__).resolve().parents[1]
TARGET_RATIO = 2.0
HEALTH = b'{"v": 1, "op": "health"}\n'


# -- the abusers: each runs in a forked child as its own uid until ``until`` (time.monotonic) ---
def slowloris(path: str, until: float, connections: int = 60) -> None:
    line = b'{"v": 1, "op": "health"' + b" " * 200 + b"}\n"
    held: list[tuple[socket.socket, int]] = []
    while time.monotonic() < until:
        while len(held) < connections:
            held.append((_connect(path), 0))
        for i, (s, sent) in enumerate(held):
            try:
                s.send(line[sent % len(line):sent % len(line) + 1])
                held[i] = (s, sent + 1)
            except OSError:  # dropped (or refused): open another
                s.close()
                held[i] = (_connect(path), 0)
        time.sleep(0.5)


def non_reader(path: str, until: float) -> None:
    burst = HEALTH * 2000
    s = _connect(path)
    while time.monotonic() < until:
        try:
            s.send(burst)
        except BlockingIOError:
            select.select([], [s], [], 0.2)
        except OSError:  # dropped: again
            s.close()
            s = _connect(path)


def flood(path: str, until: float, hold: int = 200) -> None:
    held: list[socket.socket] = []
    while time.monotonic() < until:
        held.append(_connect(path))
        if len(held) > hold:
            held.pop(0).close()
        time.sleep(0.002)


def garbage(path: str, until: float) -> None:
    rng = random.Random(7)
    lines = [b"hello\n", b"\xff\xfe\n", b'{"v": 1, "op": "health", "n": ' + b"9" * 5000 + b"}\n",
             b"[" * 50_000 + b"\n", b"x" * 70 * 1024, b'{"v": 1, "op": "advise", "job": 3}\n']
    while time.monotonic() < until:
        s = _connect(path)
        try:
            s.settimeout(1.0)
            s.sendall(rng.choice(lines + [bytes(rng.getrandbits(8) for _ in range(64)) + b"\n"]))
            s.recv(4096)
        except OSError:
            pass
        s.close()
        time.sleep(0.01)


def taken_flood(path: str, until: float) -> None:
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
        s.setblocking(False)
        while time.monotonic() < until:
            for _ in range(20):
                try:
                    s.sendto(b'{"v": 1, "op": "taken", "answer": "d-000000000000"}', f"{path}.taken")
                except OSError:
                    pass
            time.sleep(0.01)


def _connect(path: str) -> socket.socket:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.setblocking(False)
    try:
        s.connect(path)
    except OSError:
        pass  # a full listen backlog: the next send fails and the abuser tries again
    return s


ABUSERS = [(slowloris, 4), (non_reader, 4), (flood, 2), (garbage, 1), (taken_flood, 1)]


def spawn(abuser, uid: int | None, path: str, until: float) -> int:
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            if uid is not None:
                os.setgid(uid)
                os.setuid(uid)
            abuser(path, until)
        except BaseException:  # noqa: BLE001 - a child must never return into the parent's code
            code = 1
        finally:
            os._exit(code)
    return pid


# -- the daemon and what it costs ----------------------------------------------------------
class Sampler(threading.Thread):
    """The daemon's RSS (MB) and open fds, every ``every_s``."""

    def __init__(self, pid: int, every_s: float = 0.5):
        super().__init__(daemon=True)
        self.pid, self.every_s = pid, every_s
        self.samples: list[tuple[float, float, int]] = []
        self.halt = threading.Event()
        self.started_at = time.monotonic()

    def sample(self) -> tuple[float, float, int]:
        status = Path(f"/proc/{self.pid}/status").read_text()
        rss_kb = int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmRSS:")))
        return (round(time.monotonic() - self.started_at, 2), rss_kb / 1024, len(os.listdir(f"/proc/{self.pid}/fd")))

    def run(self) -> None:
        while not self.halt.wait(self.every_s):
            self.samples.append(self.sample())


def well_behaved(path: str, seconds: float, rate: float) -> tuple[list[float], int]:
    """Round trips (ms) of advise and report alternating at ``rate``/s; and the failures."""
    times, failures, start = [], 0, time.monotonic()
    for i in range(int(seconds * rate)):
        due = start + i / rate
        time.sleep(max(0.0, due - time.monotonic()))  # the schedule's pace
        try:
            if i % 2:
                call(path, "report", job_id=str(1000 + i), iterations=100, seconds=1.0)
            elif not call(path, "advise", job=marked())["ok"]:
                failures += 1
        except DaemonUnavailable:
            failures += 1
            continue
        times.append((time.monotonic() - due) * 1e3)
    return times, failures


def soak(seconds: float, rate: float, abusers: list, rounds: int, workdir: Path) -> list[dict]:
    """One daemon; ``rounds`` x (a phase alone, a phase under abuse), ``seconds / rounds`` each:
    on a shared machine, what else runs weighs on both conditions alike. A row per condition."""
    path = str(workdir / "advisor.sock")
    proc = subprocess.Popen([sys.executable, "-m", "slurm_advisor.cli", "serve", "--source", "simulated",
                             "--policy", "slurm-default", "--config", str(workdir / "config.toml"), "--socket", path,
                             "--db", str(workdir / "advisor.db"), "--log-file", f"{path}.log"])
    measured: dict[bool, list] = {False: [[], 0, []], True: [[], 0, []]}  # times, failures, phases
    try:
        deadline = time.monotonic() + 60
        while not _answers(path):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the daemon did not start; see {path}.log")
            time.sleep(0.1)
        well_behaved(path, 2.0, rate)  # warm up
        sampler = Sampler(proc.pid)
        start = sampler.sample()
        sampler.start()
        for _ in range(rounds):
            for abuse in (False, True):
                began = time.monotonic() - sampler.started_at
                times, failures = phase(path, seconds / rounds, rate, abusers if abuse else [])
                measured[abuse][0] += times
                measured[abuse][1] += failures
                measured[abuse][2].append((began, time.monotonic() - sampler.started_at))
        sampler.halt.set()
        status = call(path, "status", timeout_s=5)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
    counters = {k: status.get(k, 0) for k in ("requests", "errors", "connections_refused", "connections_dropped",
                                       "accept_failures", "ready_refused")}
    return [_row(abuse, *measured[abuse], start, sampler.samples, counters) for abuse in (False, True)]


def phase(path: str, seconds: float, rate: float, abusers: list) -> tuple[list[float], int]:
    """The well-behaved client for ``seconds``, with ``abusers`` running from a second before."""
    children, uid = [], 61000
    until = time.monotonic() + seconds + 1.0
    for abuser, count in abusers:
        for _ in range(count):
            uid += 1
            children.append(spawn(abuser, uid if os.geteuid() == 0 else None, path, until))
    if children:
        time.sleep(1.0)  # the abuse under way before the first measured request
    try:
        return well_behaved(path, seconds, rate)
    finally:
        for pid in children:
            os.waitpid(pid, 0)


def _row(abuse: bool, times: list[float], failures: int, phases: list, start: tuple, samples: list,
         counters: dict) -> dict:
    ms = np.array(times)
    inside = [s for s in samples if any(a <= s[0] <= b for a, b in phases)]
    return {"abuse": abuse, "requests": len(times), "failures": failures,
            "p50_ms": float(np.percentile(ms, 50)), "p99_ms": float(np.percentile(ms, 99)), "max_ms": float(ms.max()),
            "rss_mb_start": start[1], "rss_mb_max": max(s[1] for s in inside),
            "fds_start": start[2], "fds_max": max(s[2] for s in inside), "phases_s": phases,
            **({"samples": [{"t_s": t, "rss_mb": r, "fds": f} for t, r, f in samples], "counters": counters}
               if abuse else {})}


def _answers(path: str) -> bool:
    try:
        return call(path, "health", timeout_s=1.0)["ok"] is True
    except DaemonUnavailable:
        return False


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=30.0, help="measured seconds per condition")
    ap.add_argument("--rounds", type=int, default=3, help="alternations of a phase alone and one under abuse")
    ap.add_argument("--rate", type=float, default=50.0, help="well-behaved requests per second")
    ap.add_argument("--abusers", default=",".join(f.__name__ for f, _ in ABUSERS),
                    help="which abusers run (a subset shows what each costs)")
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "soak.json")
    args = ap.parse_args(argv)
    abusers = [(f, n) for f, n in ABUSERS if f.__name__ in args.abusers.split(",")]
    unknown = set(args.abusers.split(",")) - {f.__name__ for f, _ in ABUSERS}
    if unknown or not abusers:
        ap.error(f"--abusers: unknown {', '.join(sorted(unknown)) or 'none given'}; "
                 f"valid: {', '.join(f.__name__ for f, _ in ABUSERS)}")
    with tempfile.TemporaryDirectory(prefix="advisor-soak-", dir="/tmp") as tmp:
        workdir = Path(tmp)
        workdir.chmod(0o755)  # the abusers' uids must reach the socket
        (workdir / "config.toml").write_text("")  # the defaults, not /etc/slurm-advisor's
        rows = soak(args.seconds, args.rate, abusers, args.rounds, workdir)
    print(f"{'run':<12}{'requests':>9}{'failed':>7}{'p50 ms':>8}{'p99 ms':>8}{'max ms':>8}"
          f"{'RSS MB start/max':>18}{'fds start/max':>15}")
    for row in rows:
        print(f"{'under abuse' if row['abuse'] else 'alone':<12}{row['requests']:>9}{row['failures']:>7}"
              f"{row['p50_ms']:>8.2f}{row['p99_ms']:>8.2f}{row['max_ms']:>8.1f}"
              f"{row['rss_mb_start']:>10.0f}/{row['rss_mb_max']:<7.0f}{row['fds_start']:>8}/{row['fds_max']:<6}")
    ratio = rows[1]["p99_ms"] / rows[0]["p99_ms"]
    print(f"p99 under abuse / alone: {ratio:.2f} (target <= {TARGET_RATIO:g}); daemon counters under abuse: "
          + ", ".join(f"{k} {v:,}" for k, v in rows[1]["counters"].items()))
    timeline = rows[1]["samples"][::max(1, len(rows[1]["samples"]) // 10)]
    print("the daemon over time (abuse in " + ", ".join(f"{a:.0f}-{b:.0f} s" for a, b in rows[1]["phases_s"]) + "): "
          + "; ".join(f"{s['t_s']:.0f} s {s['rss_mb']:.0f} MB {s['fds']} fds"
                                                 for s in timeline))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"seconds": args.seconds, "rounds": args.rounds, "rate": args.rate,
                                    "root": os.geteuid() == 0,
                                    "abusers": {f.__name__: n for f, n in abusers},
                                    "rows": rows, "p99_ratio": ratio, "target_ratio": TARGET_RATIO}, indent=2))
    return 0 if ratio <= TARGET_RATIO else 1


if __name__ == "__main__":
    sys.exit(main())
