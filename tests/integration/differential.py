"""Slurm as the oracle: the same sbatch line with and without the advisor, on the same busy cluster.

A seeded generator of realistic option sets (:func:`generate`; the issue's lines as
:data:`VERBATIM`, lines found failing as :data:`FOUND`) gives :class:`Case` values;
:class:`Differential` submits each once with the hook's kill switch on (Slurm's verdict alone) and
once through the hook to a daemon (:class:`AdvisorDaemon`), after the same blocker jobs (without a
marker) have taken part of the cluster, and records both as :class:`Submitted` (accepted or
sbatch's error; the job as Slurm holds it at submission; where it ran, the tasks Slurm lays out per
node and the advisor's layout, or that it stayed pending and why) in a :class:`Result`, whose
``failures`` ``differential_check.py`` defines. The test (``test_request_differential.py``) and the
benchmark (``benchmarks/request_differential.py``) share all of it.
"""
from __future__ import annotations

import math
import os
import random
import re
import shlex
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from differential_check import Ask, Blocker, Case, Cluster, Result, Submitted
from slurmctl import Slurm, SlurmError, job_fields, run, until

from slurm_advisor.daemon.client import DaemonUnavailable, call
from slurm_advisor.slurm.hostlist import compress, expand

#: What every case's job runs: its environment (the task layout Slurm gives srun) to a file, then sleep.
SCRIPT = 'env > "$SLURM_JOB_ID.env"; exec sleep 120'
MODELS = ("resnet50", "vgg16", "bert", "inception3")
_SETTLE_S = 1.3      # a job still pending this long after submission stays pending (backfill: every 1 s)
_START_S = 3.0       # how long a job may take to start once the blockers are gone
#: Pending reasons that a free cluster ends (others, such as PartitionConfig, it does not).
_WAITING = frozenset({"None", "Resources", "Priority", "ReqNodeNotAvail"})


# -- the generator -----------------------------------------------------------------------------

def _case(name: str, options: str, ps: int | None = None, blockers: tuple[Blocker, ...] = ()) -> Case:
    opts = tuple(shlex.split(options))
    tasks = Ask.parse(opts).tasks()
    ps = min(2, tasks - 1) if ps is None else ps
    return Case(name, opts, ps, tasks - ps, blockers)


#: n1 has 2 of its 8 CPUs and 2 of its 4 GPUs left; n2 half its GPUs: a busy cluster the issue's lines failed on.
_BUSY = (Blocker("n1", 6, 2, 6000), Blocker("n2", 2, 2, 2000))
_ISSUE = (
    ("exclude", "-N 2 --exclude=n1 -n 8 --cpus-per-task=1 --mem-per-cpu=1000", 2),
    ("per-node", "-N 2 --ntasks-per-node=4 -n 8", None),
    ("per-node-gpus", "-N 2 --ntasks-per-node=4 --gpus-per-node=4", 0),
    ("nodelist", "-w n4", None),
    ("nodelist-4", "-w n4 -n 4", None),
    ("nodelist-exclude", "-w n2 --exclude=n1", None),
    ("two-nodes", "-N 2", None),
    ("two-nodes-gpus", "-N 2 --gpus-per-node=2 -n 4", None),
    ("node-gpus", "--gpus-per-node=4", None),
)
#: The issue's lines verbatim (#38), each on the busy cluster and on an idle one.
VERBATIM = tuple(_case(f"issue-{name}-{state}", opts, ps, blockers)
                 for name, opts, ps in _ISSUE for state, blockers in (("busy", _BUSY), ("idle", ())))

#: Lines the random cases found failing (#38), kept as fixed cases: pinned to more nodes than -n / t,
#: Slurm allocated --ntasks-per-node=t tasks on every node whatever -n said (fixed in 9914fd1).
FOUND = (
    # pinned to 3 nodes: 12 tasks' CPUs (3 x 4 x 2) for a job of 4 tasks
    _case("found-per-node-pin", "--ntasks=4 --ntasks-per-node=4 -c 2 -p batch --switches=1", 0,
          (Blocker("n4", 3, 2, 1500),)),
    # with GPUs: n4 (2 GPUs free) had to give 2 tasks x 2 GPUs: the pin waited where Slurm alone started it
    _case("found-per-node-gpus", "-n 4 --ntasks-per-node=2 --gpus-per-task=2 --exclude=n1", 1,
          (Blocker("n1", 4, 0, 2000), Blocker("n4", 6, 2, 3000))),
)


def generate(cluster: Cluster, seed: int, count: int) -> list[Case]:
    """``count`` random cases; case ``i`` depends only on (seed, i), so one can be run alone."""
    return [random_case(cluster, seed, i) for i in range(count)]


def random_case(cluster: Cluster, seed: int, index: int) -> Case:
    rng = random.Random(seed * 1_000_003 + index)
    names = cluster.names
    cap = next(iter(cluster.capacity.values()))
    opts: list[str] = []
    tasks = rng.choice([1, 2, 2, 3, 4, 4, 4, 6, 8, 8, 12, 16])
    cpus = rng.choice([1, 1, 1, 1, 2, 2, 4])
    form = rng.choices(["free", "fixed", "range", "per-node"], weights=[9, 5, 4, 2])[0]
    if form == "per-node":  # -N k --ntasks-per-node=t and no -n: k x t tasks
        k, t = rng.randint(1, len(names)), rng.randint(1, 4)
        tasks = k * t
        opts += ["-N", str(k), f"--ntasks-per-node={t}"]
    else:
        opts += rng.choice([["-n", str(tasks)], [f"--ntasks={tasks}"]])
        if form == "fixed":
            opts += ["-N", str(rng.randint(1, min(len(names), tasks)))]
        elif form == "range" and tasks > 1:
            lo = rng.randint(1, min(len(names), tasks) - 1)
            opts += ["-N", f"{lo}-{rng.randint(lo + 1, min(len(names), tasks))}"]
        if rng.random() < 0.25:
            opts.append(f"--ntasks-per-node={rng.randint(math.ceil(tasks / len(names)), min(cap.cpus, tasks))}")
    if cpus > 1:
        opts += rng.choice([["-c", str(cpus)], [f"--cpus-per-task={cpus}"]])
    memory = rng.random()
    if memory < 0.25:
        opts.append(f"--mem={rng.choice([1000, 2000, 4000, 8000, 16000])}")
    elif memory < 0.5:
        opts.append(f"--mem-per-cpu={rng.choice([500, 1000, 2000, 4000])}")
    gpus = rng.choices(["", "task", "node", "gres", "job"], weights=[9, 4, 3, 2, 2])[0]
    opts += {"": [], "task": [f"--gpus-per-task={rng.randint(1, 2)}"],
             "node": [f"--gpus-per-node={rng.randint(1, cap.gpus)}"], "gres": [f"--gres=gpu:{rng.randint(1, cap.gpus)}"],
             "job": [f"--gpus={rng.randint(1, 2 * cap.gpus)}"]}[gpus]
    include = sorted(rng.sample(names, rng.randint(1, 2))) if rng.random() < 0.15 else []
    if include:
        opts += rng.choice([["-w", compress(include)], [f"--nodelist={','.join(include)}"]])
    others = [n for n in names if n not in include]
    if rng.random() < 0.15:
        opts += rng.choice([["-x", rng.choice(others)], [f"--exclude={rng.choice(others)}"]])
    if rng.random() < 0.08:
        opts.append("--exclusive")
    partition = rng.choices(["", "batch", "small", "batch,small"], weights=[14, 2, 3, 1])[0]
    if partition:
        opts += ["-p", partition]
    if rng.random() < 0.08:
        opts.append("--contiguous")
    if rng.random() < 0.05:
        opts.append("--switches=1")
    ps = min(rng.choice([0, 0, 1, 2]), tasks - 1)
    return Case(f"s{seed}-{index}", tuple(opts), ps, tasks - ps, _blockers(rng, cluster), rng.choice(MODELS))


def _blockers(rng: random.Random, cluster: Cluster) -> tuple[Blocker, ...]:
    """0-3 nodes partly taken: some CPUs, maybe GPUs and memory, each node whole-free or not."""
    out = []
    for node in sorted(rng.sample(cluster.names, rng.choice([0, 1, 1, 2, 2, 3]))):
        cap = cluster.capacity[node]
        cpus = rng.randint(1, cap.cpus)
        out.append(Blocker(node, cpus, rng.randint(0, cap.gpus), cpus * rng.choice([500, 1000, 2000])))
    return tuple(out)


# -- the runner --------------------------------------------------------------------------------

def _tasks_per_node(env: dict[str, str]) -> dict[str, int]:
    counts: list[int] = []
    for part in env.get("SLURM_TASKS_PER_NODE", "").split(","):
        m = re.fullmatch(r"(\d+)(?:\(x(\d+)\))?", part)
        if m:
            counts += [int(m.group(1))] * int(m.group(2) or 1)
    return dict(zip(expand(env.get("SLURM_JOB_NODELIST", "")), counts))


def _layout_per_node(text: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for part in filter(None, text.split(";")):
        for node in part.partition("=")[2].split(","):
            out[node] = out.get(node, 0) + 1
    return out


class Differential:
    """Submits cases on ``slurm``'s cluster; the hook is off while ``kill_switch`` exists."""

    def __init__(self, slurm: Slurm, cluster: Cluster, kill_switch: Path, workdir: Path,
                 daemon: AdvisorDaemon, ctld_log: Path | None = None):
        self.slurm, self.cluster, self.kill_switch, self.workdir = slurm, cluster, kill_switch, workdir
        self.daemon, self.ctld_log = daemon, ctld_log

    def run(self, case: Case) -> Result:
        """The case without the advisor, then with it, on the same busy cluster. An advised job that
        stays pending is watched once the blockers are gone (where does it run?); one that never
        starts is submitted once more without the advisor on the idle cluster (would Slurm start it?)."""
        try:
            blockers = [self.slurm.submit(b.options(), 300) for b in case.blockers]
            for b in blockers:
                self.slurm.wait(b, lambda v: v.state == "RUNNING", timeout_s=20, what="RUNNING")
            self.kill_switch.touch()
            result = Result(case, self.submit(case), Submitted(False))
            if result.plain.job_id:
                self.slurm.cancel(result.plain.job_id)
                self.slurm.wait_gone(result.plain.job_id)
            self.kill_switch.unlink()
            self.daemon.fresh(time.monotonic())  # it sees the blockers, and the plain job gone
            result.hooked = hooked = self.submit(case)
            if hooked.state == "PENDING" and (hooked.reason in _WAITING or hooked.reason != result.plain.reason):
                self.slurm.cancel(*blockers)
                self.slurm.wait_gone(*blockers)
                self._settle(hooked, _START_S, late=True)
                if not hooked.allocation and not result.plain.allocation and result.plain.accepted:
                    self.slurm.cancel(hooked.job_id)
                    self.slurm.wait_gone(hooked.job_id)
                    self.kill_switch.touch()
                    result.idle = self.submit(case, _START_S)
            return result
        finally:
            self.kill_switch.unlink(missing_ok=True)
            self.slurm.cancel_all()

    def submit(self, case: Case, settle_s: float = _SETTLE_S) -> Submitted:
        """One sbatch of ``case``, watched until it runs or, pending, for ``settle_s``."""
        offset = self.ctld_log.stat().st_size if self.ctld_log else 0
        proc = subprocess.run(["sbatch", "--parsable", "--output=/dev/null", "--error=/dev/null",
                               f"--chdir={self.workdir}", *case.options, "--comment", case.marker,
                               f"--wrap={SCRIPT}"], capture_output=True, text=True, timeout=30, check=False)
        log = self._log_since(offset)
        if proc.returncode != 0:
            said = proc.stderr.strip().splitlines()
            return Submitted(False, message=(said[-1] if said else f"exit {proc.returncode}"), log=log)
        job = proc.stdout.strip().split(";")[0]
        self.slurm.submitted.append(job)
        sub = Submitted(True, job_id=job, log=log, fields=job_fields(run(["scontrol", "show", "job", "-o", job])))
        self._settle(sub, settle_s)
        return sub

    def _settle(self, sub: Submitted, wait_s: float, late: bool = False) -> None:
        """Until the job runs and its script wrote its environment; or it stays pending ``wait_s``."""
        started = time.monotonic()
        env = self.workdir / f"{sub.job_id}.env"
        seen = []  # the last view, and whether the job ran with its environment written

        def settled() -> bool:
            view = self.slurm.job(sub.job_id)
            waited = time.monotonic() - started
            sub.state, sub.reason, sub.waited_s = view.state, view.reason, round(waited, 2)
            ran = view.state == "RUNNING" and env.exists() and "SLURM_TASKS_PER_NODE" in env.read_text()
            seen[:] = [view, ran]
            return ran or view.state not in ("PENDING", "CONFIGURING", "RUNNING") or waited > wait_s + 3 \
                or (view.state == "PENDING" and waited > wait_s)

        until(settled, wait_s + 30, f"job {sub.job_id} to run or settle")
        view, ran = seen
        if not ran:
            return
        values = dict(line.partition("=")[::2] for line in env.read_text().splitlines() if "=" in line)
        sub.allocation, sub.tasks, sub.started_late = view.allocation, _tasks_per_node(values), late
        sub.layout = _layout_per_node(values.get("SLURM_ADVISOR_LAYOUT", ""))
        sub.partition = values.get("SLURM_JOB_PARTITION", "")

    def _log_since(self, offset: int) -> list[str]:
        if self.ctld_log is None:
            return []
        with self.ctld_log.open("rb") as f:
            f.seek(offset)
            lines = f.read(64_000).decode(errors="replace").splitlines()
        return [line for line in lines if "slurm-advisor" in line or "error" in line.lower()][:20]


# -- the daemon --------------------------------------------------------------------------------

class AdvisorDaemon:
    """``slurm-advisor serve --source slurm`` on ``socket`` in a subprocess, stopped by its PID."""

    def __init__(self, socket: Path, db: Path, *, policy: str = "spread", mode: str = "enforce",
                 refresh_s: float = 0.5, log: Path | None = None):
        self.socket, self.db = socket, db
        env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_ADVISOR_")}
        args = [sys.executable, "-m", "slurm_advisor.cli", "serve", "--source", "slurm", "--socket", str(socket),
                "--db", str(db), "--refresh-s", str(refresh_s), "--mode", mode, "--policy", policy]
        if log is not None:
            args += ["--log-file", str(log)]
        self.proc = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self._wait(lambda: self._published() > -math.inf, 60, "did not start")

    def _wait(self, done: Callable[[], bool], timeout_s: float, what: str) -> None:
        reached = []  # ``done`` may keep state (fresh's): asked once a poll

        def finished() -> bool:
            reached[:] = [done()]
            return reached[0] or self.proc.poll() is not None
        try:
            until(finished, timeout_s, what)
        except SlurmError:
            pass
        if not reached[0]:
            self.stop()
            raise SlurmError(f"the daemon {what}: {self.proc.communicate()[1][-2000:]}")

    def _published(self) -> float:
        """When (time.monotonic: the machine's clock) its latest snapshot was published; -inf: none."""
        try:
            age = call(self.socket, "health", timeout_s=2.0).get("snapshot_age_s")
        except DaemonUnavailable:
            return -math.inf
        return -math.inf if age is None else time.monotonic() - age

    def fresh(self, since: float, timeout_s: float = 20.0) -> None:
        """Until a snapshot read wholly after ``since`` is published: the second one published after it."""
        first: list[float] = []

        def second() -> bool:
            at = self._published()
            if not first:
                first.extend([at] if at > since else [])
                return False
            return at > first[0] + 1e-3
        self._wait(second, timeout_s, f"published no new snapshot in {timeout_s:g} s")

    def status(self) -> dict:
        return call(self.socket, "status", timeout_s=2.0)

    def stop(self) -> None:
        """SIGTERM to the PID it started (its decisions are then all written); SIGKILL 30 s later."""
        self.proc.terminate()  # nothing once it has exited
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def decisions(self) -> dict[str, dict]:
        """id -> the recorded decision's action and reason (after :meth:`stop`: all of them written)."""
        from slurm_advisor.store import Store
        with Store.open(str(self.db), create=False) as store:
            return {d.id: {"action": d.action, "reason": d.reason} for d in store.load_decisions()}


@contextmanager
def session(slurm: Slurm, testbed: Path, socket: Path, workdir: Path, *, policy: str = "spread",
            refresh_s: float = 0.5) -> Iterator[Differential]:
    """A daemon in enforce mode on the testbed's socket and a :class:`Differential` over it; the
    daemon is stopped on exit (its decisions are then in ``workdir/advisor.db``)."""
    daemon = AdvisorDaemon(socket, workdir / "advisor.db", policy=policy, refresh_s=refresh_s,
                           log=workdir / "daemon.log")
    log = testbed / "log" / "slurmctld.log"
    try:
        yield Differential(slurm, Cluster.read(slurm), testbed / "advisor.disabled", workdir, daemon,
                           log if log.exists() else None)
    finally:
        daemon.stop()
