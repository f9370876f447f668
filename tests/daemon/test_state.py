"""The background refresh: snapshot published, claims settled, stale pins released."""
from __future__ import annotations

import time

from daemon_helpers import NODES, StaticSource

from slurm_advisor.daemon.claims import Claims
from slurm_advisor.daemon.queue import AdvisedJob, Listing, QueueError
from slurm_advisor.daemon.state import DaemonState, Refresher
from slurm_advisor.domain import ClusterSnapshot, Job, Placement, Resources

JOB = Job("d-0123456789ab", "resnet50", 0, 2, Resources(1, 1, 1000), Resources(1, 1, 1000), 1.0)


class FakeQueue:
    def __init__(self, jobs, fail=False):
        self.jobs, self.fail, self.released = jobs, fail, []

    def advised(self):
        return self.jobs

    def read(self):
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
