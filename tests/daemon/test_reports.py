"""Speed reports over the real socket: who may report, absurd values, many reporters, the samples
they give; and the outcomes the refresh records for advised jobs."""
from __future__ import annotations

import json
import os
import shutil
import tempfile
import threading
import time
from dataclasses import replace
from pathlib import Path

import pytest
from daemon_helpers import (
    NODES,
    Fixed,
    StaticSource,
    exchange_as_nobody,
    make_daemon,
    marked,
    raw_exchange,
    refreshed,
)

from slurm_advisor.daemon.client import Client, call
from slurm_advisor.daemon.protocol import ProtocolError
from slurm_advisor.daemon.queue import AdvisedJob, Listing
from slurm_advisor.daemon.server import AdvisorServer, ServerThread
from slurm_advisor.daemon.service import job_from_request
from slurm_advisor.domain import ClusterSnapshot, Job, Placement, Resources
from slurm_advisor.policies.spread import SpreadPolicy
from slurm_advisor.store import Store


class ListedQueue:
    """squeue as the refresher reads it: owners of started jobs and the advised jobs, set by the test."""

    def __init__(self, owners=None, advised=()):
        self.owners, self.advised_jobs = dict(owners or {}), list(advised)

    def read(self):
        return Listing(list(self.advised_jobs), dict(self.owners))

    def release(self, job, min_nodes, max_nodes):
        raise AssertionError("nothing to release here")


def _serve(daemon):
    daemon.start()
    return ServerThread(AdvisorServer(daemon.config.socket, daemon.dispatcher(), 2.0))


@pytest.fixture
def reporting(tmp_path):
    queue = ListedQueue({"101": 1000, "102": 0})
    daemon = make_daemon(tmp_path, queue=queue)
    with _serve(daemon):
        yield daemon, queue
    daemon.stop()


def test_root_may_report_for_any_listed_job_and_it_is_stored(reporting):
    daemon, _ = reporting
    path = daemon.config.socket
    assert call(path, "report", job_id="101", iterations=500, seconds=10.0) == {"v": 1, "ok": True}
    assert call(path, "report", job_id=102, iterations=3, seconds=0.5)["ok"] is True  # an int id is fine
    unknown = call(path, "report", job_id="999", iterations=1, seconds=1)
    assert not unknown["ok"] and "job 999 is not running" in unknown["error"] and "retry later" in unknown["error"]
    status = call(path, "status")
    assert (status["reports"], status["reports_refused"]) == (3, 1)
    daemon.stop()
    with Store.open(daemon.config.db, create=False) as store:
        reports = store.load_reports()
        assert [(r.job_id, r.uid, r.speed) for r in reports] == [("101", os.geteuid(), 50.0), ("102", os.geteuid(), 6.0)]
        assert store.count_reports(sampled=True) == 0  # no decision, no marked job in the snapshot: raw only
        assert abs(reports[0].window_end - reports[0].window_start - 10.0) < 1e-9


@pytest.mark.parametrize(("fields", "message"), [
    ({"iterations": -5, "seconds": 1}, "iterations must be a finite number > 0"),
    ({"iterations": 0, "seconds": 1}, "iterations must be"),
    ({"iterations": 5, "seconds": 0}, "seconds must be"),
    ({"iterations": "5", "seconds": 1}, "iterations must be"),
    ({"iterations": True, "seconds": 1}, "iterations must be"),
    ({"iterations": 1e12, "seconds": 1}, "above 1e+06"),
    ({"iterations": 5, "seconds": 1e-300}, "above 1e+06"),
    # stored as speed 0.0, three such samples stopped every later retrain (issue 39, Why 6)
    ({"iterations": 1e-300, "seconds": 1e300}, "below 1e-06 (plausible: 1e-06 to 1e+06 it/s)"),
    ({"iterations": 1e-3, "seconds": 1e4}, "below 1e-06"),
    ({"iterations": 5}, "seconds must be"),
    ({"job_id": "12; rm -rf /", "iterations": 5, "seconds": 1}, "job_id must be Slurm's numeric job id"),
])
def test_absurd_reports_are_refused_naming_the_field(reporting, fields, message):
    daemon, _ = reporting
    reply = call(daemon.config.socket, "report", **{"job_id": "101", **fields})
    assert reply["ok"] is False and message in reply["error"], reply


@pytest.mark.parametrize("number", [b"NaN", b"Infinity", b"1e400"])
def test_non_finite_numbers_are_refused(reporting, number):
    daemon, _ = reporting
    line = b'{"v": 1, "op": "report", "job_id": "101", "iterations": ' + number + b', "seconds": 1}\n'
    reply = json.loads(raw_exchange(daemon.config.socket, line))
    assert reply["ok"] is False and any(why in reply["error"] for why in
                                        ("not a number", "iterations must be", "beyond a float's range"))


@pytest.mark.parametrize(("number", "words"), [(b"7" * 4000, b"at most 20 digits"),
                                               (b"7" * 4000 + b".5", b"beyond a float's range")])
def test_a_4000_digit_report_value_is_a_one_line_error_and_no_traceback(reporting, caplog, number, words):
    daemon, _ = reporting
    line = b'{"v": 1, "op": "report", "job_id": "101", "iterations": ' + number + b', "seconds": 1}\n'
    with caplog.at_level("DEBUG", logger="slurm_advisor"):
        reply = raw_exchange(daemon.config.socket, line)
    assert reply.count(b"\n") == 1 and json.loads(reply)["ok"] is False and words in reply
    assert call(daemon.config.socket, "health")["ok"] is True
    assert not any(r.exc_info for r in caplog.records), [r.getMessage() for r in caplog.records]


def test_once_a_type_has_20_speeds_a_report_100x_off_their_median_is_refused(tmp_path):
    """Per worker: job 101 (2 workers) and job 102 (8 workers) of one type compare."""
    small = Job("101", "resnet50", 0, 2, Resources(1, 1, 1000), Resources(1, 1, 1000), 1.0)
    large = Job("102", "resnet50", 0, 8, Resources(1, 0, 1000), Resources(1, 0, 1000), 1.0)
    snapshot = ClusterSnapshot.empty(NODES).with_job(small, Placement.of(small, ["n1", "n2"]))
    snapshot = snapshot.with_job(large, Placement.of(large, ["n3"] * 4 + ["n4"] * 4))
    daemon = make_daemon(tmp_path, queue=ListedQueue({"101": 0, "102": 0}), source=StaticSource(snapshot))
    daemon.start()
    try:
        assert daemon.state.job("102")[0] is not None  # start() refreshed once: the owners are listed
        for _ in range(18):  # 5 it/s per worker; fewer than 20 known: only the absolute range holds
            assert daemon.report({"job_id": "101", "iterations": 100, "seconds": 10.0}, 0) == {"ok": True}
        assert daemon.report({"job_id": "102", "iterations": 5e4, "seconds": 1.0}, 0) == {"ok": True}  # 6250/worker
        assert daemon.report({"job_id": "102", "iterations": 40, "seconds": 1.0}, 0) == {"ok": True}  # the 20th
        with pytest.raises(ProtocolError, match=r"more than 100x from the median 5 of the 20 known resnet50 "
                                                r"speeds \(plausible: 0.05 to 500 it/s per worker\)"):
            daemon.report({"job_id": "101", "iterations": 2000, "seconds": 1.0}, 0)  # 1000/worker
        with pytest.raises(ProtocolError, match="more than 100x"):
            daemon.report({"job_id": "102", "iterations": 0.01, "seconds": 1.0}, 0)
        assert daemon.report({"job_id": "102", "iterations": 400, "seconds": 1.0}, 0) == {"ok": True}  # 50/worker
        assert daemon.state.counters.reports_refused == 2
    finally:
        daemon.stop()


def test_a_restarted_daemon_judges_reports_by_the_stored_speeds(tmp_path):
    """The known speeds come from the store's newest live samples at start, not only from the
    reports taken since."""
    from slurm_advisor.domain import RunningJob, SpeedSample
    job = Job("101", "resnet50", 0, 2, Resources(1, 1, 1000), Resources(1, 1, 1000), 1.0)
    placement = Placement.of(job, ["n1", "n2"])
    stored = [SpeedSample(float(i), RunningJob(job, placement, 0.0), (), (), 10.0, source="live") for i in range(20)]
    with Store.open(str(tmp_path / "advisor.db")) as store:
        store.record_samples(stored + [replace(stored[0], speed=0.0)])  # an unusable one is not known
    snapshot = ClusterSnapshot.empty(NODES).with_job(job, placement)
    daemon = make_daemon(tmp_path, queue=ListedQueue({"101": 0}), source=StaticSource(snapshot))
    daemon.start()
    try:
        assert daemon.type_speeds.known("resnet50") == 20
        assert daemon.state.job("101")[0] is not None  # start() refreshed once: the owners are listed
        with pytest.raises(ProtocolError, match=r"from the median 5 of the 20 known resnet50 speeds"):
            daemon.report({"job_id": "101", "iterations": 2000, "seconds": 1.0}, 0)
    finally:
        daemon.stop()


def _report_as_nobody(path, job_id: str) -> dict:
    line = json.dumps({"v": 1, "op": "report", "job_id": job_id, "iterations": 10, "seconds": 1})
    return exchange_as_nobody(path, line.encode() + b"\n")


@pytest.mark.skipif(os.geteuid() != 0, reason="switching to another uid needs root")
def test_a_user_cannot_report_for_another_users_job():
    public = Path(tempfile.mkdtemp(prefix="advisor-report-", dir="/tmp"))
    os.chmod(public, 0o755)
    daemon = make_daemon(public, queue=ListedQueue({"101": 1000, "103": 65534}))
    try:
        with _serve(daemon):
            refused = _report_as_nobody(daemon.config.socket, "101")
            assert refused["ok"] is False and "uid 65534 is neither root nor the owner of job 101" in refused["error"]
            assert _report_as_nobody(daemon.config.socket, "103") == {"v": 1, "ok": True}  # its own job
        daemon.stop()
        with Store.open(daemon.config.db, create=False) as store:
            assert [(r.job_id, r.uid) for r in store.load_reports()] == [("103", 65534)]
    finally:
        daemon.stop()
        shutil.rmtree(public, ignore_errors=True)


@pytest.mark.slow
def test_100_concurrent_reporters_of_1000_reports_each_lose_nothing(tmp_path):
    owners = {str(1000 + i): 0 for i in range(100)}
    daemon = make_daemon(tmp_path, queue=ListedQueue(owners))
    failures = []

    def reporter(job_id):
        with Client(daemon.config.socket, timeout_s=30) as client:
            for i in range(1000):
                reply = client.call("report", job_id=job_id, iterations=i + 1, seconds=0.5)
                if not reply["ok"]:
                    failures.append(reply)

    with _serve(daemon):
        threads = [threading.Thread(target=reporter, args=(job_id,)) for job_id in owners]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    daemon.stop()
    assert failures == []
    with Store.open(daemon.config.db, create=False) as store:
        assert store.count_reports() == 100_000
        assert sorted(r.iterations for r in store.load_reports(job_id="1042")) == [float(i + 1) for i in range(1000)]
    assert daemon.reports.written == 100_000 and daemon.reports.dropped == 0


def _neighbour() -> tuple[Job, Placement]:
    job = Job("77", "vgg16", 0, 2, Resources(1, 1, 1000), Resources(1, 1, 1000), 1.0)
    return job, Placement.of(job, ["n1", "n2"])


def test_an_advised_job_reports_a_live_sample_with_its_layout_and_neighbours(tmp_path):
    neighbour, where = _neighbour()
    source = StaticSource(ClusterSnapshot.empty(NODES).with_job(neighbour, where))
    queue = ListedQueue()
    # pinned to n1, n1, n2 (Slurm's own choice would be n1 alone, where 3 GPUs are free)
    daemon = make_daemon(tmp_path, queue=queue, source=source, policy=Fixed("n1", "n1", "n2"))
    with _serve(daemon):
        advice = call(daemon.config.socket, "advise", job=marked(ps=1, workers=2))
        assert advice["action"] == "place" and advice["layout"] == "ps=n1;worker=n1,n2"
        queue.owners["501"] = 1000
        queue.advised_jobs.append(AdvisedJob("501", advice["decision"], "RUNNING", time.time() - 5, "n1,n2", False,
                                             3, 1000, time.time() - 4, 0.0, ("n1", "n2")))
        refreshed(daemon)  # the daemon reads the queue with the job in it
        assert call(daemon.config.socket, "report", job_id="501", iterations=40, seconds=2.0)["ok"] is True
    daemon.stop()
    with Store.open(daemon.config.db, create=False) as store:
        (sample,) = store.load_samples(source="live")
        (report,) = store.load_reports()
    assert report.decision_id == advice["decision"] and sample.speed == 20.0 and sample.source == "live"
    assert sample.subject.job.id == "501" and sample.subject.job.type == "resnet50"
    assert [(t.role.value, t.node) for t in sample.subject.placement.tasks] == [("ps", "n1"), ("worker", "n1"),
                                                                                 ("worker", "n2")]
    assert [n.job.id for n in sample.neighbours] == ["77"] and [n.name for n in sample.nodes] == ["n1", "n2"]


def test_the_refresh_records_each_advised_jobs_outcome(tmp_path):
    queue = ListedQueue()
    daemon = make_daemon(tmp_path, queue=queue)
    submit = time.time()  # pending for less than the pin bound: not released
    job = AdvisedJob("601", "d-000000000abc", "PENDING", submit, "n2", False, 2, 1000)
    with _serve(daemon):
        queue.advised_jobs = [job]
        refreshed(daemon)
        queue.advised_jobs = [AdvisedJob("601", job.decision, "RUNNING", submit, "n2", False, 2, 1000, 1010.0,
                                         0.0, ("n2",))]
        refreshed(daemon)
        queue.advised_jobs = [AdvisedJob("601", job.decision, "COMPLETED", submit, "n2", False, 2, 1000, 1010.0,
                                         1100.0, ("n2",))]
        refreshed(daemon)
    daemon.stop()
    assert daemon.outcomes.written == 3  # one write per change of state, not one per refresh
    with Store.open(daemon.config.db, create=False) as store:
        outcome = store.outcome("601")
    assert (outcome.state, outcome.decision_id, outcome.submit_time, outcome.start_time, outcome.end_time,
            outcome.nodes) == ("COMPLETED", "d-000000000abc", submit, 1010.0, 1100.0, ("n2",))


def test_a_writer_keeps_the_item_that_arrives_when_a_batch_is_full():
    from slurm_advisor.daemon.writer import BatchWriter
    written = []
    writer = BatchWriter(lambda batch: written.extend(batch) or len(batch), what="thing")
    for i in range(1201):  # two full batches of 500 and a rest, queued before the thread starts
        writer.put(i)
    writer.start()
    writer.stop()
    assert written == list(range(1201)) and writer.written == 1201


def test_a_writer_gathers_a_trickle_into_one_commit():
    # at a hundred submissions a second, one transaction per decision was most of the daemon's
    # cost per submission; items arriving within the gathering window share one write
    from slurm_advisor.daemon.writer import BatchWriter
    batches, written = [], threading.Event()

    def write(batch):
        batches.append(list(batch))
        written.set()
        return len(batch)

    writer = BatchWriter(write, what="thing", gather_s=1.0)
    writer.start()
    for i in range(5):
        writer.put(i)
    assert written.wait(10)  # the window closed and its items went out together
    writer.put(5)  # after the window closed: a batch of its own
    writer.stop()
    assert batches == [[0, 1, 2, 3, 4], [5]]


def test_a_job_advised_before_a_restart_still_gets_its_layout(tmp_path):
    first = make_daemon(tmp_path, policy=SpreadPolicy())  # n1, n2 (Slurm: n1 x 2): pinned
    with _serve(first):
        advice = call(first.config.socket, "advise", job=marked(workers=2))
    first.stop()
    queue = ListedQueue({"700": 1000}, [AdvisedJob("700", advice["decision"], "RUNNING", time.time(), "n1,n2",
                                                   False, 2, 1000, time.time(), 0.0, ("n1", "n2"))])
    again = make_daemon(tmp_path, queue=queue)  # the same database: the decision is in its log
    with _serve(again):
        for _ in range(3):
            assert call(again.config.socket, "report", job_id="700", iterations=10, seconds=1.0)["ok"] is True
    again.stop()
    with Store.open(again.config.db, create=False) as store:
        samples = store.load_samples(source="live")
    assert len(samples) == 3 and {tuple(t.node for t in s.subject.placement.tasks) for s in samples} == {("n1", "n2")}


def test_a_job_left_to_slurm_reports_under_its_decision_from_slurms_view(tmp_path):
    # Slurm's own choice: not pinned, only stamped, so the queue lists it (":observed") and the
    # report links to the decision; the sample takes the job where the snapshot shows it.
    queue = ListedQueue()
    source = StaticSource(ClusterSnapshot.empty(NODES))
    daemon = make_daemon(tmp_path, queue=queue, source=source)
    with _serve(daemon):
        advice = call(daemon.config.socket, "advise", job=marked(workers=2))
        assert advice["action"] == "observe" and daemon.status()["claims"] == 1
        job = job_from_request(marked(workers=2), "502")
        source.current = ClusterSnapshot.empty(NODES).with_job(job, Placement.of(job, ["n1", "n1"]))
        queue.owners["502"] = 1000
        queue.advised_jobs.append(AdvisedJob("502", advice["decision"], "RUNNING", time.time() - 5, "", True, 2,
                                             1000, time.time() - 4, 0.0, ("n1",)))
        refreshed(daemon)  # the claim ends as the job shows up running
        assert daemon.status()["claims"] == 0
        assert call(daemon.config.socket, "report", job_id="502", iterations=40, seconds=2.0)["ok"] is True
    daemon.stop()
    with Store.open(daemon.config.db, create=False) as store:
        (sample,) = store.load_samples(source="live")
        (report,) = store.load_reports()
        outcome = store.outcome("502")
    assert report.decision_id == outcome.decision_id == advice["decision"]
    assert [t.node for t in sample.subject.placement.tasks] == ["n1", "n1"] and sample.subject.job.type == "resnet50"


def test_a_spool_that_cannot_be_written_costs_no_reply_and_no_record(tmp_path):
    (tmp_path / "a-file").write_text("")  # the spool directory would have to be under a file
    daemon = make_daemon(tmp_path, queue=ListedQueue({"101": 0}), spool_dir=tmp_path / "a-file" / "spool")
    with _serve(daemon):
        sock = daemon.config.socket
        assert call(sock, "advise", job=marked())["decision"]
        assert call(sock, "report", job_id="101", iterations=5, seconds=1.0)["ok"] is True
        status = call(sock, "status")
    daemon.stop()
    assert (status["decisions_spool_failed"], status["reports_spool_failed"]) == (1, 1)
    with Store.open(str(tmp_path / "advisor.db"), create=False) as store:  # written from memory, as before
        assert (store.count_decisions(), store.count_reports()) == (1, 1)
