"""The live path on the real testbed: sbatch -> job_submit.lua -> `slurm-advisor serve --source slurm`.

Needs the testbed started with the hook (tests/run.sh does: SLURM_ADVISOR_TESTBED_HOOK). Each test
runs its own daemon process on the socket the testbed's slurmctld was told about, with its own
decision store, and stops it by its PID.
"""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from slurmctl import Slurm, run, until

from slurm_advisor.daemon.client import DaemonUnavailable, call
from slurm_advisor.daemon.protocol import parse_layout
from slurm_advisor.store import Store

pytestmark = pytest.mark.slurm

ROOT = Path(os.environ.get("SLURM_ADVISOR_TESTBED_DIR", "/tmp/slurm-advisor-testbed"))
SOCKET = Path(os.environ.get("SLURM_ADVISOR_TESTBED_SOCKET", ROOT / "advisor.sock"))
PS_JOB = "slurm-advisor: type=resnet50 ps=1 workers=3"
ROLES_SCRIPT = """#!/bin/bash
# Where each task of this job really starts, and the role the layout gives it.
set -e
PY="{python} -m slurm_advisor.cli"
$PY layout --format hostfile > "{out}.hosts"
export SLURM_HOSTFILE="{out}.hosts"
echo "layout=$SLURM_ADVISOR_LAYOUT"
echo "decision=$SLURM_ADVISOR_DECISION"
srun --distribution=arbitrary bash -c 'echo "task=$SLURM_PROCID node=$SLURMD_NODENAME"'
sleep 3  # the test reads the allocation while the job runs (a finished job's shows no GPUs)
"""


@pytest.fixture(scope="module")
def hooked(slurm_reachable: None) -> None:
    config = run(["scontrol", "show", "config"])
    if not re.search(r"^JobSubmitPlugins\s*=\s*\S*lua", config, re.MULTILINE):
        pytest.skip("the testbed runs without the job submit hook: start it with "
                    "SLURM_ADVISOR_TESTBED_HOOK=hooks/job_submit.lua (tests/run.sh does)")


class DaemonProcess:
    def __init__(self, db: Path, *args: str, **env: str):
        self.db = db
        environ = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_ADVISOR_")}
        environ.update({f"SLURM_ADVISOR_{k.upper()}": v for k, v in env.items()})
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "slurm_advisor.cli", "serve", "--source", "slurm", "--socket", str(SOCKET),
             "--db", str(db), "--refresh-s", env.pop("refresh", "0.5"), *args],
            env=environ, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        until(self._answers, 60, "the daemon's first health answer", every_s=0.1)

    def _answers(self) -> bool:
        try:
            call(SOCKET, "health", timeout_s=1.0)
            return True
        except DaemonUnavailable:
            if self.proc.poll() is not None:
                raise AssertionError(f"daemon did not start: {self.proc.communicate()[1][-2000:]}") from None
            return False

    def signal(self, signum: int) -> None:
        self.proc.send_signal(signum)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def decisions(self):
        with Store.open(str(self.db), create=False) as store:
            return store.load_decisions()


@pytest.fixture
def daemons(hooked: None, tmp_path: Path) -> Iterator[list[DaemonProcess]]:
    started: list[DaemonProcess] = []
    yield started
    for d in started:
        d.stop()


def refreshed(times: int = 2, timeout_s: float = 30.0) -> None:
    """Until the test's daemon has done ``times`` more refreshes (its status counts them): what it
    reads from Slurm then is newer than anything the test did before the call."""
    first = call(SOCKET, "status")["refreshes"]
    until(lambda: call(SOCKET, "status")["refreshes"] >= first + times, timeout_s, f"{times} refreshes")


def start(daemons, tmp_path, *args, name="advisor.db", **env) -> DaemonProcess:
    """A daemon in advise mode unless ``args`` name another (the daemon's own default is observe)."""
    if "--mode" not in args:
        args = (*args, "--mode", "advise")
    d = DaemonProcess(tmp_path / name, *args, **env)
    daemons.append(d)
    return d


def test_an_advised_ps_job_runs_where_and_as_the_layout_says(slurm: Slurm, daemons, tmp_path):
    # spread lays the job out over several nodes where Slurm would put all four tasks on n2: a pin
    start(daemons, tmp_path, "--policy", "spread")
    blocker = slurm.submit(["-n", "6", "-w", "n1"], 60)  # leaves n1 2 CPUs: the layout must not be trivial
    slurm.wait(blocker, lambda v: v.state == "RUNNING")
    refreshed()  # the daemon sees the blocker
    out = tmp_path / "roles"
    script = tmp_path / "roles.sh"
    script.write_text(ROLES_SCRIPT.format(python=sys.executable, out=out))
    job = run(["sbatch", "--parsable", f"--output={out}", "--comment", f"nightly {PS_JOB}", "-n", "4",
               "--gpus-per-task=1", "--mem-per-cpu=1000", f"--chdir={tmp_path}", str(script)]).strip()
    slurm.submitted.append(job)
    view = slurm.wait(job, lambda v: v.state == "RUNNING", timeout_s=30, what="RUNNING")
    slurm.wait(job, lambda v: v.state == "COMPLETED", timeout_s=60, what="COMPLETED")
    text = out.read_text()
    layout = parse_layout(re.search(r"^layout=(.*)$", text, re.MULTILINE).group(1))
    tasks = layout.get("ps", []) + layout["worker"]
    started = {int(t): n for t, n in re.findall(r"^task=(\d+) node=(\S+)$", text, re.MULTILINE)}
    assert [started[i] for i in range(4)] == tasks            # every task where the layout put it
    assert set(view.allocation) == set(tasks)                 # Slurm allocated exactly those nodes
    for node, count in Counter(tasks).items():                # ... with room for their tasks
        assert view.allocation[node].cpus >= count and view.allocation[node].gpus >= count
    info = run(["scontrol", "show", "job", job])
    decision = re.search(r"AdminComment=slurm-advisor:(d-[0-9a-f]{12})", info).group(1)
    assert f"decision={decision}" in text and f"Comment=nightly {PS_JOB}" in info
    daemons[0].stop()
    recorded = {d.id: d for d in daemons[0].decisions()}
    assert recorded[decision].action == "place" and [n for _, n in recorded[decision].layout] == tasks


def test_a_burst_of_submissions_is_not_pinned_to_the_same_free_gpus(slurm: Slurm, daemons, tmp_path):
    # A burst faster than the daemon's refresh (5 s), so it decides each job on a view that shows
    # none of the others. spread, its choices and Slurm's:
    #   1. one 4-GPU task: n1, Slurm's own choice too: not pinned, but claimed;
    #   2. two 2-GPU tasks: n2, n3 (n1 claimed; Slurm: n2 x 2): pinned;
    #   3. two 2-GPU tasks: n2, n4 (Slurm: n4 x 2): pinned;
    #   4. two 2-GPU tasks: n3, n4, the last free GPUs, as Slurm would: not pinned, claimed.
    # Without the first job's claim, the second would be pinned to n1 and n2 (the view shows
    # n1 free while Slurm has given it to job 1) and wait; with claims all four start, every GPU taken.
    d = start(daemons, tmp_path, "--policy", "spread", refresh="5")
    whole = ["--comment", "slurm-advisor: type=bert ps=0 workers=1", "-n", "1", "--gpus-per-task=4"]
    halves = ["--comment", "slurm-advisor: type=bert ps=0 workers=2", "-n", "2", "--gpus-per-task=2"]
    jobs = [slurm.submit(whole, 30)] + [slurm.submit(halves, 30) for _ in range(3)]
    views = [slurm.wait(j, lambda v: v.state == "RUNNING", timeout_s=20, what="RUNNING") for j in jobs]
    infos = [run(["scontrol", "show", "job", j]) for j in jobs]
    pinned = [not re.search(r"ReqNodeList=\(null\)", info) for info in infos]
    assert pinned == [False, True, True, False]
    stamps = [re.search(r"AdminComment=slurm-advisor:(d-[0-9a-f]{12})(:observed)?", info) for info in infos]
    assert [m.group(2) for m in stamps] == [":observed", None, None, ":observed"]  # only stamped: Slurm's
    gpus = Counter()
    for v in views:
        for node, held in v.allocation.items():
            gpus[node] += held.gpus
    assert gpus == {"n1": 4, "n2": 4, "n3": 4, "n4": 4}
    d.stop()
    recorded = {x.id: x for x in d.decisions()}
    for view, m in zip(views, stamps):  # every job where its decision says, Slurm's own choices too
        assert set(view.allocation) == set(recorded[m.group(1)].nodes)


def _submit_timed(slurm: Slurm, count: int) -> list[float]:
    took = []
    for _ in range(count):
        t0 = time.monotonic()
        job = slurm.submit(["--comment", PS_JOB, "-n", "4", "--hold"], 1)
        took.append(time.monotonic() - t0)
        info = run(["scontrol", "show", "job", job])
        assert "AdminComment=slurm-advisor" not in info, info  # unmodified
        assert re.search(r"ReqNodeList=\(null\)", info), info
    slurm.cancel(*slurm.active_ids())
    return took


@pytest.mark.parametrize("how", ["killed", "stopped"])
def test_the_hook_fails_open_with_the_daemon_killed_or_stopped(slurm: Slurm, daemons, tmp_path, how):
    d = start(daemons, tmp_path, "--policy", "slurm-default")
    d.signal(signal.SIGKILL if how == "killed" else signal.SIGSTOP)
    took = _submit_timed(slurm, 200)
    assert max(took) < 0.5, f"slowest submission {max(took):.3f} s"
    if how == "stopped":
        time.sleep(5.5)  # the hook skips a daemon that timed out for 5 s (SLURM_ADVISOR_BACKOFF): let it lapse


class GarbageDaemon:
    """Answers every connection with bytes that are not the protocol, on the hook's socket."""

    def __init__(self):
        import socket
        import threading
        SOCKET.unlink(missing_ok=True)
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(str(SOCKET))
        self.sock.listen(64)
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                conn.recv(65536)
                conn.sendall(b"\x00\xffnot the protocol {]\n")

    def close(self):
        self.sock.close()
        SOCKET.unlink(missing_ok=True)


def test_the_hook_fails_open_with_a_daemon_answering_garbage(slurm: Slurm, hooked):
    garbage = GarbageDaemon()
    try:
        took = _submit_timed(slurm, 200)
    finally:
        garbage.close()
    assert max(took) < 0.5, f"slowest submission {max(took):.3f} s"


def test_no_job_field_reaches_a_shell(slurm: Slurm, daemons, tmp_path):
    start(daemons, tmp_path, "--policy", "slurm-default")
    canary = tmp_path / "pwned"
    hostile = f"$(touch {canary})`touch {canary}`;touch {canary}"
    job = run(["sbatch", "--parsable", "--hold", "-n", "4", "--output=/dev/null", f"--job-name={hostile}",
               "--comment", f"{hostile} {PS_JOB} {hostile}", "--wrap=true"]).strip()
    slurm.submitted.append(job)
    refreshed()  # the daemon reads the queue with the job's fields in it
    assert "AdminComment=slurm-advisor:d-" in run(["scontrol", "show", "job", job])  # it was advised
    assert not canary.exists()


def test_observe_mode_changes_nothing_slurm_schedules_by(slurm: Slurm, daemons, tmp_path):
    d = start(daemons, tmp_path, "--policy", "slurm-default", "--mode", "observe")
    job = slurm.submit(["--comment", PS_JOB, "-n", "4", "--gpus-per-task=1"], 2)
    view = slurm.wait(job, lambda v: v.state == "RUNNING", timeout_s=20)
    info = run(["scontrol", "show", "job", job])
    assert re.search(r"ReqNodeList=\(null\)", info) and re.search(r"NumNodes=1 ", info)
    stamp = re.search(r"AdminComment=slurm-advisor:(d-[0-9a-f]{12}):observed\b", info)  # only the id
    assert stamp, info
    assert set(view.allocation) == {"n1"}  # Slurm's own choice: all four on the first node
    slurm.wait(job, lambda v: v.state == "COMPLETED", timeout_s=20)
    refreshed()  # the daemon records the outcome
    d.stop()
    (decision,) = d.decisions()
    assert decision.id == stamp.group(1) and decision.action == "observe" and decision.would
    with Store.open(str(d.db), create=False) as store:
        outcome = store.outcome(job)
    assert outcome.decision_id == decision.id and outcome.state == "COMPLETED" and outcome.nodes == ("n1",)


def test_a_job_pinned_to_nodes_taken_first_is_released_after_the_bound(slurm: Slurm, daemons, tmp_path):
    # A daemon that refreshes once an hour pins to n1-n4 (spread: two tasks each; Slurm would take
    # n1 alone) from its start-up view although a blocker took n1 since; it dies. The cron command
    # (`slurm-advisor release`) unpins the job after the bound, and it starts on a free node; a
    # second daemon then finds nothing left to release.
    stale = start(daemons, tmp_path, "--policy", "spread", refresh="3600")
    blocker = slurm.submit(["-n", "8", "-w", "n1"], 60)
    slurm.wait(blocker, lambda v: v.state == "RUNNING")
    pinned = slurm.submit(["--comment", "slurm-advisor: type=bert ps=0 workers=8", "-n", "8"], 30)
    assert "ReqNodeList=n[1-4]" in run(["scontrol", "show", "job", pinned])
    stale.signal(signal.SIGKILL)
    # Slurm's scheduler has weighed it (a pending job's reason is None until then) and left it waiting
    view = slurm.wait(pinned, lambda v: v.reason not in ("", "None"), timeout_s=30, what="a scheduling pass")
    assert view.state == "PENDING", view
    env = {**os.environ, "SLURM_ADVISOR_DB": str(stale.db)}
    out = subprocess.run([sys.executable, "-m", "slurm_advisor.cli", "release", "--older-than", "1"], env=env,
                         capture_output=True, text=True, timeout=60, check=True).stdout
    assert f"releasing job {pinned}" in out
    view = slurm.wait(pinned, lambda v: v.state == "RUNNING", timeout_s=20, what="RUNNING after release")
    assert "n1" not in view.allocation


def test_the_daemon_itself_releases_a_stale_pin(slurm: Slurm, daemons, tmp_path):
    # spread pins 8 one-CPU tasks to n1-n4 (two each) from its stale (empty) view; n1 and n2 are
    # taken since, so the job waits on its pin until the next daemon releases it
    stale = start(daemons, tmp_path, "--policy", "spread", refresh="3600")
    blocker = slurm.submit(["-n", "8", "-w", "n2"], 60)
    slurm.wait(blocker, lambda v: v.state == "RUNNING")
    other = slurm.submit(["-n", "8", "-w", "n1"], 60)
    slurm.wait(other, lambda v: v.state == "RUNNING")
    pinned = slurm.submit(["--comment", "slurm-advisor: type=bert ps=0 workers=8", "-n", "8"], 30)
    assert "ReqNodeList=n[1-4]" in run(["scontrol", "show", "job", pinned])
    stale.stop()
    start(daemons, tmp_path, "--policy", "spread", name="advisor.db", pin_bound_s="2")
    view = slurm.wait(pinned, lambda v: v.state == "RUNNING", timeout_s=20, what="RUNNING after the daemon's release")
    assert set(view.allocation) & {"n1", "n2"} == set()
    assert json.loads(json.dumps(call(SOCKET, "status")))["released"] == 1


def test_layout_in_observe_mode_takes_the_ps_count_from_the_jobs_marker(slurm: Slurm, daemons, tmp_path):
    # the README's PS job, placed by Slurm: `slurm-advisor layout` without --ps still finds its PS
    start(daemons, tmp_path, "--policy", "spread", "--mode", "observe")
    out, script = tmp_path / "layout.out", tmp_path / "layout.sh"
    script.write_text(f"#!/bin/bash\n{sys.executable} -m slurm_advisor.cli layout\n")
    job = run(["sbatch", "--parsable", f"--output={out}", "--comment", f"nightly {PS_JOB} model_mb=98", "-n", "4",
               "--mem-per-cpu=1000", f"--chdir={tmp_path}", str(script)]).strip()
    slurm.submitted.append(job)
    slurm.wait(job, lambda v: v.state == "COMPLETED", timeout_s=60, what="COMPLETED")
    text = out.read_text()
    assert "SLURM_ADVISOR_LAYOUT_SOURCE=slurm" in text and "SLURM_ADVISOR_NUM_PS=1" in text, text
    assert "SLURM_ADVISOR_NUM_WORKERS=3" in text, text


def _released_at(job: str, timeout_s: float) -> float:
    """When (monotonic) the daemon marked ``job`` released, polled every 50 ms."""
    until(lambda: ":released" in run(["scontrol", "show", "job", "-o", job]), timeout_s, f"job {job} released")
    return time.monotonic()


def test_a_pin_from_a_stale_view_is_released_at_the_next_refresh_not_after_the_bound(slurm: Slurm, daemons,
                                                                                     tmp_path):
    # as above, but the daemon that takes over keeps pin_bound_s at 300 s: it releases the pin
    # because n1 and n2 cannot hold their two tasks each, at its first refresh (target: two periods)
    refresh_s = 1.0
    stale = start(daemons, tmp_path, "--policy", "spread", refresh="3600")
    blockers = [slurm.submit(["-n", "8", "-w", node], 120) for node in ("n1", "n2")]
    for blocker in blockers:
        slurm.wait(blocker, lambda v: v.state == "RUNNING")
    pinned = slurm.submit(["--comment", "slurm-advisor: type=bert ps=0 workers=8", "-n", "8"], 30)
    assert "ReqNodeList=n[1-4]" in run(["scontrol", "show", "job", pinned])
    stale.stop()
    start(daemons, tmp_path, "--policy", "spread", refresh=f"{refresh_s:g}")  # pin_bound_s: the default
    up = time.monotonic()  # its first refresh is done: the first that sees n1 and n2 taken
    delay = _released_at(pinned, 4 * refresh_s) - up
    view = slurm.wait(pinned, lambda v: v.state == "RUNNING", timeout_s=2 * refresh_s, what="RUNNING after release")
    assert set(view.allocation) & {"n1", "n2"} == set()
    status = call(SOCKET, "status")
    assert (status["released"], status["released_taken"]) == (1, 1)
    print(f"released {delay:.2f} s = {delay / refresh_s:.2f} refresh periods after the daemon first saw "
          f"the pinned nodes taken")
    assert delay <= 2 * refresh_s


def test_a_pin_is_kept_while_its_nodes_are_free_and_released_within_two_refreshes_once_taken(slurm: Slurm,
                                                                                             daemons, tmp_path):
    # With partition batch down, Slurm starts nothing there: the pinned job waits however free its
    # nodes are, as if Slurm's scheduler lagged, and the daemon keeps the pin. Then a job of the
    # partition "small" (n1, n2), which the advisor does not place, takes n1: the pin is released.
    refresh_s = 1.0
    start(daemons, tmp_path, "--policy", "spread", refresh=f"{refresh_s:g}")
    run(["scontrol", "update", "PartitionName=batch", "State=DOWN"])
    try:
        pinned = slurm.submit(["--comment", "slurm-advisor: type=bert ps=0 workers=8", "-n", "8"], 30)
        assert "ReqNodeList=n[1-4]" in run(["scontrol", "show", "job", pinned])
        refreshed(3)
        assert ":released" not in run(["scontrol", "show", "job", "-o", pinned])
        blocker = slurm.submit(["-p", "small", "-n", "8", "-w", "n1"], 120)
        slurm.wait(blocker, lambda v: v.state == "RUNNING")
        taken = time.monotonic()  # within 0.1 s after it started (the wait's polling)
        delay = _released_at(pinned, 4 * refresh_s) - taken
    finally:
        run(["scontrol", "update", "PartitionName=batch", "State=UP"])
    view = slurm.wait(pinned, lambda v: v.state == "RUNNING", timeout_s=10, what="RUNNING after release")
    assert "n1" not in view.allocation
    status = call(SOCKET, "status")
    assert (status["released"], status["released_taken"]) == (1, 1)
    print(f"released {delay:.2f} s = {delay / refresh_s:.2f} refresh periods after its nodes were taken")
    assert delay <= 2 * refresh_s


class AlwaysHold:
    """A policy that always waits for one node: what the learned policy's holding does, made certain."""

    name = "always-hold"

    def place(self, snapshot, job, rng):
        from slurm_advisor.policies.base import Hold
        return Hold("waiting for a single node", max_nodes=1)

    def score_nodes(self, snapshot, job):
        return {}


def test_enforce_turns_a_hold_into_a_node_count_cap_that_is_released_after_the_bound(slurm: Slurm, hooked,
                                                                                      tmp_path):
    from dataclasses import replace

    from slurm_advisor.advisor import Advisor
    from slurm_advisor.cluster.slurm_cli import SlurmCliSource
    from slurm_advisor.daemon.config import DaemonConfig
    from slurm_advisor.daemon.daemon import Daemon
    from slurm_advisor.daemon.queue import SlurmQueue
    from slurm_advisor.daemon.server import AdvisorServer, ServerThread
    from slurm_advisor.daemon.service import AdviceService
    from slurm_advisor.slurm.expressible import express

    config = replace(DaemonConfig(), socket=SOCKET, mode="enforce", refresh_s=0.5, pin_bound_s=4.0,
                     db=str(tmp_path / "advisor.db"), client_timeout_s=1.0)
    service = AdviceService(Advisor(AlwaysHold()), express, default_partition="batch")
    daemon = Daemon(config, SlurmCliSource(), SlurmQueue(), service, Store.open(config.db))
    daemon.start()
    try:
        with ServerThread(AdvisorServer(SOCKET, daemon.dispatcher(), 1.0)):
            # every node keeps 4 of its 8 CPUs: 6 tasks fit on one node of the empty cluster (so
            # Slurm accepts the cap) but not now, so the cap of one node keeps the job pending
            blockers = [slurm.submit(["-n", "4", "-w", n], 60) for n in ("n1", "n2", "n3", "n4")]
            for b in blockers:
                slurm.wait(b, lambda v: v.state == "RUNNING")
            seen = daemon.state.counters.refreshes  # the daemon sees them: a refresh begun after this
            until(lambda: daemon.state.counters.refreshes >= seen + 2, 30, "two refreshes")
            job = slurm.submit(["--comment", "slurm-advisor: type=bert ps=0 workers=6", "-n", "6"], 5)
            info = run(["scontrol", "show", "job", job])
            assert "NumNodes=1-1" in info or re.search(r"NumNodes=1 ", info), info
            assert "AdminComment=slurm-advisor:d-" in info and re.search(r"ReqNodeList=\(null\)", info)
            assert slurm.job(job).state == "PENDING"
            # the bound passes: the daemon restores the user's node counts and Slurm starts it on two
            view = slurm.wait(job, lambda v: v.state == "RUNNING", timeout_s=20, what="RUNNING after release")
            assert len(view.allocation) == 2
    finally:
        daemon.stop()


def _busy_small_partition(slurm: Slurm) -> None:
    """n1 and n2 form the "small" partition: take 2 GPUs on each."""
    blockers = [slurm.submit(["-n", "1", "--gpus-per-task=2", "-w", n], 60) for n in ("n1", "n2")]
    for b in blockers:
        slurm.wait(b, lambda v: v.state == "RUNNING")
    refreshed()  # the daemon sees them


def test_a_job_is_pinned_only_to_nodes_of_its_partition(slurm: Slurm, daemons, tmp_path):
    # spread, whose choices are not Slurm's: 2 workers in "small" on n1, n2 (Slurm: n1 x 2); a job
    # pinned outside its partition (n3, n4: the least loaded nodes) would be rejected by Slurm.
    start(daemons, tmp_path, "--policy", "spread")
    _busy_small_partition(slurm)
    job = slurm.submit(["-p", "small", "--comment", "slurm-advisor: type=bert ps=0 workers=2", "-n", "2",
                        "--gpus-per-task=1"], 5)
    view = slurm.wait(job, lambda v: v.state == "RUNNING", timeout_s=20)
    info = run(["scontrol", "show", "job", job])
    assert "AdminComment=slurm-advisor:d-" in info and "ReqNodeList=n[1-2]" in info, info
    assert set(view.allocation) == {"n1", "n2"}
    plain = slurm.submit(["--comment", "slurm-advisor: type=bert ps=0 workers=4", "-n", "4", "--gpus-per-task=1"], 5)
    assert set(slurm.wait(plain, lambda v: v.state == "RUNNING", timeout_s=20).allocation) == {"n3", "n4"}
    assert "ReqNodeList=n[3-4]" in run(["scontrol", "show", "job", plain])


def test_slurms_own_choice_is_left_to_slurm_and_recorded(slurm: Slurm, daemons, tmp_path):
    # slurm-default advises what Slurm does anyway: in "small" (2 GPUs free on n1 and n2) four
    # one-GPU workers go 2 + 2 on n1, n2, where Slurm, unpinned, puts them; on the whole cluster it
    # would have been n3. The job is only stamped, Slurm places it, the daemon still sees it: the
    # decision (with its reason), the claim ended when it started, its outcome.
    d = start(daemons, tmp_path, "--policy", "slurm-default")
    _busy_small_partition(slurm)
    job = slurm.submit(["-p", "small", "--comment", "slurm-advisor: type=bert ps=0 workers=4", "-n", "4",
                        "--gpus-per-task=1", "--mem-per-cpu=1000"], 2)
    view = slurm.wait(job, lambda v: v.state == "RUNNING", timeout_s=20)
    info = run(["scontrol", "show", "job", job])
    stamp = re.search(r"AdminComment=slurm-advisor:(d-[0-9a-f]{12}):observed\b", info)
    assert stamp and re.search(r"ReqNodeList=\(null\)", info), info
    assert {n: r.gpus for n, r in view.allocation.items()} == {"n1": 2, "n2": 2}
    refreshed()  # the claim ends as the job shows up running
    status = call(SOCKET, "status")
    assert (status["slurms_choice"], status["placed"], status["claims"]) == (1, 0, 0)
    slurm.wait(job, lambda v: v.state == "COMPLETED", timeout_s=20)
    refreshed()  # the daemon records the outcome
    d.stop()
    (decision,) = d.decisions()
    assert (decision.id, decision.mode, decision.action) == (stamp.group(1), "advise", "observe")
    assert "slurm's own choice" in decision.reason and decision.layout == ()
    assert Counter(n for _, n in decision.would) == {"n1": 2, "n2": 2}  # what Slurm then did
    with Store.open(str(d.db), create=False) as store:
        outcome = store.outcome(job)
    assert outcome.decision_id == decision.id and outcome.state == "COMPLETED" and set(outcome.nodes) == {"n1", "n2"}


def test_a_job_submitted_while_the_cluster_is_busy_is_stamped_decided_and_linked_to_where_slurm_ran_it(
        slurm: Slurm, daemons, tmp_path):
    # Every node's GPUs taken: no placement now. The job goes to Slurm as submitted, but stamped, so
    # its decision says why and its outcome records where Slurm ran it once the blockers end.
    d = start(daemons, tmp_path, "--policy", "spread")
    blockers = [slurm.submit(["-n", "1", "--gpus-per-task=4", "-w", n], 4) for n in ("n1", "n2", "n3", "n4")]
    for b in blockers:
        slurm.wait(b, lambda v: v.state == "RUNNING")
    refreshed(2)  # the daemon sees them
    job = slurm.submit(["--comment", "slurm-advisor: type=bert ps=0 workers=2", "-n", "2", "--gpus-per-task=1"], 1)
    info = run(["scontrol", "show", "job", job])
    stamp = re.search(r"AdminComment=slurm-advisor:(d-[0-9a-f]{12}):observed\b", info)
    assert stamp and re.search(r"ReqNodeList=\(null\)", info), info  # stamped only: Slurm's as submitted
    view = slurm.wait(job, lambda v: v.state == "RUNNING", timeout_s=30, what="RUNNING once the GPUs are free")
    slurm.wait(job, lambda v: v.state == "COMPLETED", timeout_s=30)
    refreshed(2)  # the daemon records the outcome
    d.stop()
    (decision,) = [x for x in d.decisions() if x.id == stamp.group(1)]
    assert decision.action == "observe" and decision.reason.startswith("left to Slurm as submitted")
    with Store.open(str(d.db), create=False) as store:
        outcome = store.outcome(job)
    assert outcome.decision_id == decision.id and set(outcome.nodes) == set(view.allocation)


def test_an_unmodelled_option_leaves_the_job_as_submitted_with_the_reason(slurm: Slurm, daemons, tmp_path):
    d = start(daemons, tmp_path, "--policy", "spread")
    job = slurm.submit(["--comment", "slurm-advisor: type=bert ps=0 workers=2", "-n", "2", "--gpus=2"], 1)
    info = run(["scontrol", "show", "job", job])
    stamp = re.search(r"AdminComment=slurm-advisor:(d-[0-9a-f]{12}):observed\b", info)
    assert stamp and re.search(r"ReqNodeList=\(null\)", info), info
    slurm.wait(job, lambda v: v.state == "COMPLETED", timeout_s=30)
    d.stop()
    (decision,) = [x for x in d.decisions() if x.id == stamp.group(1)]
    assert decision.action == "observe" and decision.reason == "unmodelled option: --gpus (tres_per_job)"
