"""`slurm-advisor retrain` in-process on a small synthetic store: promotion, keeping the active
model, a poisoned data set, the lock. Each retrain trains for a few seconds (retrain_helpers.TINY)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from retrain_helpers import TINY, make_site

from slurm_advisor.cli import main
from slurm_advisor.models import versions
from slurm_advisor.policies import PolicyContext, make_policy
from slurm_advisor.retrain.lock import RetrainLock
from slurm_advisor.retrain.retrain import RetrainExit
from slurm_advisor.store import Store

pytestmark = pytest.mark.slow  # every test here retrains a model

if "retrain" not in main.cli.commands:
    main._register()


def retrain(db: str, cluster: Path, models: Path, *args: str):
    result = CliRunner().invoke(main.cli, ["retrain", "--db", db, "--cluster", str(cluster), "--models-dir",
                                           str(models), "--json", "--no-canary", *TINY, *args])
    assert not result.exception or isinstance(result.exception, SystemExit), result.output
    return result


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    db, cluster = make_site(tmp_path_factory.mktemp("site"))
    return db, cluster


@pytest.fixture(scope="module")
def first(site, tmp_path_factory):
    """The first retrain of a site (no active model): judged against slurm-default. --margin 0:
    as good as slurm-default is enough, so that it promotes on this tiny budget (where training
    deploys the teacher, slurm-default itself)."""
    db, cluster = site
    models = tmp_path_factory.mktemp("models")
    result = retrain(db, cluster, models, "--margin", "0")
    return models, result


def test_a_first_model_at_least_as_good_as_slurm_default_is_promoted(site, first) -> None:
    db, _ = site
    models, result = first
    assert result.exit_code == RetrainExit.PROMOTED, result.output
    summary = json.loads(result.stdout)
    version = summary["candidate"]
    assert summary["promoted"] is True and summary["active"] == version and summary["active_before"] is None
    assert summary["incumbent"] == "slurm-default" and summary["incumbent_metrics"]["holdout_mape"] is None
    assert summary["candidate_metrics"]["avg_jct"] <= summary["slurm_default_avg_jct"]
    assert 0 < summary["candidate_metrics"]["holdout_mape"] <= 0.5
    assert "held-out samples alone" in summary["judge"]  # 104 held out: enough to fit the judge
    assert summary["data"]["holdout"]["samples"] == round(0.2 * (summary["data"]["train"]["samples"]
                                                                 + summary["data"]["holdout"]["samples"]))
    assert summary["data"]["job_lengths"] == {"marker": 40}
    # the version directory, the pointer and the registry agree
    assert versions.active_version(models) == version
    assert sorted(p.name for p in (models / version).iterdir()) == sorted(versions.MODEL_FILES)
    make_policy("learned", PolicyContext(model_dir=models / versions.ACTIVE))  # it loads
    with Store.open(db, create=False) as store:
        record = store.active_model()
    assert record.version == version and record.directory == str(models / version)
    assert record.samples == summary["data"]["train"]["samples"] and record.live_samples == 0
    assert record.last_sample_time < summary["data"]["holdout"]["first_time"]  # never trained on the held-out
    assert record.metrics["promoted"] is True and record.metrics["reason"] == summary["reason"]
    with Store.open(db, create=False) as store:  # the history a rollback walks back
        assert [(c.action, c.version, c.previous, c.note) for c in store.model_history()] == [
            ("retrain", version, None, summary["reason"])]


def test_a_second_retrain_that_is_not_better_keeps_the_active_model(site, first) -> None:
    db, cluster = site
    models, done = first
    active = json.loads(done.stdout)["candidate"]
    # On the same data a fine-tuned candidate may still come out a few percent better (then it
    # rightly goes live); a margin no candidate here reaches makes it one that is not better.
    result = retrain(db, cluster, models, "--margin", "0.5")
    assert result.exit_code == RetrainExit.KEPT, result.output
    summary = json.loads(result.stdout)
    assert summary["promoted"] is False and summary["active"] == summary["active_before"] == active
    assert summary["incumbent"] == f"the active model {active}"
    assert "not better by the margin of 50.0 %" in summary["reason"]
    assert versions.active_version(models) == active
    with Store.open(db, create=False) as store:
        assert store.active_model().version == active
        candidate = store.model(summary["candidate"])
    assert candidate.status == "candidate" and candidate.metrics["promoted"] is False
    assert (models / summary["candidate"] / "meta.json").is_file()  # kept for inspection
    assert json.loads((models / summary["candidate"] / "meta.json").read_text())["retrain"]["warm_start"] == active
    # the admin's promote finds the gate's verdict: refused with its reason, unless forced
    promote = ["models", "promote", summary["candidate"], "--db", db]
    config = ["--config", str(models.parent / "none.toml")]
    (models.parent / "none.toml").write_text(f'models_dir = "{models}"\n')
    refused = CliRunner().invoke(main.cli, [*promote, *config])
    assert refused.exit_code == 2 and summary["reason"] in refused.stderr and "--force" in refused.stderr
    forced = CliRunner().invoke(main.cli, [*promote, *config, "--force"])
    assert forced.exit_code == 0 and versions.active_version(models) == summary["candidate"], forced.output
    rolled = CliRunner().invoke(main.cli, ["models", "rollback", "--db", db, *config])
    assert rolled.exit_code == 0 and versions.active_version(models) == active, rolled.output


def test_a_poisoned_data_set_is_never_promoted(tmp_path) -> None:
    db, cluster = make_site(tmp_path / "poisoned", poison=True)
    result = retrain(db, cluster, tmp_path / "models", "--margin", "0")  # even at margin 0
    assert result.exit_code == RetrainExit.KEPT, result.output
    summary = json.loads(result.stdout)
    assert summary["promoted"] is False and summary["candidate_metrics"]["holdout_mape"] > 1
    assert "misses the held-out speeds" in summary["reason"]
    assert versions.active_version(tmp_path / "models") is None
    with Store.open(db, create=False) as store:
        assert store.active_model() is None


def test_a_second_retrain_while_one_runs_exits_4(site, tmp_path) -> None:
    db, cluster = site
    with RetrainLock(tmp_path / "models"):
        result = retrain(db, cluster, tmp_path / "models")
    assert result.exit_code == RetrainExit.LOCKED == 4
    assert "another retrain" in result.stderr
    summary = json.loads(result.stdout)  # the cron log still gets its one object
    assert summary["exit_code"] == 4 and summary["promoted"] is False and summary["candidate"] is None
    with RetrainLock(tmp_path / "models"):  # released when the holder is done
        pass


def test_bad_input_exits_2(site, tmp_path) -> None:
    db, cluster = site
    assert retrain(str(tmp_path / "missing.db"), cluster, tmp_path / "m").exit_code == RetrainExit.BAD_INPUT
    bad = retrain(db, cluster, tmp_path / "m", "--hyper", "nope=1")
    assert bad.exit_code == 2 and "speed_epochs" in bad.stderr
    assert retrain(db, cluster, tmp_path / "m", "--partition", "gpu").exit_code == 2


def test_by_default_an_accepted_candidate_becomes_the_canary_not_the_active_model(tmp_path) -> None:
    db, cluster = make_site(tmp_path / "site")  # a store with no active model yet
    models = tmp_path / "models"
    result = CliRunner().invoke(main.cli, ["retrain", "--db", db, "--cluster", str(cluster), "--models-dir",
                                           str(models), "--json", "--margin", "0", *TINY])
    assert result.exit_code == RetrainExit.PROMOTED, result.output
    summary = json.loads(result.stdout)
    candidate = summary["candidate"]
    assert summary["canary"] is True and summary["active"] is None
    assert "as a canary until measured outcomes decide" in summary["reason"]
    assert versions.canary_version(models) == candidate and versions.active_version(models) is None
    with Store.open(db, create=False) as store:
        assert store.model(candidate).status == "canary" and store.active_model() is None
