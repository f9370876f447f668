"""The background refresh: snapshot published, claims settled, stale pins released."""
from __future__ import annotations

import logging
import time
from dataclasses import replace
from datetime import UTC, datetime

from daemon_helpers import NODES, StaticSource, marked

from slurm_advisor.daemon.claims import UNSEEN_READS, Claims
from slurm_advisor.daemon.pins import Pin, pin_of
from slurm_advisor.daemon.queue import AdvisedJob, Listing, QueueError
from slurm_advisor.daemon.service import job_from_request
from slurm_advisor.daemon.state import DaemonState, Refresher
from slurm_advisor.domain import ClusterSnapshot, Job, Placement, Resources
from slurm_advisor.domain.decision import Decision

JOB = Job("d-0123456789ab", "resnet50", 0, 2, Resources(1, 1, 1000), Resources(1, 1, 1000), 1.0)


class FakeQueue:
    """squeue and scontrol: lists ``jobs``; ``then``, when set, is what the next read gives instead
    (a listing, or an error to raise), once."""

    def __init__(self, jobs, fail=False):
        self.jobs, self.fail, self.released = jobs, fail, []
        self.reads, self.then = 0, None

    def advised(self):
        return self.jobs

    def read(self):
        self.reads += 1
        if self.reads > 1 and self.then is not None:
            then, self.then = self.then, None
            if isinstance(then, Exception):
                raise then
            self.jobs = then
        return Listing(self.advised(), {})

    def release(self, job, min_nodes, max_nodes):
        if self.fail:
            raise QueueError("scontrol: exit 1")
        self.released.append((job.job_id, min_nodes, max_nodes))


def advised(state, submit, decision="d-0123456789ab", job_id="7"):
    return AdvisedJob(job_id, decision, state, submit, "n1", False, 2)


def setup(jobs, **kw):
    empty = ClusterSnapshot.empty(NODES)
    state = DaemonState("advise", Claims(ttl_s=60))
    state.claims.add(JOB.id, empty, JOB, Placement.of(JOB, ["n1", "n1"]), time.monotonic())
    queue = FakeQueue(jobs, **kw)
    return state, queue, Refresher(state, StaticSource(empty), queue, period_s=1, pin_bound_s=30,
                                   node_counts=lambda d: (1, 2))


def test_a_started_job_ends_its_claim():
    state, _, refresher = setup([advised("RUNNING", time.time())])
    assert state.snapshot() is None
    refresher.refresh_once()
    assert len(state.claims) == 0 and state.snapshot().free["n1"].gpus == 4


def test_a_pending_job_keeps_its_claim_until_the_bound():
    state, queue, refresher = setup([advised("PENDING", time.time() - 5)])
    refresher.refresh_once()
    assert len(state.claims) == 1 and state.snapshot().free["n1"].gpus == 2 and queue.released == []


def test_a_job_pinned_too_long_is_released_with_the_users_counts():
    state, queue, refresher = setup([advised("PENDING", time.time() - 31), advised("RUNNING", 0, job_id="8")])
    refresher.refresh_once()
    assert queue.released == [("7", 1, 2)] and state.counters.released == 1


def test_a_failed_release_is_logged_and_retried_next_time(caplog):
    state, _, refresher = setup([advised("PENDING", time.time() - 31)], fail=True)
    refresher.refresh_once()
    assert state.counters.released == 0 and "could not unpin job 7" in caplog.text


def test_a_failed_refresh_keeps_the_last_snapshot(caplog):
    state, queue, refresher = setup([])
    refresher.refresh_once()
    first = state.snapshot()

    def broken():
        raise QueueError("squeue: timed out")
    queue.advised = broken
    refresher.refresh_once()
    assert state.snapshot() == first and state.counters.refresh_failures == 1 and "timed out" in caplog.text


class Warmed:
    """A policy that keeps caches for the cluster state: records each warm-up it is given."""

    name = "warmed"

    def __init__(self):
        self.warmed = []

    def place(self, snapshot, job, rng=None):
        return None

    def score_nodes(self, snapshot, job):
        return {}

    def warm(self, snapshot):
        self.warmed.append(snapshot)


def test_each_refresh_warms_the_policy_on_the_new_snapshot_outside_any_request(tmp_path):
    from daemon_helpers import make_daemon

    policy = Warmed()
    first = ClusterSnapshot.empty(NODES)
    source = StaticSource(first)
    daemon = make_daemon(tmp_path, policy=policy, source=source, store=False)
    daemon.refresher.refresh_once()
    running = first.with_job(JOB, Placement.of(JOB, ["n1", "n2"]))
    source.current = running
    daemon.refresher.refresh_once()
    assert policy.warmed == [first, running]  # Slurm's snapshot: its running jobs are every request's


# -- a pin whose nodes were taken is released at once, not after pin_bound_s -------------------------
PINNED = Job("d-0123456789ab", "resnet50", 0, 2, Resources(4, 2, 1000), Resources(4, 2, 1000), 1.0)


def pinned_setup(jobs, pin=None):
    """A job pinned to n1 (both tasks: 8 CPUs, 4 GPUs, 2000 MB there) and a refresher that knows it."""
    source = StaticSource(ClusterSnapshot.empty(NODES))
    state = DaemonState("advise", Claims(ttl_s=60))
    queue = FakeQueue(jobs)
    pin = pin or Pin(PINNED, placement=Placement.of(PINNED, ["n1", "n1"]))
    refresher = Refresher(state, source, queue, period_s=1, pin_bound_s=300, node_counts=lambda d: (1, 2),
                          pin_of=lambda d: pin if d == PINNED.id else None)
    return source, queue, refresher


def taken(*nodes, cpus=1):
    """The empty cluster with ``cpus`` CPUs of each of ``nodes`` taken by a job the advisor did not place."""
    empty = ClusterSnapshot.empty(NODES)
    free = empty.free_array().copy()
    for node in nodes:
        free[empty.index(node), 0] -= cpus
    return empty.with_free(free)


def test_a_pin_whose_nodes_were_taken_is_released_at_the_first_refresh_that_sees_it():
    source, queue, refresher = pinned_setup([advised("PENDING", time.time())])
    refresher.refresh_once()
    refresher.refresh_once()
    assert queue.released == [] and queue.reads == 2  # n1 free: Slurm simply has not started it yet
    source.current = taken("n1")  # one CPU of n1 taken: the pin needs all 8
    refresher.refresh_once()
    assert queue.released == [("7", 1, 2)] and queue.reads == 4  # read again before releasing
    counters = refresher.state.counters
    assert (counters.released, counters.released_taken) == (1, 1)


def test_a_pin_that_fits_is_kept_however_long_slurm_takes():
    source, queue, refresher = pinned_setup([advised("PENDING", time.time() - 200)])
    source.current = taken("n2", "n3", "n4", cpus=8)  # every other node full: n1 is still the pin's
    for _ in range(5):
        refresher.refresh_once()
    assert queue.released == [] and refresher.state.counters.released == 0 and queue.reads == 5


def test_a_job_that_started_between_the_queue_read_and_the_cluster_read_is_not_released():
    # squeue said PENDING, but by sinfo's read the job runs on n1: its own allocation fills n1.
    # The second read, after sinfo's, shows it started.
    source, queue, refresher = pinned_setup([advised("PENDING", time.time())])
    source.current = taken("n1", cpus=8)
    queue.then = [advised("RUNNING", time.time())]
    refresher.refresh_once()
    assert queue.released == [] and queue.reads == 2
    refresher.refresh_once()
    assert queue.released == []


def test_a_failed_second_read_releases_nothing_this_time(caplog):
    source, queue, refresher = pinned_setup([advised("PENDING", time.time())])
    source.current = taken("n1")
    queue.then = QueueError("squeue: timed out")
    refresher.refresh_once()
    assert queue.released == [] and "cannot read the queue again" in caplog.text
    queue.then = None
    refresher.refresh_once()
    assert queue.released == [("7", 1, 2)]


def test_an_exact_pin_is_never_released_and_said_so_once(caplog):
    # Slurm refuses to change the nodes of a -m arbitrary job (24.11: "Requested operation not supported")
    caplog.set_level(logging.INFO)
    exact = Pin(PINNED, placement=Placement.of(PINNED, ["n1", "n1"]), exact=True)
    source, queue, refresher = pinned_setup([advised("PENDING", time.time() - 301)], pin=exact)
    source.current = taken("n1")  # stuck as well as past the bound
    for _ in range(3):
        refresher.refresh_once()
    assert queue.released == [] and refresher.state.counters.released == 0
    assert queue.reads == 3  # no second read for a pin that is not released anyway
    assert caplog.text.count("stays pinned: Slurm does not change the nodes of a -m arbitrary job") == 1


def test_a_decision_for_an_arbitrary_job_reads_as_an_exact_pin():
    fields = marked(workers=2, gpus=0, arbitrary=True)
    decision = Decision("d-0123456789ab", datetime.now(UTC), "advise", "place", "random", None, "resnet50", 1000,
                        fields, layout=(("worker", "n1"), ("worker", "n3")))
    assert pin_of(decision, job_from_request).exact
    assert not pin_of(replace(decision, request={**fields, "arbitrary": None}), job_from_request).exact


def test_the_bound_still_releases_a_pin_the_refresher_knows_nothing_about():
    _, queue, refresher = pinned_setup([advised("PENDING", time.time() - 301, decision="d-00000000000f")])
    refresher.refresh_once()
    counters = refresher.state.counters
    assert queue.released == [("7", 1, 2)] and (counters.released, counters.released_taken) == (1, 0)


def test_a_pin_that_cannot_be_read_keeps_the_bound(caplog):
    source, queue, refresher = pinned_setup([advised("PENDING", time.time())])

    def broken(decision):
        raise RuntimeError("store gone")
    refresher.pin_of = broken
    source.current = taken("n1")
    refresher.refresh_once()
    assert queue.released == [] and "cannot tell what the pin of job 7 needs" in caplog.text


# -- claims of jobs Slurm never listed ---------------------------------------------------------------
def test_a_claim_whose_job_slurm_never_lists_is_dropped_and_counted(monkeypatch):
    clock = [1000.0]
    monkeypatch.setattr(time, "monotonic", lambda: clock[0])
    state, _, refresher = setup([])  # its claim made at 1000, no job in the queue
    for _ in range(UNSEEN_READS):
        clock[0] += 1.0
        assert len(state.claims) == 1
        refresher.refresh_once()
    assert len(state.claims) == 0 and state.counters.claims_unseen_dropped == 1


def test_a_listed_job_keeps_its_claim_and_a_queue_that_lists_nothing_drops_none(monkeypatch):
    clock = [1000.0]
    monkeypatch.setattr(time, "monotonic", lambda: clock[0])
    state, _, refresher = setup([advised("PENDING", time.time())])
    nothing, _, blind = setup([])
    blind.queue.read = lambda: Listing([], {}, from_slurm=False)  # the simulated source's NoQueue
    for _ in range(2 * UNSEEN_READS):
        clock[0] += 1.0
        refresher.refresh_once()
        blind.refresh_once()
    assert len(state.claims) == 1 and len(nothing.claims) == 1
    assert state.counters.claims_unseen_dropped == nothing.counters.claims_unseen_dropped == 0


def test_the_daemon_releases_its_own_pin_once_its_nodes_are_taken(tmp_path):
    from daemon_helpers import Fixed, make_daemon, marked

    source = StaticSource(ClusterSnapshot.empty(NODES))
    queue = FakeQueue([])
    daemon = make_daemon(tmp_path, policy=Fixed("n1", "n2"), source=source, queue=queue, store=False)
    daemon.refresher.refresh_once()
    reply = daemon.advise(marked(workers=2, gpus=2))
    assert reply["action"] == "place"
    queue.jobs = [AdvisedJob("7", reply["decision"], "PENDING", time.time(), "n[1-2]", False, 2)]
    daemon.refresher.refresh_once()
    assert queue.released == []
    source.current = taken("n2", cpus=8)  # a job the advisor did not place took n2
    daemon.refresher.refresh_once()
    assert queue.released == [("7", None, None)]  # the user gave no node counts
    status = daemon.status()
    assert (status["released"], status["released_taken"]) == (1, 1)
