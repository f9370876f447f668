"""`shadow` and `explain` judge a decision by what it recorded when it was made (its evidence)
against where Slurm put the job: the figure survives a promotion, a layout impossible for the
job as submitted is never counted, an older decision says "not recorded"."""
from __future__ import annotations

import json
import shutil
import time
from dataclasses import replace

import pytest
from click.testing import CliRunner

from slurm_advisor.advisor import Advisor
from slurm_advisor.cli.main import cli
from slurm_advisor.daemon.evidence import layouts, placement_of
from slurm_advisor.daemon.service import AdviceService, job_from_request
from slurm_advisor.daemon.state import speed_model_of
from slurm_advisor.domain import ClusterSnapshot
from slurm_advisor.domain.model_record import ModelRecord
from slurm_advisor.domain.outcome import Outcome
from slurm_advisor.models.meta import DEFAULT_MODEL_DIR
from slurm_advisor.policies.slurm_default import SlurmDefaultPolicy
from slurm_advisor.policies.spread import SpreadPolicy
from slurm_advisor.sim.clusterfile import default_cluster
from slurm_advisor.slurm.expressible import express
from slurm_advisor.store import Store

pytestmark = pytest.mark.usefixtures("cli_env")
SNAPSHOT = ClusterSnapshot.empty(default_cluster())
READ = "scontrol show job -d"


def fields(workers: int, ps: int = 1, **more) -> dict:
    return {"comment": f"slurm-advisor: type=resnet50 ps={ps} workers={workers}", "num_tasks": ps + workers,
            "cpus_per_task": 2, "pn_min_memory": 1000, "mem_per_cpu": True, "tres_per_task": "gres:gpu:1",
            "user_id": 1000, **more}


def ran_as_modelled(decision, job_id: str) -> Outcome:
    """Slurm placed the job as the daemon modelled its choice, per-node counts read from Slurm."""
    slurm = layouts(decision.evidence)["slurm"]["tasks"]
    return Outcome(job_id, "COMPLETED", decision.id, 1.0, 2.0, 9.0, tuple(n for n, _, _ in slurm),
                   tuple(p + w for _, p, w in slurm), READ)


@pytest.fixture
def site(tmp_path):
    db, config = tmp_path / "advisor.db", tmp_path / "config.toml"
    config.write_text(f'db = "{db}"\nsource = "simulated"\nsocket = "{tmp_path / "none.sock"}"\n'
                      f'models_dir = "{tmp_path}"\n')
    with Store.open(str(db)) as store:
        for version in ("aaa", "ccc"):
            shutil.copytree(DEFAULT_MODEL_DIR, tmp_path / version)
            store.register_model(ModelRecord(version, str(tmp_path / version), "active" if version == "aaa"
                                             else "candidate", created_at=time.time()))
    return {"db": db, "config": str(config), "tmp": tmp_path}


def shadow(site) -> dict:
    result = CliRunner().invoke(cli, ["shadow", "--config", site["config"], "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_the_figure_is_the_same_before_and_after_a_promotion(site, other_model_dir):
    """Six observed jobs, the advisor spreading where Slurm packed them: each counted at the
    speeds model aaa predicted when it decided. Promoting ccc, whose speed model is another one
    (it predicts these layouts otherwise), changes no row and no total."""
    spreader = AdviceService(Advisor(SpreadPolicy(), predictor=speed_model_of(DEFAULT_MODEL_DIR)), express,
                             model_version="aaa")
    decisions = [spreader.advise(SNAPSHOT, fields(w), "observe")[1] for w in range(1, 7)]
    shutil.rmtree(site["tmp"] / "ccc")
    shutil.copytree(other_model_dir, site["tmp"] / "ccc")
    with Store.open(str(site["db"])) as store:
        store.record_decisions(decisions)
        store.record_outcomes([ran_as_modelled(d, str(600 + i)) for i, d in enumerate(decisions)])
    before = shadow(site)
    assert before["counted"] == before["placed_differently"] == 6 and before["models"] == ["aaa"]
    assert before["geomean_predicted_speedup_ci95"] is not None and before["slurm_as_modelled"] == {
        "agreed": 6, "known": 6}
    first = decisions[0]
    recorded = layouts(first.evidence)
    row = next(r for r in before["jobs"] if r["decision"] == first.id)
    assert row["predicted_speedup"] == pytest.approx(recorded["advised"]["predicted"] / recorded["slurm"]["predicted"])
    job = job_from_request(first.request, first.id)
    other = speed_model_of(other_model_dir).predict(SNAPSHOT, job, placement_of(job, recorded["advised"]["tasks"]))
    assert other != pytest.approx(recorded["advised"]["predicted"], rel=1e-3)  # ccc would say otherwise
    result = CliRunner().invoke(cli, ["models", "promote", "ccc", "--config", site["config"], "--force"])
    assert result.exit_code == 0, result.output
    assert shadow(site) == before


def test_a_layout_impossible_for_the_job_as_submitted_is_never_counted(site):
    """A job submitted with -N 2 and one with -w: the daemon's own decisions honour them and are
    counted; a decision whose layout ignores -N 2 (as the 1.238x headline's did), even with
    predictions recorded, is listed as impossible and left out of the figure."""
    spreader = AdviceService(Advisor(SpreadPolicy(), fallback=SlurmDefaultPolicy(),
                                     predictor=speed_model_of(DEFAULT_MODEL_DIR)), express, model_version="aaa")
    two = spreader.advise(SNAPSHOT, fields(5, min_nodes=2, max_nodes=2), "observe")[1]
    pinned = spreader.advise(SNAPSHOT, fields(3, req_nodes="gpu02,gpu06"), "observe")[1]
    assert len(two.nodes) == 2 and {"gpu02", "gpu06"} <= set(pinned.nodes)
    spread = spreader.advise(SNAPSHOT, fields(5), "observe")[1]  # three nodes or more, no -N
    assert len(spread.nodes) > 2
    forged = replace(spread, id="d-0000000000ff", request=two.request)  # that layout, for the -N 2 job
    with Store.open(str(site["db"])) as store:
        store.record_decisions([two, pinned, forged])
        store.record_outcomes([ran_as_modelled(two, "701"), ran_as_modelled(forged, "703"),
                               Outcome("702", "COMPLETED", pinned.id, 1.0, 2.0, 9.0, ("gpu02", "gpu06"),
                                       (2, 2), READ)])
    data = shadow(site)
    rows = {r["job_id"]: r for r in data["jobs"]}
    assert rows["701"]["impossible"] is None and rows["701"]["not_counted"] is None
    assert rows["703"]["impossible"] and "outside the requested 2-2" in rows["703"]["not_counted"]
    assert rows["703"]["predicted_speedup"] is None and data["not_counted"].get(
        "impossible for the job as submitted") == 1
    assert rows["702"]["impossible"] is None and rows["702"]["slurm_tasks"] == [["gpu02", 1, 1], ["gpu06", 0, 2]]
    # -w: Slurm's choice is not modelled, so its 2,2 (not the advised 3,1) was never predicted
    assert pinned.evidence["slurm"].startswith("not modelled") and rows["702"]["differs"] is True
    assert rows["702"]["not_counted"].startswith("Slurm's layout was not among those predicted then")
    assert data["counted"] == 1 and data["placed_differently"] == 0


def test_an_older_decision_without_evidence_is_listed_as_not_recorded(site):
    spreader = AdviceService(Advisor(SpreadPolicy(), predictor=speed_model_of(DEFAULT_MODEL_DIR)), express,
                             model_version="aaa")
    decision = spreader.advise(SNAPSHOT, fields(3), "observe")[1]
    outcome = ran_as_modelled(decision, "801")
    with Store.open(str(site["db"])) as store:
        store.record_decisions([replace(decision, evidence=None)])
        store.record_outcomes([outcome])
    data = shadow(site)
    assert data["counted"] == 0 and data["jobs"][0]["evidence"].startswith("not recorded")
    assert data["not_counted"] == {"not recorded (decided before decisions stored their evidence)": 1}
    result = CliRunner().invoke(cli, ["shadow", "--config", site["config"]])
    assert "not counted: not recorded" in result.output and "cannot know: how long" in result.output
