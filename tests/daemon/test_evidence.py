"""Each decision's evidence (daemon/evidence.py): the layouts weighed on its own snapshot, each
feasible for the job as submitted, with the speed the deciding model predicted then."""
from __future__ import annotations

import pytest

from slurm_advisor.advisor import Advisor, allowed
from slurm_advisor.daemon.batches import decision_line, decision_of_line
from slurm_advisor.daemon.evidence import MAX_ALTERNATIVES, layouts, node_kind, placement_of, signature
from slurm_advisor.daemon.service import AdviceService, Canary, in_canary, job_from_request
from slurm_advisor.daemon.state import speed_model_of
from slurm_advisor.domain import ClusterSnapshot, Placement
from slurm_advisor.models.meta import DEFAULT_MODEL_DIR
from slurm_advisor.policies.pack import PackPolicy
from slurm_advisor.policies.spread import SpreadPolicy
from slurm_advisor.sim.clusterfile import default_cluster
from slurm_advisor.slurm.expressible import express

SPEED = speed_model_of(DEFAULT_MODEL_DIR)


def fields(workers: int, ps: int = 1, **more) -> dict:
    return {"comment": f"slurm-advisor: type=resnet50 ps={ps} workers={workers}", "num_tasks": ps + workers,
            "cpus_per_task": 2, "pn_min_memory": 1000, "mem_per_cpu": True, "tres_per_task": "gres:gpu:1",
            "user_id": 1000, **more}


@pytest.fixture(scope="module")
def busy() -> ClusterSnapshot:
    """gpu01 and gpu05 half taken by another job: predictions then see it as a neighbour."""
    snap = ClusterSnapshot.empty(default_cluster())
    other = job_from_request(fields(7), "other")
    return snap.with_job(other, Placement.of(other, ["gpu01"] * 4 + ["gpu05"] * 4), 0.0)


@pytest.mark.parametrize("workers", [1, 3, 7, 12])
def test_every_layout_recorded_is_feasible_distinct_and_predicted_on_the_decisions_snapshot(busy, workers):
    service = AdviceService(Advisor(SpreadPolicy(), predictor=SPEED), express, model_version="m1")
    _, decision, job, _ = service.advise(busy, fields(workers), "observe")
    view, kind = allowed(busy, job), node_kind(busy)
    recorded = layouts(decision.evidence)
    assert decision.evidence["model"] == "m1" and list(recorded)[:2] == ["advised", "slurm"]
    assert len(recorded) <= 2 + MAX_ALTERNATIVES
    alternatives = [e for name, e in recorded.items() if name not in ("advised", "slurm")]
    sigs = [signature(e["tasks"], kind) for e in [recorded["advised"], *alternatives]]
    assert len(set(sigs)) == len(sigs)  # identical-node variants are one layout
    for entry in recorded.values():
        placement = placement_of(job, entry["tasks"])
        assert view.fits(job, placement) and not job.request.violations(view, placement)
        assert entry["predicted"] == pytest.approx(SPEED.predict(busy, job, placement), rel=1e-5)
    # the advised layout is the one the decision would have pinned, node by node
    assert sorted(placement_of(job, recorded["advised"]["tasks"]).per_node()) == sorted(
        Placement.of(job, [n for _, n in decision.would]).per_node() if decision.would else [])


def test_the_neighbours_of_the_moment_enter_the_prediction(busy):
    """The same layout predicted on the empty cluster is another number: what was predicted then
    cannot be had again by rebuilding on the empty cluster."""
    service = AdviceService(Advisor(PackPolicy(), predictor=SPEED), express, model_version="m1")
    _, decision, job, _ = service.advise(busy, fields(3), "observe")
    advised = layouts(decision.evidence)["advised"]
    assert "gpu01" in {n for n, _, _ in advised["tasks"]}  # pack fills the half-taken node first
    empty = SPEED.predict(ClusterSnapshot.empty(default_cluster()), job, placement_of(job, advised["tasks"]))
    assert advised["predicted"] != pytest.approx(empty, rel=1e-3)


def test_a_request_naming_its_nodes_records_no_modelled_slurm_choice_and_no_alternatives(busy):
    service = AdviceService(Advisor(SpreadPolicy(), predictor=SPEED), express, model_version="m1")
    _, decision, _, _ = service.advise(busy, fields(3, req_nodes="gpu02,gpu03,gpu04,gpu06"), "observe")
    assert decision.evidence["slurm"].startswith("not modelled") and list(layouts(decision.evidence)) == ["advised"]


def test_a_heuristic_policy_is_predicted_by_the_daemons_model_or_not_at_all(busy):
    with_model = AdviceService(Advisor(PackPolicy()), express, speed=(SPEED, "pkg"))
    without = AdviceService(Advisor(PackPolicy()), express)
    ev = with_model.advise(busy, fields(3), "advise")[1].evidence
    assert ev["model"] == "pkg" and all(e["predicted"] > 0 for e in ev["layouts"])
    bare = without.advise(busy, fields(3), "advise")[1].evidence
    assert bare["model"] is None and all(e["predicted"] is None for e in bare["layouts"])
    assert without.advise(busy, fields(500), "advise")[1].evidence is None  # nothing to weigh


def test_the_canary_arm_records_the_canarys_own_predictions(busy, site_model_dir):
    canary_speed = speed_model_of(site_model_dir)
    service = AdviceService(Advisor(PackPolicy(), predictor=SPEED), express, model_version="active")
    service.canary = Canary("cand", Advisor(PackPolicy(), predictor=canary_speed), 0.5)
    seen = set()
    for i in range(40):
        decision_id = f"d-{i:012x}"
        _, decision, job, _ = service.advise(busy, fields(3), "observe", decision_id=decision_id)
        arm_speed = canary_speed if in_canary(decision_id, 0.5) else SPEED
        advised = layouts(decision.evidence)["advised"]
        assert decision.evidence["model"] == decision.model_version
        assert advised["predicted"] == pytest.approx(
            arm_speed.predict(busy, job, placement_of(job, advised["tasks"])), rel=1e-5)
        seen.add(decision.model_version)
    assert seen == {"active", "cand"}


def test_the_evidence_survives_the_spool(busy):
    service = AdviceService(Advisor(SpreadPolicy(), predictor=SPEED), express, model_version="m1")
    decision = service.advise(busy, fields(3), "observe")[1]
    assert decision.evidence is not None and decision_of_line(decision_line(decision)) == decision


def test_the_alternatives_are_bounded_by_the_config(busy):
    """evidence_alternatives = 0: the advised layout and Slurm's choice only (no extra cons_tres pass)."""
    counts = {}
    for most in (0, 1, 3):
        service = AdviceService(Advisor(SpreadPolicy(), predictor=SPEED), express, model_version="m1",
                                alternatives=most)
        recorded = layouts(service.advise(busy, fields(11), "observe")[1].evidence)
        counts[most] = len(recorded) - 2
        assert list(recorded)[:2] == ["advised", "slurm"] and counts[most] <= most
    assert counts[0] == 0 and counts[3] >= 1
