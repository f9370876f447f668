"""`models promote` honours the retrain gate's recorded verdict (--force to override, logged), and
`models rollback` walks the history of actives back to the daemon's default model; in-process."""
from __future__ import annotations

import json
import shutil

import pytest
from click.testing import CliRunner

from slurm_advisor.cli.main import cli
from slurm_advisor.domain.model_record import ModelRecord
from slurm_advisor.models import versions
from slurm_advisor.models.meta import DEFAULT_MODEL_DIR
from slurm_advisor.retrain.gate import Scores, decide
from slurm_advisor.retrain.promotion import active_stack
from slurm_advisor.store import Store

# What a retrain's gate says of a candidate no better than slurm-default (retrain.py records it so).
REJECTED = decide(Scores(3600.0, 0.1), Scores(3500.0, None), incumbent_name="slurm-default", margin=0.02, max_mape=0.5)
ACCEPTED = decide(Scores(3000.0, 0.1), Scores(3500.0, None), incumbent_name="slurm-default", margin=0.02, max_mape=0.5)


pytestmark = pytest.mark.usefixtures("cli_env")


@pytest.fixture
def site(tmp_path):
    """Models good1 and good2 the gate accepted, bad it rejected, hand made with no verdict; none active."""
    db, models = tmp_path / "advisor.db", tmp_path / "models"
    config = tmp_path / "config.toml"
    config.write_text(f'db = "{db}"\nsource = "simulated"\nmodels_dir = "{models}"\n')
    verdicts = {"good1": ACCEPTED, "good2": ACCEPTED, "bad": REJECTED, "hand": None}
    with Store.open(str(db)) as store:
        for i, (version, verdict) in enumerate(verdicts.items()):
            shutil.copytree(DEFAULT_MODEL_DIR, models / version)
            metrics = {} if verdict is None else {"promoted": verdict.promote, "reason": verdict.reason}
            store.register_model(ModelRecord(version, str(models / version), created_at=1000.0 + i, metrics=metrics))
    return {"config": str(config), "db": str(db), "models": models}


def run(*args: str, code: int = 0):
    result = CliRunner().invoke(cli, list(args))
    assert result.exit_code == code, result.output
    return result


def active(site) -> tuple[str | None, str | None]:
    """(the registry's active version, the pointer's) -- they must agree."""
    with Store.open(site["db"]) as store:
        record = store.active_model()
    return record and record.version, versions.active_version(site["models"])


def test_promoting_a_rejected_candidate_is_refused_with_the_gate_reason(site):
    refused = run("models", "promote", "bad", "--config", site["config"], code=2)
    assert "the gate rejected bad" in refused.stderr and REJECTED.reason in refused.stderr
    assert "--force" in refused.stderr
    assert active(site) == (None, None)  # nothing changed
    with Store.open(site["db"]) as store:
        assert store.model_history() == []


def test_a_forced_promotion_goes_through_and_is_logged_as_forced(site):
    result = run("models", "promote", "bad", "--force", "--config", site["config"])
    assert "active model: bad (was default)" in result.stdout
    assert "warning: promoted bad over the gate" in result.stderr and REJECTED.reason in result.stderr
    assert active(site) == ("bad", "bad")
    rows = json.loads(run("models", "history", "--config", site["config"], "--json").stdout)
    assert [(r["version"], r["previous"], r["action"], r["forced"]) for r in rows] == [
        ("bad", "default", "promote", True)]
    assert rows[0]["note"] == f"gate rejected: {REJECTED.reason}"
    assert "FORCED" in run("models", "history", "--config", site["config"]).stdout
    with Store.open(site["db"]) as store:  # what the daemon's metrics count
        assert store.count_activations() == {("promote", True): 1}


def test_a_model_no_gate_judged_needs_force_and_an_accepted_one_does_not(site):
    refused = run("models", "promote", "hand", "--config", site["config"], code=2)
    assert "the gate never judged hand: no gate verdict recorded" in refused.stderr
    assert json.loads(run("models", "promote", "good1", "--config", site["config"], "--json").stdout) == {
        "active": "good1", "was": "default", "directory": str(site["models"] / "good1"), "forced": False}
    assert run("models", "promote", "good1", "--config", site["config"]).stderr == ""  # no warning
    listed = {m["version"]: (m["status"], m["gate"]) for m in
              json.loads(run("models", "list", "--config", site["config"], "--json").stdout)}
    assert listed == {"good1": ("active", "accepted"), "good2": ("candidate", "accepted"),
                      "bad": ("candidate", "rejected"), "hand": ("candidate", "unjudged"), "default": ("standby", None)}


def test_rollback_after_one_promotion_reaches_the_default_model(site):
    run("models", "promote", "good1", "--config", site["config"])
    assert "active model: default (was good1)" in run("models", "rollback", "--config", site["config"]).stdout
    assert active(site) == (None, versions.DEFAULT)  # the daemon serves its default model again
    listed = json.loads(run("models", "list", "--config", site["config"], "--json").stdout)
    assert [(m["version"], m["status"]) for m in listed if m["status"] == "active"] == [("default", "active")]
    assert listed[-1]["directory"] == str(DEFAULT_MODEL_DIR)
    assert "nothing to roll back to" in run("models", "rollback", "--config", site["config"], code=2).stderr
    assert "default  active" in run("models", "list", "--config", site["config"]).stdout


def test_rollback_after_two_promotions_walks_back_to_the_default_model(site):
    with Store.open(site["db"]) as store:
        store.activate("good1", "retrain", note=ACCEPTED.reason)  # what a promoting retrain records
    versions.point_active(site["models"], "good1")
    run("models", "promote", "good2", "--config", site["config"])
    assert "active model: good1 (was good2)" in run("models", "rollback", "--config", site["config"]).stdout
    assert active(site) == ("good1", "good1")
    assert "active model: default (was good1)" in run("models", "rollback", "--config", site["config"]).stdout
    assert active(site) == (None, versions.DEFAULT)
    # promoted again after the rollbacks: the next rollback goes back to the default again
    run("models", "promote", "good2", "--config", site["config"])
    assert "active model: default (was good2)" in run("models", "rollback", "--config", site["config"]).stdout
    rows = json.loads(run("models", "history", "--config", site["config"], "--json").stdout)
    assert [(r["action"], r["version"]) for r in rows] == [
        ("retrain", "good1"), ("promote", "good2"), ("rollback", "good1"), ("rollback", "default"),
        ("promote", "good2"), ("rollback", "default")]


def test_rollback_skips_a_model_removed_from_the_registry_and_trusts_the_registry_over_the_log(site):
    from slurm_advisor.domain.model_record import ModelActivation as A
    history = [A(1, "a", None, "promote"), A(2, "b", "a", "promote"), A(3, "a", "b", "rollback"),
               A(4, "c", "a", "promote")]
    assert active_stack(history, "c") == [None, "a", "c"]
    assert active_stack(history, "x") == [None, "a", "c", "x"]  # changed outside the log: the registry wins
    assert active_stack([], None) == [None]
    run("models", "promote", "good1", "--config", site["config"])
    run("models", "promote", "good2", "--config", site["config"])
    with Store.open(site["db"]) as store, store._sessions.begin() as session:  # a row deleted by hand
        from slurm_advisor.store.tables import ModelRow
        session.delete(session.get(ModelRow, "good1"))
    assert "active model: default (was good2)" in run("models", "rollback", "--config", site["config"]).stdout
