"""Reading the advised jobs from the compact squeue listing and unpinning them."""
from __future__ import annotations

import pytest

from slurm_advisor.daemon.queue import AdvisedJob, QueueError, SlurmQueue


class Recorder(SlurmQueue):
    def __init__(self):
        super().__init__()
        self.calls = []

    def _run(self, args):
        self.calls.append(args)
        return ""


def test_release_restores_the_users_node_counts():
    queue, job = Recorder(), AdvisedJob("7", "d-0123456789ab", "PENDING", 0.0, "n1", False, 12)
    queue.release(job, None, None)
    queue.release(job, 2, 3)
    assert queue.calls[0] == ["scontrol", "update", "JobId=7", "ReqNodeList=", "NumNodes=1-12",
                              "AdminComment=slurm-advisor:d-0123456789ab:released"]
    assert queue.calls[1][4] == "NumNodes=2-3"


LISTING = (  # recorded on 22.05, as SQUEUE prints it
    "1647|0|COMPLETED|2026-12-01T14:18:18|2026-12-01T14:18:19|2026-12-01T14:18:29|4|n[2-3]|n[2-3]|(null)\n"
    "1859|1000|PENDING|2026-12-01T14:23:19|2026-12-01T15:23:19|2026-12-01T16:23:19|3|n1||slurm-advisor:d-000000000001\n"
    "1860|1000|RUNNING|2026-12-01T14:23:20|2026-12-01T14:23:21|2026-12-01T14:24:21|1||n4|"
    "slurm-advisor:d-000000000002:released\n"
    "1861|1001|COMPLETED|2026-12-01T14:23:20|2026-12-01T14:23:21|2026-12-01T14:23:31|2||n[1-2]|"
    "slurm-advisor:d-000000000003\n")


def test_the_compact_listing_recorded_on_2205():
    from slurm_advisor.daemon.queue import parse_lines
    first, second, third = parse_lines(LISTING)
    assert (first.job_id, first.decision, first.state, first.required_nodes, first.tasks) == \
        ("1859", "d-000000000001", "PENDING", "n1", 3)
    assert first.waiting and second.released and second.started and second.required_nodes == ""
    assert (first.start_time, first.end_time, first.nodes) == (0.0, 0.0, ())  # a pending job's are estimates
    assert second.start_time > 0 and second.end_time == 0.0 and second.nodes == ("n4",)  # running: no end yet
    assert third.end_time - third.start_time == 10.0 and third.nodes == ("n1", "n2") and third.user_id == 1001


def test_the_listing_knows_the_owner_of_every_started_job():
    from slurm_advisor.daemon.queue import parse_listing
    assert parse_listing(LISTING).owners == {"1647": 0, "1860": 1000, "1861": 1001}  # not the pending 1859


def test_a_garbled_listing_is_one_queue_error():
    from slurm_advisor.daemon.queue import parse_lines
    with pytest.raises(QueueError, match="squeue: .*expected 7 fields"):
        parse_lines("1|0|PENDING|slurm-advisor:d-000000000001\n")


def test_a_stamp_after_the_sites_own_admin_comment_is_found_and_the_release_keeps_that_text():
    from slurm_advisor.daemon.queue import parse_lines
    line = ("1862|1000|PENDING|2026-12-01T14:23:19|2026-12-01T15:23:19|2026-12-01T16:23:19|3|n1||"
            "site-ticket=4711 slurm-advisor:d-000000000004\n")
    (job,) = parse_lines(line)
    assert job.decision == "d-000000000004" and job.waiting
    queue = Recorder()
    queue.release(job, None, None)
    assert queue.calls[0][-1] == "AdminComment=site-ticket=4711 slurm-advisor:d-000000000004:released"
