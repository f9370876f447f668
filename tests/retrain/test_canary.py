"""The canary and the watch (retrain/canary.py, canary_run.py) on literal decisions, reports and
outcomes: the test, the verdicts, and what a verdict moves in the registry and the pointers."""
from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from retrain_helpers import publish_copy

from slurm_advisor.advisor import Advisor
from slurm_advisor.daemon.service import AdviceService, Canary, in_canary
from slurm_advisor.domain import ClusterSnapshot
from slurm_advisor.domain.decision import Decision
from slurm_advisor.domain.model_record import ModelRecord
from slurm_advisor.domain.outcome import Outcome
from slurm_advisor.domain.speed_report import SpeedReport
from slurm_advisor.models import versions
from slurm_advisor.policies.pack import PackPolicy
from slurm_advisor.policies.spread import SpreadPolicy
from slurm_advisor.retrain.canary import CanaryRules, judge_canary, mann_whitney_less, watch_active
from slurm_advisor.retrain.canary_run import last_verdict, run_canary
from slurm_advisor.sim.clusterfile import default_cluster
from slurm_advisor.store import Store

T0 = datetime(2026, 12, 1, tzinfo=UTC)
RULES = CanaryRules(jobs=20)


def test_mann_whitney_against_a_hand_computed_case():
    # U = 0 for x all below y; normal approximation with continuity: z = (0 - 4.5 + 0.5) / sqrt(5.25)
    assert mann_whitney_less(np.array([1.0, 2, 3]), np.array([4.0, 5, 6])) == pytest.approx(0.0404, abs=1e-4)
    assert mann_whitney_less(np.array([4.0, 5, 6]), np.array([1.0, 2, 3])) > 0.95
    same = np.array([1.0, 1.0, 1.0])
    assert mann_whitney_less(same, same) == 1.0  # all tied: no evidence either way


class Site:
    """Decisions, reports and outcomes as the store holds them."""

    def __init__(self):
        self.decisions, self.reports, self.outcomes = [], [], []
        self.rng = np.random.default_rng(3)

    def job(self, version: str, speed: float, *, workers: int = 2, action: str = "place", mode: str = "advise",
            at: timedelta = timedelta(hours=1)) -> None:
        i = len(self.decisions)
        did = f"d-{i:012x}"
        comment = f"slurm-advisor: type=resnet50 ps=0 workers={workers}"
        self.decisions.append(Decision(did, T0 + at, mode, action, "learned", version, "resnet50", 1000,
                                       {"comment": comment, "num_tasks": workers}))
        measured = speed * float(np.exp(self.rng.normal(0, 0.05)))
        self.reports.append(SpeedReport(str(i), 1000, measured * 600, 600.0, 1e9, did))
        self.outcomes.append(Outcome(str(i), "COMPLETED", did, 0.0, 1.0, 601.0))

    def data(self):
        return self.decisions, self.reports, self.outcomes


def arms(site: Site, canary_speed: float, active_speed: float, n: int = 25) -> None:
    for k in range(n):
        workers = 2 + k % 2  # two shapes, each with its own speed
        site.job("cafe", canary_speed * workers)
        site.job("beef", active_speed * workers)


def test_a_slower_canary_is_rolled_back_and_an_even_one_promoted():
    slow, even = Site(), Site()
    arms(slow, 0.7, 1.0)
    arms(even, 1.0, 1.0)
    since = T0.timestamp()
    verdict = judge_canary(*slow.data(), "cafe", "beef", since, RULES)
    assert verdict.state == "rollback" and verdict.effect == pytest.approx(-0.3, abs=0.05)
    assert verdict.p_value < 0.001 and verdict.jobs == {"canary": 25, "active": 25}
    assert "one-sided Mann-Whitney U" in verdict.reason
    assert judge_canary(*even.data(), "cafe", "beef", since, RULES).state == "promote"


def test_the_canary_waits_for_comparable_jobs_in_each_arm():
    site = Site()
    arms(site, 0.5, 1.0, n=10)
    for _ in range(30):  # a shape only the canary ran, and jobs decided in observe mode: not comparable
        site.job("cafe", 0.1, workers=7)
        site.job("beef", 5.0, mode="observe")
    verdict = judge_canary(*site.data(), "cafe", "beef", T0.timestamp(), RULES)
    assert verdict.state == "waiting" and verdict.jobs == {"canary": 10, "active": 10}
    assert "20 each needed" in verdict.reason
    # decisions before the canary started are not the active model's arm
    assert judge_canary(*site.data(), "cafe", "beef", (T0 + timedelta(days=1)).timestamp(), RULES).jobs == \
        {"canary": 0, "active": 0}


def test_the_watch_compares_the_models_own_placements_with_slurms():
    site = Site()
    for k in range(25):
        site.job("beef", 0.6 * (2 + k % 2), action="place")
        site.job("beef", 1.0 * (2 + k % 2), action="observe")  # Slurm's own choice, in advise mode
    verdict = watch_active(*site.data(), "beef", T0.timestamp(), RULES)
    assert verdict.state == "rollback" and verdict.jobs == {"advised": 25, "slurm": 25}


def test_the_canary_arm_is_a_hash_of_the_decision_and_its_decisions_name_the_canary():
    ids = [f"d-{i:012x}" for i in range(4000)]
    assert 0.18 < sum(in_canary(i, 0.2) for i in ids) / len(ids) < 0.22
    assert [in_canary(i, 0.2) for i in ids] == [in_canary(i, 0.2) for i in ids]
    service = AdviceService(Advisor(PackPolicy()), lambda snapshot, job, placement: placement, model_version="beef")
    service.canary = Canary("cafe", Advisor(SpreadPolicy()), 0.5)
    snapshot = ClusterSnapshot.empty(default_cluster())
    fields = {"comment": "slurm-advisor: type=resnet50 ps=0 workers=3", "num_tasks": 3, "cpus_per_task": 1,
              "pn_min_memory": 1000, "mem_per_cpu": True, "tres_per_task": "gres:gpu:1", "user_id": 1000}
    for did in ids[:12]:
        decision = service.advise(snapshot, fields, "advise", decision_id=did)[1]
        assert (decision.model_version, decision.policy) == (("cafe", "spread") if in_canary(did, 0.5)
                                                              else ("beef", "pack"))


@pytest.fixture
def registry(tmp_path):
    models = tmp_path / "models"
    active, canary = publish_copy(models, "active"), publish_copy(models, "canary")
    db = str(tmp_path / "advisor.db")
    with Store.open(db) as store:
        for version in (active, canary):
            store.register_model(ModelRecord(version, str(models / version), "candidate", created_at=1.0,
                                             metrics={"promoted": True, "reason": "gate"}))
        store.activate(active, "retrain")
        store.set_model_status(canary, "canary")
    versions.point_active(models, active)
    versions.point_canary(models, canary)
    return db, models, active, canary


def _stored(db: str, site: Site) -> None:
    with Store.open(db) as store:
        store.record_decisions(site.decisions)
        store.record_reports([(r, None) for r in site.reports])
        store.record_outcomes(site.outcomes)


def _site(active: str, canary: str, canary_speed: float) -> Site:
    site = Site()
    for k in range(25):
        site.job(canary, canary_speed * (2 + k % 2), at=timedelta(days=30))
        site.job(active, 2 + k % 2, at=timedelta(days=30))
    return site


def test_a_canary_that_holds_up_becomes_the_active_model(registry):
    db, models, active, canary = registry
    _stored(db, _site(active, canary, 1.0))
    lines = []
    with Store.open(db, create=False) as store:
        summary = run_canary(store, models, RULES, lines.append)
        assert store.active_model().version == canary
        assert [(h.action, h.version) for h in store.model_history()][-1] == ("canary", canary)
    assert summary["state"] == "promote" and summary["judged"] == canary and summary["against"] == active
    assert versions.active_version(models) == canary and versions.canary_version(models) is None
    assert last_verdict(models / canary)["state"] == "promote" and "promoted" in lines[0]


def test_a_slower_canary_is_retired_and_the_active_model_stays(registry):
    db, models, active, canary = registry
    _stored(db, _site(active, canary, 0.6))
    with Store.open(db, create=False) as store:
        summary = run_canary(store, models, RULES, lambda line: None)
        assert store.active_model().version == active and store.model(canary).status == "retired"
    assert summary["state"] == "rollback"
    assert versions.active_version(models) == active and versions.canary_version(models) is None
    assert json.loads((models / canary / "canary.json").read_text())["state"] == "rollback"


def test_a_measured_regression_after_promotion_rolls_the_model_back(registry):
    db, models, active, canary = registry
    with Store.open(db) as store:
        store.set_model_status(canary, "retired")  # no canary runs: the watch
        promoted_at = store.active_model().promoted_at
    versions.point_canary(models, None)
    site = Site()
    for k in range(25):
        later = timedelta(seconds=promoted_at - T0.timestamp() + 60)
        site.job(active, 0.5 * (2 + k % 2), action="place", at=later)
        site.job(active, 2 + k % 2, action="observe", at=later)
    _stored(db, site)
    with Store.open(db, create=False) as store:
        summary = run_canary(store, models, RULES, lambda line: None)
        assert store.active_model() is None
        assert store.model_history()[-1].action == "regression"
    assert summary["state"] == "rollback" and summary["against"] == "slurm's own placements"
    assert versions.active_version(models) == versions.DEFAULT


def test_a_canary_promoted_by_hand_loses_its_pointer_at_the_next_step(registry):
    db, models, _, canary = registry
    with Store.open(db, create=False) as store:
        store.activate(canary, "promote", note="by hand")
        versions.point_active(models, canary)
        summary = run_canary(store, models, RULES, lambda line: None)
    assert versions.canary_version(models) is None and summary["judged"] == canary  # now watched as the active one
