"""`slurm-advisor serve` as admins run it: a process that serves, stops on SIGTERM, says what is wrong."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from slurm_advisor.daemon.client import DaemonUnavailable, call
from slurm_advisor.store import Store

CLI = [sys.executable, "-m", "slurm_advisor.cli"]
JOB = {"comment": "slurm-advisor: type=resnet50 ps=1 workers=3", "num_tasks": 4, "cpus_per_task": 2,
       "tres_per_task": "gres:gpu:1", "user_id": 0}


def wait_for(path: Path, timeout_s: float = 60.0) -> dict:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            return call(path, "health", timeout_s=1.0)
        except DaemonUnavailable:
            time.sleep(0.1)
    raise AssertionError(f"daemon did not answer on {path} within {timeout_s} s")


# slurm-default's advice is Slurm's own choice: answered observe (stamp only), nothing pinned; so is
# the shipped model's for this job on the empty cluster (one node, as Slurm); spread's is pinned
@pytest.mark.parametrize(("policy", "action"), [("slurm-default", "observe"), ("spread", "place"),
                                                ("learned", "observe")])
def test_serve_answers_then_stops_cleanly_on_sigterm(tmp_path, policy, action):
    sock, db = tmp_path / "run" / "advisor.sock", tmp_path / "advisor.db"
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_ADVISOR_")}
    proc = subprocess.Popen([*CLI, "serve", "--source", "simulated", "--socket", str(sock), "--db", str(db),
                             "--policy", policy, "--refresh-s", "0.2", "--mode", "advise"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert wait_for(sock)["mode"] == "advise"
        proc.send_signal(signal.SIGHUP)  # logged and ignored: it must not end the daemon
        with pytest.raises(subprocess.TimeoutExpired):
            proc.wait(timeout=0.3)
        assert call(sock, "health")["ok"]
        reply = call(sock, "advise", job=JOB)
        assert reply["action"] == action
        assert reply["layout"].startswith("ps=") if action == "place" else "slurm's own choice" in reply["reason"]
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert "stopped" in err and not sock.exists()
    with Store.open(str(db), create=False) as store:
        assert [d.id for d in store.load_decisions()] == [reply["decision"]]


@pytest.mark.parametrize(("args", "message"), [
    (["--config", "/nonexistent/config.toml"], "cannot read config"),
    (["--policy", "best"], "unknown policy 'best'"),
    (["--source", "simulated", "--cluster", "/nonexistent.toml"], "/nonexistent.toml"),
])
def test_bad_settings_are_one_line_and_exit_2(tmp_path, args, message):
    proc = subprocess.run([*CLI, "serve", "--socket", str(tmp_path / "a.sock"), "--db", str(tmp_path / "a.db"),
                           "--source", "simulated", *args], capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr and "Traceback" not in proc.stderr and len(proc.stderr.splitlines()) == 1


def test_a_live_daemon_socket_is_not_taken_over(tmp_path):
    sock = tmp_path / "advisor.sock"
    first = subprocess.Popen([*CLI, "serve", "--source", "simulated", "--policy", "slurm-default",
                              "--socket", str(sock), "--db", str(tmp_path / "a.db")],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(sock)
        second = subprocess.run([*CLI, "serve", "--source", "simulated", "--policy", "slurm-default",
                                 "--socket", str(sock), "--db", str(tmp_path / "b.db")],
                                capture_output=True, text=True, timeout=60, check=False)
        assert second.returncode == 2 and "another daemon already listens" in second.stderr
        assert call(sock, "health")["ok"]
    finally:
        first.send_signal(signal.SIGTERM)
        first.communicate(timeout=30)


@pytest.mark.parametrize(("args", "message"), [
    (["--socket", "{file}/a.sock"], "socket {file}/a.sock: {file} is not a directory"),
    (["--refresh-s", "1e308"], "flag: refresh_s must be from 0.01 to 86400 s, not 1e+308"),
])
def test_a_socket_under_a_regular_file_or_a_bad_number_is_one_line(tmp_path, args, message):
    """A socket under a regular file ended in a NotADirectoryError traceback."""
    file = tmp_path / "file"
    file.write_text("")
    args = [a.format(file=file) for a in args]
    proc = subprocess.run([*CLI, "serve", "--socket", str(tmp_path / "a.sock"), "--db", str(tmp_path / "a.db"),
                           "--source", "simulated", *args], capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith(f"error: {message.format(file=file)}")
    assert "Traceback" not in proc.stderr and len(proc.stderr.splitlines()) == 1
