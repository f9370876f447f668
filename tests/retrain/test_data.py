"""Samples split by time; the recent job mix rebuilt from decisions, reports and outcomes."""
from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from retrain_helpers import request_fields

from slurm_advisor.domain.decision import Decision
from slurm_advisor.domain.outcome import Outcome
from slurm_advisor.domain.speed_report import SpeedReport
from slurm_advisor.errors import InputError
from slurm_advisor.retrain.data import recent_jobs, split_by_time
from slurm_advisor.store import Store
from slurm_advisor.traces.synthetic import synthetic_jobs


def _samples(n: int, source: str):
    from dataclasses import replace

    from slurm_advisor.domain import ClusterSnapshot, Node, Placement, RunningJob, SpeedSample
    from slurm_advisor.traces.synthetic import synthetic_jobs as jobs

    job = jobs(1, seed=1)[0]
    node = Node("n1", 64, 16, 512_000)
    rj = RunningJob(job, Placement.of(job, ["n1"] * job.num_tasks))
    assert ClusterSnapshot.empty((node,)).fits(job, rj.placement)
    base = SpeedSample(0.0, rj, (), (node,), 1.0, source=source)
    return [replace(base, time=float(t), speed=1.0 + t) for t in range(n)]


def test_the_most_recent_share_is_held_out_and_live_counts_as_newer_than_sim() -> None:
    live = _samples(10, "live")
    sim = _samples(40, "sim")
    split = split_by_time(live[::-1] + sim, 0.2)
    assert len(split.holdout) == 10 and split.holdout == live  # the live ones, oldest first
    assert split.train == sim and split.describe("holdout")["live"] == 10
    assert split.describe("train")["first_time"] == 0.0 and split.describe("train")["last_time"] == 39.0
    with pytest.raises(InputError, match="at least 20"):
        split_by_time(sim[:22], 0.2)


def test_the_holdout_is_capped_so_a_growing_store_still_trains_on_recent_samples() -> None:
    sim = _samples(400, "sim")
    split = split_by_time(sim, 0.2, holdout_max=30)
    assert len(split.holdout) == 30 and split.holdout == sim[-30:]  # the newest 30, not the newest 80
    assert split.train == sim[:-30]
    assert len(split_by_time(sim, 0.2, holdout_max=500).holdout) == 80  # a cap above the share changes nothing


def test_job_lengths_from_reports_outcomes_markers_or_the_median(tmp_path) -> None:
    jobs = synthetic_jobs(4, seed=3)
    t0 = datetime(2026, 11, 1, tzinfo=UTC)
    fields = [request_fields(j) for j in jobs]
    fields[3]["comment"] = fields[3]["comment"].replace(f" iters={jobs[3].iterations:g}", "")
    fields[2]["comment"] = fields[2]["comment"].replace(f" iters={jobs[2].iterations:g}", "")
    decisions = [Decision(f"d-{i:012x}", t0 + timedelta(seconds=60 * i), "advise", "place", "slurm-default",
                          None, j.type, 1000, f) for i, (j, f) in enumerate(zip(jobs, fields, strict=True))]
    decisions.append(Decision("d-bad", t0, "advise", "none", "x", None, "x", 1, {"comment": "no marker"}))
    with Store.open(str(tmp_path / "s.db")) as store:
        store.record_decisions(decisions)
        # job 0: 10 it/s over two reports, ran 1000 s -> 10,000 iterations
        store.record_reports([(SpeedReport("7", 1000, 100, 10, 2000.0, "d-000000000000"), None),
                              (SpeedReport("7", 1000, 300, 30, 2030.0, "d-000000000000"), None)])
        store.record_outcomes([Outcome("7", "COMPLETED", "d-000000000000", 0.0, 1000.0, 2000.0)])
        store.record_reports([(SpeedReport("8", 1000, 500, 5, 2000.0, "d-000000000001"), None)])  # no outcome
        mix = recent_jobs(store, limit=100)
    assert [j.id for j in mix.jobs] == [d.id for d in decisions[:4]] and mix.skipped == 1
    assert [j.submit_time for j in mix.jobs] == [0.0, 60.0, 120.0, 180.0]
    lengths = [j.iterations for j in mix.jobs]
    assert lengths[0] == pytest.approx(10_000) and lengths[1] == 500  # reports x run time; reports' sum
    assert lengths[2] == lengths[3] == pytest.approx(5250)  # the median of the known two
    assert mix.lengths == {"reports x outcome": 1, "reports": 1, "median": 2}
