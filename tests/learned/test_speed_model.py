"""The speed model fitted on recorded samples: it learns, and predicts usable speeds."""
from __future__ import annotations

import math
from dataclasses import replace

import pytest
from conftest import make_job, snapshot_with

from slurm_advisor.domain import Placement
from slurm_advisor.learned.features import FeatureSchema
from slurm_advisor.learned.hyper import Hyper
from slurm_advisor.learned.mlp_speed import LearnedSpeedModel
from slurm_advisor.learned.speed_model import fit_speed_model

SCHEMA = FeatureSchema()
HP = replace(Hyper(), speed_epochs=15, speed_hidden=32)


@pytest.fixture(scope="module")
def fitted(samples):
    return fit_speed_model(samples, SCHEMA, HP)


def test_samples_cover_many_jobs_and_placements(samples) -> None:
    assert len(samples) > 100
    assert len({s.subject.job.id for s in samples}) > 20
    assert any(len(s.subject.placement.nodes()) > 1 for s in samples)
    assert all(s.speed > 0 for s in samples)


def test_holdout_error_falls_over_epochs(fitted, samples) -> None:
    _, metrics = fitted
    curve = metrics["curve"]
    assert len(curve) == HP.speed_epochs
    assert min(curve) < 0.7 * curve[0]
    assert metrics["holdout_mape"] == min(curve)  # the best epoch is the one kept
    assert metrics["samples"] == len(samples)


def test_kept_model_does_better_than_the_first_epoch_on_all_samples(fitted, samples) -> None:
    net, metrics = fitted
    assert LearnedSpeedModel(net, SCHEMA).mape(samples) < metrics["curve"][0]


def test_predict_is_positive_and_finite(fitted, small_nodes) -> None:
    net, _ = fitted
    model = LearnedSpeedModel(net, SCHEMA)
    snap = snapshot_with(small_nodes, (make_job("busy", "bert", 0, 6), ["n00"] * 4 + ["n01"] * 2))
    for job, nodes in ((make_job("one", "resnet50", 0, 1), ["n02"]),
                       (make_job("ps", "vgg16", 2, 6), ["n01", "n02"] + ["n01"] * 3 + ["n03"] * 3),
                       (make_job("new", "never-seen", 0, 4), ["n00", "n01", "n02", "n03"])):
        speed = model.predict(snap, job, Placement.of(job, nodes))
        assert math.isfinite(speed) and speed > 0
    speeds = model.speeds(snap.nodes, snap.running)
    assert set(speeds) == {"busy"} and speeds["busy"] > 0


def test_same_seed_same_model(samples, fitted) -> None:
    _, first = fitted
    _, second = fit_speed_model(samples, SCHEMA, HP)
    assert first["curve"] == second["curve"]


def test_too_few_samples_is_refused(samples) -> None:
    with pytest.raises(ValueError, match="at least 20"):
        fit_speed_model(samples[:5], SCHEMA, HP)
