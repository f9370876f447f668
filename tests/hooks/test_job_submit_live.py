"""hooks/job_submit.lua inside a real slurmctld (the testbed started with SLURM_ADVISOR_TESTBED_HOOK).

    SLURM_ADVISOR_TESTBED_HOOK=hooks/job_submit.lua .ci/slurm-testbed.sh start   # prints SLURM_CONF
    SLURM_ADVISOR_TEST_SLURM=1 SLURM_CONF=... pytest -m slurm tests/hooks

The fake daemon listens where the testbed told slurmctld to look (SLURM_ADVISOR_TESTBED_SOCKET,
else $SLURM_ADVISOR_TESTBED_DIR/advisor.sock). Skipped unless SLURM_ADVISOR_TEST_SLURM is set; a
set flag with a Slurm that does not answer fails; a testbed without the hook is skipped with why.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fake_advisor import PLACE, FakeAdvisor

from slurm_advisor.slurm.release import Release

pytestmark = pytest.mark.slurm

ROOT = Path(os.environ.get("SLURM_ADVISOR_TESTBED_DIR", "/tmp/slurm-advisor-testbed"))
SOCKET = Path(os.environ.get("SLURM_ADVISOR_TESTBED_SOCKET", ROOT / "advisor.sock"))
MARKER = "slurm-advisor: type=resnet50 ps=1 workers=3"
REPLY = {**PLACE, "decision": "d-live0000001", "nodes": "n2,n3", "num_tasks": 4,
         "layout": "ps=n2;worker=n2,n3,n3"}


def slurm(*args: str, timeout_s: float = 30.0) -> str:
    proc = subprocess.run(list(args), capture_output=True, text=True, timeout=timeout_s, check=False)
    if proc.returncode != 0:
        raise AssertionError(f"{' '.join(args)}: exit {proc.returncode}: {proc.stderr.strip()}")
    return proc.stdout


@pytest.fixture(scope="module")
def hooked_slurm() -> None:
    if not os.environ.get("SLURM_ADVISOR_TEST_SLURM"):
        pytest.skip("needs the Slurm testbed: start .ci/slurm-testbed.sh with SLURM_ADVISOR_TESTBED_HOOK="
                    "hooks/job_submit.lua and set SLURM_CONF and SLURM_ADVISOR_TEST_SLURM=1")
    try:
        config = slurm("scontrol", "show", "config")
    except (AssertionError, OSError, subprocess.TimeoutExpired) as exc:
        pytest.fail(f"SLURM_ADVISOR_TEST_SLURM is set but Slurm does not answer "
                    f"(SLURM_CONF={os.environ.get('SLURM_CONF', 'unset')}): {exc}")
    if not re.search(r"^JobSubmitPlugins\s*=\s*\S*lua", config, re.MULTILINE):
        pytest.skip("the testbed at SLURM_CONF runs without the job submit hook: restart it with "
                    "SLURM_ADVISOR_TESTBED_HOOK=hooks/job_submit.lua")
    if (ROOT / "advisor.disabled").exists():
        pytest.skip(f"the hook's kill switch {ROOT / 'advisor.disabled'} is on")


@pytest.fixture
def jobs(hooked_slurm: None) -> Iterator[list[str]]:
    submitted: list[str] = []
    yield submitted
    if submitted:
        subprocess.run(["scancel", *submitted], capture_output=True, check=False)


def sbatch(jobs: list[str], *args: str, env: dict[str, str] | None = None) -> str:
    proc = subprocess.run(["sbatch", "--parsable", *args], capture_output=True, text=True, timeout=30,
                          check=False, env={**os.environ, **(env or {})})
    assert proc.returncode == 0, f"sbatch {' '.join(args)}: {proc.stderr.strip()}"
    job_id = proc.stdout.strip().split(";")[0]
    jobs.append(job_id)
    return job_id


def release() -> Release:
    return Release.parse(slurm("sinfo", "--version"))


def show_job(job_id: str) -> dict[str, str]:
    text = slurm("scontrol", "show", "job", "-o", job_id)
    return dict(re.findall(r"(?:^|\s)([A-Za-z][\w/:]*)=(\S*)", text))


def wait_done(job_id: str, timeout_s: float = 60.0) -> dict[str, str]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        job = show_job(job_id)
        if job["JobState"] in ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL"):
            return job
        time.sleep(0.3)
    raise AssertionError(f"job {job_id} did not end within {timeout_s} s: {show_job(job_id)}")


def test_place_runs_where_the_daemon_says(jobs: list[str], tmp_path: Path) -> None:
    daemon = FakeAdvisor(SOCKET)
    daemon.reply_with(REPLY)
    try:
        out = tmp_path / "job.out"
        job_id = sbatch(jobs, "--comment", MARKER, "-n", "4", "-o", str(out), "--wrap", "env")
        job = wait_done(job_id)
    finally:
        daemon.close()
    assert daemon.connections == 1
    request = daemon.request_json()["job"]
    assert request["comment"] == MARKER and request["num_tasks"] == 4
    assert job["JobState"] == "COMPLETED", job
    assert job["NodeList"] == "n[2-3]" and job["NumNodes"] == "2"
    assert job["AdminComment"] == "slurm-advisor:d-live0000001"
    assert f"Comment={MARKER} " in slurm("scontrol", "show", "job", "-o", job_id)  # the user's text kept
    env = out.read_text()
    assert "SLURM_ADVISOR_LAYOUT=ps=n2;worker=n2,n3,n3\n" in env
    assert "SLURM_ADVISOR_DECISION=d-live0000001\n" in env


def test_no_daemon_every_job_passes_unmodified_and_fast(jobs: list[str]) -> None:
    assert not SOCKET.exists(), f"something listens at {SOCKET}"
    took = []
    for i in range(50):
        start = time.monotonic()
        sbatch(jobs, "--hold", "--comment", MARKER, "-n", "4", "--wrap", "true")
        took.append(time.monotonic() - start)
    print(f"\n50 marked sbatch, no daemon: mean {sum(took) / 50:.3f} s, slowest {max(took):.3f} s")
    assert len(jobs) == 50 and max(took) < 0.5, f"slowest sbatch {max(took):.3f} s"
    # The same job without the marker, which the hook never touches: how this release shows an
    # unset node count ("1" on 22.05.8, "1-1" on 24.11.5, "1-4" on 26.05.5)
    control = show_job(sbatch(jobs, "--hold", "-n", "4", "--wrap", "true"))
    for job_id in jobs[:50]:
        job = show_job(job_id)
        assert "AdminComment" not in job and job["ReqNodeList"] == "(null)", job  # scontrol omits an unset one
        assert job["NumTasks"] == "4" and job["NumNodes"] == control["NumNodes"], (job, control)


def test_kill_switch_stops_the_hook(jobs: list[str]) -> None:
    switch = ROOT / "advisor.disabled"
    daemon = FakeAdvisor(SOCKET)
    daemon.reply_with(REPLY)
    switch.write_text("")
    try:
        job_id = sbatch(jobs, "--hold", "--comment", MARKER, "-n", "4", "--wrap", "true")
    finally:
        switch.unlink()
        daemon.close()
    assert daemon.connections == 0
    assert "AdminComment" not in show_job(job_id)


def test_request_carries_the_descriptor_fields(jobs: list[str]) -> None:
    daemon = FakeAdvisor(SOCKET)
    try:
        sbatch(jobs, "--hold", "--comment", f'a "q" {MARKER}', "--mem-per-cpu=1000", "-c", "2",
               "--gpus-per-task=1", "-t", "90", "-n", "4", "--wrap", "true")
        sbatch(jobs, "--hold", "--comment", MARKER, "--mem=3G", "-N", "2", "-w", "n1,n2", "--gres=gpu:1",
               "--wrap", "true")
    finally:
        daemon.close()
    first, second = (daemon.request_json(i)["job"] for i in (0, 1))
    # slurmctld's own spelling of -c 2 --gpus-per-task=1 in job_desc, verbatim: 22.05 "gres:gpu:1",
    # 24.11 and 26.05 "cpu=2,gres/gpu=1" (slurm/request.py reads both)
    # (--gres=gpu:1 per node: "gres:gpu:1" on 22.05, "gres/gpu:1" on 24.11 and 26.05)
    old = release() < Release(24, 11)
    per_task, per_node = ("gres:gpu:1", "gres:gpu:1") if old else ("cpu=2,gres/gpu=1", "gres/gpu:1")
    assert first == {**first, "comment": f'a "q" {MARKER}', "num_tasks": 4, "cpus_per_task": 2,
                     "pn_min_memory": 1000, "mem_per_cpu": True, "tres_per_task": per_task,
                     "time_limit": 90, "min_nodes": None, "max_nodes": None, "req_nodes": None}
    assert second == {**second, "num_tasks": None, "cpus_per_task": None, "pn_min_memory": 3072,
                      "mem_per_cpu": False, "tres_per_node": per_node, "time_limit": None,
                      "min_nodes": 2, "max_nodes": 2, "req_nodes": "n[1-2]"}


def test_cli_filter_places_from_the_client(jobs: list[str], tmp_path: Path) -> None:
    """cli_filter.lua in sbatch (a private copy of slurm.conf with CliFilterPlugins=lua); the
    controller's hook is switched off meanwhile so that only the client asks."""
    conf = Path(os.environ["SLURM_CONF"])
    etc = tmp_path / "etc"
    etc.mkdir()
    (etc / "slurm.conf").write_text(conf.read_text() + "\nCliFilterPlugins=lua\n")
    shutil.copy(conf.parent / "gres.conf", etc / "gres.conf")
    for name in ("cli_filter.lua", "slurm_advisor.lua"):  # the filter loads the module beside it
        shutil.copy(Path(__file__).resolve().parents[2] / "hooks" / name, etc / name)
    switch = ROOT / "advisor.disabled"
    daemon = FakeAdvisor(SOCKET)
    daemon.reply_with(REPLY)
    switch.write_text("")
    out = tmp_path / "job.out"
    try:
        job_id = sbatch(jobs, "--comment", MARKER, "-n", "4", "-o", str(out), "--wrap", "env",
                        env={"SLURM_CONF": str(etc / "slurm.conf"), "SLURM_ADVISOR_SOCKET": str(SOCKET),
                             "SLURM_ADVISOR_KILL_SWITCH": str(tmp_path / "off")})
    finally:
        switch.unlink()
        daemon.close()
    job = wait_done(job_id)
    assert daemon.connections == 1
    assert job["JobState"] == "COMPLETED" and job["NodeList"] == "n[2-3]", job
    assert "AdminComment" not in job  # the client cannot set it
    env = out.read_text()
    assert "SLURM_ADVISOR_LAYOUT=ps=n2;worker=n2,n3,n3\n" in env and "SLURM_ADVISOR_DECISION=d-live0000001\n" in env


SITE_SCRIPT = """-- a site's own hook: its admin_comment on every job
function slurm_job_submit(job_desc, part_list, submit_uid)
    job_desc.admin_comment = "site-routed"
    return slurm.SUCCESS
end
function slurm_job_modify(job_desc, job_rec, part_list, modify_uid)
    return slurm.SUCCESS
end
return slurm.SUCCESS
"""


def test_a_sites_own_script_chained_by_install_runs_first_then_the_advisor(jobs: list[str]) -> None:
    """`hooks/install.sh --chain` on a site's job_submit.lua, in the real slurmctld: the site's code
    runs first (its admin_comment), the advisor after it (its stamp appended, its nodes)."""
    etc = Path(os.environ["SLURM_CONF"]).parent
    script = etc / "job_submit.lua"
    ours, mtime = script.read_bytes(), script.stat().st_mtime
    daemon = FakeAdvisor(SOCKET)
    daemon.reply_with(REPLY)
    try:
        script.write_text(SITE_SCRIPT)
        subprocess.run(["bash", str(Path(__file__).resolve().parents[2] / "hooks" / "install.sh"), "--chain",
                        str(etc)], check=True, capture_output=True, timeout=60)
        os.utime(script, (mtime + 2, mtime + 2))  # slurmctld reloads on a change of whole seconds
        job_id = sbatch(jobs, "--comment", MARKER, "-n", "4", "-o", "/dev/null", "--wrap", "true")
        job = wait_done(job_id)
    finally:
        daemon.close()
        script.write_bytes(ours)
        os.utime(script, (mtime + 4, mtime + 4))
        for backup in etc.glob("job_submit.lua.bak.*"):
            backup.unlink()
    assert daemon.connections == 1
    # (show_job's fields end at a space)
    assert " AdminComment=site-routed slurm-advisor:d-live0000001 " in slurm("scontrol", "show", "job", "-o", job_id)
    assert job["JobState"] == "COMPLETED" and job["NodeList"] == "n[2-3]", job
