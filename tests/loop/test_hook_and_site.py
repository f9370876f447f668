"""The loop's hook part (jobs as Slurm jobs, the reply back into a placement) and its queue."""
from __future__ import annotations

from itertools import pairwise

import numpy as np

from slurm_advisor.daemon.service import job_from_request
from slurm_advisor.domain import ClusterSnapshot, Job, Node, Placement, Resources
from slurm_advisor.loop.hook import DaemonPolicy, as_submitted, hook_fields, layout_placement
from slurm_advisor.loop.site import LoopQueue
from slurm_advisor.policies.base import Hold

NODES = tuple(Node(f"n{i}", 8, 4, 32000) for i in range(1, 5))
JOB = Job("j7", "resnet50", 1, 3, Resources(2, 0, 3000), Resources(1, 1, 4001), 500.0, submit_time=30.0,
          time_limit_s=3601.0, model_size_mb=98.0, batch_size=64)


def test_a_job_as_submitted_is_what_the_daemon_rebuilds_from_the_hooks_fields() -> None:
    job = as_submitted(JOB, 1042)
    assert job.id == "1042" and job.type == JOB.type and job.iterations == JOB.iterations
    assert job.ps_demand == job.worker_demand == Resources(2, 1, 4002)  # the larger of each, whole MB per CPU
    assert job.time_limit_s == 3660.0
    rebuilt = job_from_request(hook_fields(job, 1000), job.id)
    assert (rebuilt.num_ps, rebuilt.num_workers, rebuilt.worker_demand, rebuilt.ps_demand) == \
        (job.num_ps, job.num_workers, job.worker_demand, job.ps_demand)
    assert rebuilt.model_size_mb == 98.0 and rebuilt.batch_size == 64 and rebuilt.time_limit_s == 3660.0


def test_a_layout_becomes_the_placement_ps_first() -> None:
    job = as_submitted(JOB, 1)
    placement = layout_placement(job, "ps=n2;worker=n1,n1,n3")
    assert [(t.role.value, t.node) for t in placement.tasks] == \
        [("ps", "n2"), ("worker", "n1"), ("worker", "n1"), ("worker", "n3")]


def _policy(reply: dict, started: list):
    asked = []

    def ask(snapshot, fields):
        asked.append(fields)
        return {"ok": True, "decision": "d-000000000001", **reply}

    policy = DaemonPolicy(ask, 1000, on_reply=lambda job, r: None,
                          on_start=lambda job, p, t: started.append((job.id, p.nodes(), t)))
    return policy, asked


def test_the_daemon_is_asked_once_and_its_layout_is_used() -> None:
    job, started = Job("5", "resnet50", 0, 2, Resources(1, 1, 1000), Resources(1, 1, 1000), 10.0), []
    policy, asked = _policy({"action": "place", "layout": "worker=n3,n4"}, started)
    snap = ClusterSnapshot.empty(NODES).at(12.0)
    assert policy.place(snap, job, np.random.default_rng(0)).nodes() == ("n3", "n4")
    policy.place(snap, job, np.random.default_rng(0))
    assert len(asked) == 1 and started[0] == ("5", ("n3", "n4"), 12.0)


def test_none_is_slurms_choice_and_cap_a_bounded_one() -> None:
    job, started = Job("6", "resnet50", 0, 4, Resources(1, 1, 1000), Resources(1, 1, 1000), 10.0), []
    policy, _ = _policy({"action": "none"}, started)
    assert isinstance(policy.place(ClusterSnapshot.empty(NODES), job, np.random.default_rng(0)), Placement)
    assert policy.slurm_chose == 1
    policy, _ = _policy({"action": "cap", "max_nodes": 1}, [])
    busy = ClusterSnapshot.empty(NODES)
    for i, node in enumerate(("n1", "n2", "n3", "n4")):  # one GPU taken on every node: 4 fit on none
        other = Job(f"o{i}", "resnet50", 0, 1, Resources(1, 1, 1000), Resources(1, 1, 1000), 10.0)
        busy = busy.with_job(other, Placement.of(other, [node]))
    held = policy.place(busy, job, np.random.default_rng(0))
    assert isinstance(held, Hold) and held.max_nodes == 1
    assert len(policy.place(ClusterSnapshot.empty(NODES), job, np.random.default_rng(0)).nodes()) == 1


def test_the_queue_lists_owners_of_started_jobs_and_the_advised_ones() -> None:
    queue = LoopQueue(origin=1000.0)
    queue.submit("1", 1000, 5.0, 2, decision="d-000000000001")
    queue.submit("2", 1001, 6.0, 1)  # not advised (the daemon said none)
    assert queue.read().owners == {}
    queue.started("1", 10.0, ["n1"])
    queue.started("2", 11.0, ["n2"])
    queue.ended("1", 20.0, "COMPLETED")
    listing = queue.read()
    assert listing.owners == {"1": 1000, "2": 1001}
    [job] = listing.advised
    assert (job.job_id, job.decision, job.state, job.submit_time, job.start_time, job.end_time, job.nodes) == \
        ("1", "d-000000000001", "COMPLETED", 1005.0, 1010.0, 1020.0, ("n1",))
    queue.release(job, None, None)
    assert queue.released("1") and queue.read().advised[0].released
    queue.clear()
    assert queue.read().advised == []


def test_without_retrain_the_daemon_serves_slurm_default_and_records_only(tmp_path) -> None:
    from slurm_advisor.loop.driver import Loop, LoopSettings
    from slurm_advisor.speedmodels import load_speed_model
    from slurm_advisor.store import Store
    from slurm_advisor.traces.synthetic import synthetic_jobs

    nodes = tuple(Node(f"n{i}", 32, 8, 256000) for i in range(1, 5))
    traces = [synthetic_jobs(8, seed=s, mix="large", arrival_rate_per_h=1.0) for s in (3, 4)]
    loop = Loop(nodes, load_speed_model("contention"), str(tmp_path / "l.db"), tmp_path / "models",
                LoopSettings(retrain=False))
    cycles = loop.run(traces)
    assert [(c["policy"], c["promoted"], c["retrain"]) for c in cycles] == [("slurm-default", False, None)] * 2
    with Store.open(str(tmp_path / "l.db"), create=False) as store:
        assert store.list_models() == [] and store.count_decisions() == 16
        assert store.count_samples("live") == sum(c["samples"] for c in cycles) > 0
        # each cycle's samples are the store's from its ``samples_since`` to the next cycle's
        times = [s.time for s in store.load_samples(source="live")]
    starts = [c["samples_since"] for c in cycles] + [float("inf")]
    assert [sum(lo <= t < hi for t in times) for lo, hi in pairwise(starts)] == [c["samples"] for c in cycles]
