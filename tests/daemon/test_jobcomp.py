"""Outcomes from the job completion file (jobcomp/filetxt) for advised jobs squeue no longer lists."""
from __future__ import annotations

from daemon_helpers import make_daemon, refreshed

from slurm_advisor.daemon.jobcomp import JobCompFile, configured, parse_line
from slurm_advisor.daemon.queue import Listing
from slurm_advisor.domain.outcome import Outcome
from slurm_advisor.store import Store

# as the testbed's slurmctld (22.05) writes them; the second job's name holds spaces and fake fields
LINE = ("JobId=3358 UserId=root(0) GroupId=root(0) Name=wrap JobState=COMPLETED Partition=batch "
        "TimeLimit=UNLIMITED StartTime=2026-12-01T14:38:20 EndTime=2026-12-01T14:38:50 NodeList=n[1-2] NodeCnt=2 "
        "ProcCnt=4 WorkDir=/tmp ReservationName= Tres=cpu=4,mem=4000M,node=1,billing=4 Account= QOS= WcKey= "
        "Cluster=unknown SubmitTime=2026-12-01T14:38:19 EligibleTime=unknown DerivedExitCode=0:0 ExitCode=0:0 \n")
SPOOF = ("JobId=3359 UserId=bob(1000) GroupId=bob(1000) Name=x JobState=COMPLETED Partition=batch TimeLimit=1 "
         "StartTime=2000-01-01T00:00:00 EndTime=2000-01-01T00:00:01 NodeList=n9 NodeCnt=1 y JobState=FAILED "
         "Partition=batch TimeLimit=UNLIMITED StartTime=2026-12-01T14:40:00 EndTime=2026-12-01T14:41:00 "
         "NodeList=n3 NodeCnt=1 ProcCnt=1 WorkDir=/home/bob ReservationName= SubmitTime=2026-12-01T14:39:00 "
         "EligibleTime=unknown\n")


def test_the_file_is_found_in_slurms_config():
    text = "JobCompHost             = localhost\nJobCompLoc              = /var/log/slurm/jobcomp.txt\n" \
           "JobCompType             = jobcomp/filetxt\n"
    assert str(configured(text)) == "/var/log/slurm/jobcomp.txt"
    assert configured(text.replace("jobcomp/filetxt", "jobcomp/none")) is None


def test_a_line_gives_the_jobs_final_state_times_and_nodes():
    outcome = parse_line(LINE, "d-000000000001")
    assert (outcome.job_id, outcome.state, outcome.decision_id, outcome.nodes) == \
        ("3358", "COMPLETED", "d-000000000001", ("n1", "n2"))
    assert outcome.end_time - outcome.start_time == 30 and outcome.start_time - outcome.submit_time == 1
    spoofed = parse_line(SPOOF)  # the fields Slurm wrote after the name win
    assert (spoofed.state, spoofed.nodes, spoofed.end_time - spoofed.start_time) == ("FAILED", ("n3",), 60)
    assert parse_line("garbage") is None


def test_only_appended_lines_are_read_and_a_half_written_line_waits(tmp_path):
    path = tmp_path / "jobcomp.txt"
    path.write_text(LINE)
    reader = JobCompFile(path)
    wanted = {"3358": None, "3359": "d-000000000002"}
    assert [o.job_id for o in reader.ended(wanted)] == ["3358"]
    assert reader.ended(wanted) == []  # nothing new
    with path.open("a") as f:
        f.write(SPOOF[:40])
    assert reader.ended(wanted) == []
    with path.open("a") as f:
        f.write(SPOOF[40:])
    (late,) = reader.ended(wanted)
    assert late.job_id == "3359" and late.decision_id == "d-000000000002"
    path.write_text(LINE)  # rotated: read from the start again
    assert [o.job_id for o in reader.ended(wanted)] == ["3358"]


class EmptyQueue:
    def read(self):
        return Listing([], {})


def test_a_job_that_ended_while_the_daemon_was_down_gets_its_outcome(tmp_path):
    with Store.open(str(tmp_path / "advisor.db")) as store:  # what the previous run recorded
        store.record_outcomes([Outcome("3358", "RUNNING", "d-000000000001", 1.0, 2.0)])
    (tmp_path / "jobcomp.txt").write_text(LINE)
    daemon = make_daemon(tmp_path, queue=EmptyQueue())
    daemon.jobcomp = JobCompFile(tmp_path / "jobcomp.txt")
    daemon.start()
    refreshed(daemon)  # the refresh reads the completion file
    daemon.stop()
    with Store.open(str(tmp_path / "advisor.db"), create=False) as store:
        outcome = store.outcome("3358")
    assert (outcome.state, outcome.decision_id, outcome.nodes) == ("COMPLETED", "d-000000000001", ("n1", "n2"))
