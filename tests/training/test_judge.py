"""The promotion gate's judge is fitted on its own samples (another trace, other runs), never on
the samples the judged model was fitted on."""
from __future__ import annotations

from dataclasses import replace

import pytest
from test_train_pipeline import HP

from slurm_advisor.experiments import experiment
from slurm_advisor.experiments.experiment import record, run_experiment
from slurm_advisor.traces.synthetic import synthetic_jobs
from slurm_advisor.training import judge as judge_module
from slurm_advisor.training import train as train_module
from slurm_advisor.training.train import Ablation, train

HOLDING_ONLY = Ablation(network=False)  # no RL: the judge is all these tests look at


@pytest.fixture(scope="module")
def judge_samples(small_nodes, truth):
    """Speeds of other jobs (another trace), logged by other runs."""
    jobs = [replace(j, id=f"judge-{j.id}") for j in synthetic_jobs(40, seed=41, mix="large", arrival_rate_per_h=1.0)]
    return record(small_nodes, jobs, truth, ("slurm-default", "random", "spread"), seed=500)


def test_the_judge_is_fitted_on_the_judge_samples_only(samples, judge_samples, small_nodes, small_jobs,
                                                       monkeypatch) -> None:
    fitted_on = []
    real_fit = train_module.fit_site_model

    def spy(data, hp, *args, **kwargs):
        fitted_on.append((data, hp.seed))
        return real_fit(data, hp, *args, **kwargs)

    monkeypatch.setattr(train_module, "fit_site_model", spy)
    monkeypatch.setattr(judge_module, "fit_site_model", spy)  # the judge's own fit
    report = train(samples, small_nodes, small_jobs, HP, HOLDING_ONLY, log=lambda _: None,
                   judge_samples=judge_samples)
    assert [(data is samples, seed) for data, seed in fitted_on] == [(True, HP.seed), (False, HP.seed + 1)]
    assert fitted_on[1][0] is judge_samples
    assert report.judge == f"separate samples ({len(judge_samples)})"
    assert report.deployment_meta()["judge_fitted_on"] == report.judge


@pytest.mark.slow
def test_other_judge_samples_make_another_judge_and_nothing_else(samples, small_nodes, small_jobs) -> None:
    """Judge samples ten times slower than the truth: only the judge's replays slow down."""
    slow = [replace(s, speed=s.speed / 10) for s in samples]
    with_slow = train(samples, small_nodes, small_jobs, HP, HOLDING_ONLY, log=lambda _: None, judge_samples=slow)
    with_same = train(samples, small_nodes, small_jobs, HP, HOLDING_ONLY, log=lambda _: None, judge_samples=samples)
    assert with_slow.speed_metrics == with_same.speed_metrics
    assert with_slow.teacher_scores == with_same.teacher_scores and with_slow.candidates == with_same.candidates
    assert all(a > 3 * b for a, b in zip(with_slow.judge_scores["teacher"], with_same.judge_scores["teacher"]))
    # the same samples as the fitted model: the old judge (other seed and split only), said so
    unjudged = train(samples, small_nodes, small_jobs, HP, HOLDING_ONLY, log=lambda _: None)
    assert unjudged.judge_scores == with_same.judge_scores
    assert unjudged.judge.startswith("the training samples")


@pytest.mark.slow
def test_experiment_records_the_judge_samples_on_the_judge_trace(small_nodes, small_jobs, truth, tmp_path,
                                                                 monkeypatch) -> None:
    judge_jobs = [replace(j, id=f"judge-{j.id}") for j in synthetic_jobs(30, seed=41, mix="large",
                                                                          arrival_rate_per_h=1.0)]
    test_jobs = [replace(j, id=f"test-{j.id}") for j in synthetic_jobs(20, seed=31, mix="large",
                                                                        arrival_rate_per_h=1.0)]
    seen = []

    def small_train(data, nodes, jobs, hp, ablation, log, judge_samples=None):
        seen.append(({s.subject.job.id for s in data}, {s.subject.job.id for s in judge_samples},
                     len(judge_samples)))
        return train(data, nodes, jobs, HP, HOLDING_ONLY, log=log, judge_samples=judge_samples)

    monkeypatch.setattr(experiment, "train", small_train)
    res = run_experiment(small_nodes, small_jobs, test_jobs, truth, tmp_path, HP, judge_jobs=judge_jobs,
                         baselines=("slurm-default",), log=lambda _: None)
    assert len(seen) == 1  # one training: the loop (serve, log, retrain) is slurm_advisor.loop's
    train_ids, judge_ids = {j.id for j in small_jobs}, {j.id for j in judge_jobs}
    model_on, judge_on, judged = seen[0]
    assert model_on <= train_ids and judge_on <= judge_ids and judged > 0
    assert res.validation["learned"]["judge_fitted_on"].startswith("separate samples")
