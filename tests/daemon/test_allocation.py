"""Slurm's per-node task counts of an advised job, read from Slurm while it runs and kept with
its outcome (daemon/allocation.py, Daemon._allocation)."""
from __future__ import annotations

from daemon_helpers import make_daemon, refreshed

from slurm_advisor.daemon.allocation import SCONTROL, from_node_list, parse_job
from slurm_advisor.daemon.jobcomp import JobCompFile
from slurm_advisor.daemon.queue import AdvisedJob, Listing, QueueError
from slurm_advisor.store import Store

# `scontrol show job -d -o` on the 22.05 testbed for `sbatch -n 8 -c 2 -N 4 -w n[1-4]`: 3,3,1,1
LINE = ("JobId=41 JobName=wrap UserId=root(0) GroupId=root(0) JobState=RUNNING Reason=None NodeList=n[1-4] "
        "BatchHost=n1 NumNodes=4 NumCPUs=16 NumTasks=8 CPUs/Task=2 ReqB:S:C:T=0:0:*:* "
        "TRES=cpu=16,mem=16000M,node=4,billing=16 Socks/Node=* NtasksPerN:B:S:C=0:0:*:* CoreSpec=* "
        "JOB_GRES=(null)   Nodes=n[1-2] CPU_IDs=0-5 Mem=6000 GRES=   Nodes=n[3-4] CPU_IDs=0-1 Mem=2000 GRES= "
        "MinCPUsNode=2 Comment=slurm-advisor:_type=resnet50 AdminComment=slurm-advisor:d-000000000041:observed")


def test_the_counts_are_the_cpus_of_each_node_over_the_cpus_per_task():
    assert parse_job(LINE) == (("n1", "n2", "n3", "n4"), (3, 3, 1, 1))
    # CPUs that do not lay out the job's tasks (a whole node given, say) are not guessed at
    assert parse_job(LINE.replace("NumTasks=8", "NumTasks=20")) is None
    assert parse_job(LINE.replace("CPUs/Task=2", "CPUs/Task=1")) is None  # 6,2,0,0: a node with no task
    assert parse_job("JobId=42 JobState=PENDING NumTasks=4 CPUs/Task=1") is None  # no allocation yet


def test_a_name_or_comment_that_looks_like_an_allocation_is_not_read_as_one():
    """A user's text in the line must neither raise in the refresher nor pass for Slurm's counts."""
    forged = LINE.replace("MinCPUsNode=2", "MinCPUsNode=2 JobName=x Nodes=n1 CPU_IDs=0-99 Mem=1")
    assert parse_job(forged) is None  # n1 twice: not Slurm's alone
    for junk in ("zz", "5-", "-3", "7-2", "0-5x"):
        assert parse_job(LINE.replace("CPU_IDs=0-1", f"CPU_IDs={junk}")) is None


def test_the_node_list_alone_fixes_one_node_and_one_task_per_node():
    assert from_node_list(("n2",), 5) == (5,) and from_node_list(("n1", "n3"), 2) == (1, 1)
    assert from_node_list(("n1", "n3"), 5) == () and from_node_list((), 3) == ()


class AllocatingQueue:
    """Slurm's queue with one advised job on n1 and n3 (4 tasks); counts how often it is asked."""

    def __init__(self):
        self.state, self.asked = "RUNNING", []

    def read(self):
        job = AdvisedJob("41", "d-000000000041", self.state, 1.0, "", True, 4, 0, 2.0,
                         3.0 if self.state == "COMPLETED" else 0.0, ("n1", "n3"), "slurm-advisor:d-000000000041")
        return Listing([job], {"41": 0}, from_slurm=False)

    def allocation(self, job_id):
        self.asked.append(job_id)
        if len(self.asked) == 1:
            raise QueueError("scontrol show: exit 1: timed out")
        return ("n1", "n3"), (3, 1)


def test_the_daemon_reads_the_counts_once_and_keeps_them_when_the_job_ends(tmp_path):
    queue = AllocatingQueue()
    daemon = make_daemon(tmp_path, queue=queue)
    daemon.start()
    try:
        refreshed(daemon)  # the first read fails: no counts yet, the job is read again at its next change
        queue.state = "COMPLETING"
        refreshed(daemon)
        refreshed(daemon)  # unchanged: not read again
        queue.state = "COMPLETED"
        refreshed(daemon)
    finally:
        daemon.stop()
    assert queue.asked == ["41", "41"]
    with Store.open(str(tmp_path / "advisor.db"), create=False) as store:
        outcome = store.outcome("41")
    assert (outcome.state, outcome.nodes, outcome.tasks, outcome.tasks_from) == (
        "COMPLETED", ("n1", "n3"), (3, 1), SCONTROL)


def test_a_job_completion_record_gets_the_counts_read_while_the_job_ran(tmp_path):
    line = ("JobId=41 UserId=root(0) GroupId=root(0) Name=wrap JobState=COMPLETED Partition=batch "
            "TimeLimit=UNLIMITED StartTime=2026-12-01T14:38:20 EndTime=2026-12-01T14:38:50 NodeList=n[1,3] "
            "NodeCnt=2 ProcCnt=4 WorkDir=/tmp ReservationName= SubmitTime=2026-12-01T14:38:19 EligibleTime=unknown\n")
    (tmp_path / "jobcomp.txt").write_text("")
    queue = AllocatingQueue()
    queue.asked.append("an earlier read")  # the next read succeeds
    daemon = make_daemon(tmp_path, queue=queue)
    daemon.jobcomp = JobCompFile(tmp_path / "jobcomp.txt")
    daemon.start()
    try:
        refreshed(daemon)  # running: counts read
        queue.read = lambda: Listing([], {}, from_slurm=False)  # gone from squeue; the file has its end
        with (tmp_path / "jobcomp.txt").open("a") as f:
            f.write(line)
        refreshed(daemon)
    finally:
        daemon.stop()
    with Store.open(str(tmp_path / "advisor.db"), create=False) as store:
        outcome = store.outcome("41")
    assert (outcome.state, outcome.tasks, outcome.tasks_from) == ("COMPLETED", (3, 1), SCONTROL)
