"""`slurm-advisor report` and slurm_advisor.report: never a failed job, nothing on stdout; and
reports that do reach a daemon."""
from __future__ import annotations

import subprocess
import sys
import threading
import time

import pytest

from slurm_advisor.report import Reporter, report

CLI = [sys.executable, "-m", "slurm_advisor.cli", "report"]


def _run(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, *args], env=env, capture_output=True, text=True, timeout=60, check=False)


@pytest.mark.parametrize("args", [
    ["--iterations", "100", "--seconds", "2"],                 # the daemon is away
    ["--iterations", "-1", "--seconds", "nan"],                # nonsense values
    ["--iterations", "abc"],                                    # not even a number, --seconds missing
])
def test_report_never_fails_and_prints_nothing(tmp_path, args):
    env = {"PATH": "/usr/bin:/bin", "SLURM_JOB_ID": "42", "SLURM_ADVISOR_SOCKET": str(tmp_path / "none.sock")}
    quiet = _run(args, env)
    assert (quiet.returncode, quiet.stdout, quiet.stderr) == (0, "", "")
    verbose = _run([*args, "--verbose"], env)
    assert verbose.returncode == 0 and verbose.stdout == ""
    assert len(verbose.stderr.strip().splitlines()) == 1 and "not reported" in verbose.stderr


def test_report_outside_a_job_is_a_quiet_no_op(tmp_path):
    done = _run(["--iterations", "1", "--seconds", "1", "--verbose"], {"PATH": "/usr/bin:/bin"})
    assert done.returncode == 0 and done.stdout == "" and "no job id" in done.stderr


class _Cluster:
    name = "static"

    def snapshot(self):
        from slurm_advisor.domain import ClusterSnapshot, Node
        return ClusterSnapshot.empty((Node("n1", 8, 4, 32000),))


class _Owners:
    def read(self):
        from slurm_advisor.daemon.queue import Listing
        return Listing([], {"42": 0, "43": 0})


@pytest.fixture
def served(tmp_path):
    from dataclasses import replace

    from slurm_advisor.advisor import Advisor
    from slurm_advisor.daemon.config import DaemonConfig
    from slurm_advisor.daemon.daemon import Daemon
    from slurm_advisor.daemon.server import AdvisorServer, ServerThread
    from slurm_advisor.daemon.service import AdviceService
    from slurm_advisor.policies.slurm_default import SlurmDefaultPolicy
    from slurm_advisor.store import Store

    config = replace(DaemonConfig(), mode="advise", socket=tmp_path / "a.sock", db=str(tmp_path / "a.db"), refresh_s=0.05)
    service = AdviceService(Advisor(SlurmDefaultPolicy()), lambda snapshot, job, placement: placement)
    daemon = Daemon(config, _Cluster(), _Owners(), service, Store.open(config.db))
    daemon.start()
    with ServerThread(AdvisorServer(config.socket, daemon.dispatcher(), 2.0)):
        yield daemon
    daemon.stop()


def test_the_cli_and_the_python_call_reach_the_daemon(served):
    sock = str(served.config.socket)
    env = {"PATH": "/usr/bin:/bin", "SLURM_JOB_ID": "42"}
    done = _run(["--iterations", "100", "--seconds", "4", "--socket", sock], env)
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    assert report(30, 3.0, job_id="43", socket=sock) is True
    assert report(30, 3.0, job_id="44", socket=sock) is False  # not a known job: refused, no exception
    served.stop()
    assert [(r.job_id, r.speed) for r in served.store.load_reports()] == [("42", 25.0), ("43", 10.0)]


def test_a_reporter_reports_every_k_steps_without_blocking(served):
    reporter = Reporter(every=10, job_id="42", socket=served.config.socket)
    began = time.perf_counter()
    for _ in range(100):
        reporter.step()
        time.sleep(0.002)
    stepping = time.perf_counter() - began
    assert reporter.flush()
    assert stepping < 1.0 and reporter.sent >= 2
    served.stop()
    assert sum(r.iterations for r in served.store.load_reports()) == 100  # every iteration counted once


def test_a_reporter_with_no_daemon_costs_nothing(tmp_path):
    reporter = Reporter(every=1, job_id="42", socket=tmp_path / "none.sock")
    began = time.perf_counter()
    for _ in range(1000):
        reporter.step()
    assert time.perf_counter() - began < 1.0 and not reporter.flush() and reporter.sent == 0
    assert threading.active_count() < 50
