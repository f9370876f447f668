"""Speed reports and outcomes on the real testbed: a marked job runs `slurm-advisor report` from
inside itself; the daemon stores it as a live speed sample, and the job's outcome when it ends.

Needs the testbed started with the hook (tests/run.sh does), like test_live_path.py, whose daemon
process and fixtures this file uses.
"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
from slurmctl import Slurm, run
from test_live_path import ROOT, SOCKET, daemons, hooked, refreshed, start  # noqa: F401 -- fixtures used below

from slurm_advisor.store import Store

pytestmark = pytest.mark.slurm

MARKER = "slurm-advisor: type=resnet50 ps=0 workers=2"
REPORTING_SCRIPT = """#!/bin/bash
# Report a speed from inside the job, as a job script would (never fails the job).
set -e
sleep 2  # the daemon reads the queue every 0.5 s: let it see this job running
{python} -m slurm_advisor.cli report --iterations 120 --seconds 2 --socket {socket} --verbose
echo "reported"
sleep 1
"""


@pytest.mark.parametrize(("policy", "action"), [("spread", "place"), ("slurm-default", "observe")])
def test_a_report_from_inside_a_job_becomes_a_live_sample_and_its_outcome_is_recorded(
        slurm: Slurm, daemons, tmp_path: Path, policy, action):  # noqa: F811 -- the fixture imported above
    # spread pins the two workers to n1, n2; slurm-default's n1 x 2 is Slurm's own choice, only
    # stamped: its report and outcome still reach the decision, its sample is where Slurm put it
    d = start(daemons, tmp_path, "--policy", policy)
    script = tmp_path / "report.sh"
    script.write_text(REPORTING_SCRIPT.format(python=sys.executable, socket=SOCKET))
    out = tmp_path / "report.out"
    job = run(["sbatch", "--parsable", f"--output={out}", "--comment", MARKER, "-n", "2", "--gpus-per-task=1",
               "--mem-per-cpu=1000", f"--chdir={tmp_path}", str(script)]).strip()
    slurm.submitted.append(job)
    view = slurm.wait(job, lambda v: v.state == "COMPLETED", timeout_s=60, what="COMPLETED")
    text = out.read_text()
    assert "reported" in text and "not reported" not in text, text
    refreshed()  # the daemon sees the job ended
    d.stop()
    with Store.open(str(d.db), create=False) as store:
        (decision,) = store.load_decisions()
        (report,) = store.load_reports(job_id=job)
        samples = [s for s in store.load_samples(source="live") if s.subject.job.id == job]
        outcome = store.outcome(job)
    assert decision.action == action and report.decision_id == decision.id and report.speed == 60.0
    (sample,) = samples
    assert sample.speed == 60.0 and sample.subject.job.type == "resnet50"
    assert [n for _, n in decision.layout or decision.would] == [t.node for t in sample.subject.placement.tasks]
    assert outcome is not None and outcome.state == "COMPLETED" and outcome.decision_id == decision.id
    assert outcome.start_time == view.start.timestamp() and outcome.end_time == view.end.timestamp()
    assert set(outcome.nodes) == set(decision.nodes)


PORT_SCRIPT = """#!/bin/bash
# A job on a compute node: the daemon's socket is out of reach, its report port is not.
set -e
sleep 2
export MUNGE_SOCKET={munge}  # the testbed's munged, as slurmd's (the cluster's key)
{python} -m slurm_advisor.cli report --iterations 90 --seconds 3 --verbose
echo "reported"
"""


def test_a_report_through_the_port_is_signed_with_the_clusters_munge(slurm: Slurm, daemons, tmp_path: Path):  # noqa: F811
    import socket

    with socket.socket() as probe:  # a free port on this host
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    munge_socket = ROOT / "munge" / "munge.socket"
    d = start(daemons, tmp_path, "--policy", "spread", "--report-port", str(port),
              munge_socket=str(munge_socket), report_listen="127.0.0.1")
    script = tmp_path / "port.sh"
    script.write_text(PORT_SCRIPT.format(python=sys.executable, munge=munge_socket))
    out = tmp_path / "port.out"
    export = f"ALL,SLURM_ADVISOR_REPORT_ADDRESS=127.0.0.1:{port},SLURM_ADVISOR_SOCKET=/nonexistent/advisor.sock"
    job = run(["sbatch", "--parsable", f"--output={out}", "--comment", MARKER, "-n", "2", "--gpus-per-task=1",
               "--mem-per-cpu=1000", f"--chdir={tmp_path}", f"--export={export}", str(script)]).strip()
    slurm.submitted.append(job)
    slurm.wait(job, lambda v: v.state == "COMPLETED", timeout_s=60, what="COMPLETED")
    text = out.read_text()
    assert "reported" in text and "not reported" not in text, text
    d.stop()
    with Store.open(str(d.db), create=False) as store:
        (report,) = store.load_reports(job_id=job)
    assert report.speed == 30.0 and report.uid == 0  # the job's owner (root), as the credential says
