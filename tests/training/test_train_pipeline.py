"""Training end to end on a tiny budget: it runs, learns something, and deploys as `learned`."""
from __future__ import annotations

import math
import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch

from slurm_advisor.domain import ClusterSnapshot
from slurm_advisor.learned.hyper import Hyper
from slurm_advisor.policies import PolicyContext, make_policy
from slurm_advisor.policies.learned.agent import LearnedPolicy
from slurm_advisor.training import checkpoint
from slurm_advisor.training.train import (
    TEACHERS,
    Ablation,
    TrainReport,
    train,
    validation_traces,
    window,
    worst_ratio,
)

pytestmark = pytest.mark.slow  # every test here trains

HP = replace(Hyper(seed=1), speed_epochs=10, speed_hidden=32, hidden=16, warm_episodes=1, warm_epochs=8,
             rl_episodes=3, episode_jobs=20, updates_per_episode=2, minibatch=64)


@pytest.fixture(scope="module")
def trained(samples, small_nodes, small_jobs):
    lines: list[str] = []
    report = train(samples, small_nodes, small_jobs, HP, log=lines.append)
    return report, lines


def test_warm_start_imitation_loss_falls(trained) -> None:
    _, lines = trained
    warm = next(line for line in lines if line.startswith("warm start"))
    first, last = map(float, re.search(r"loss ([\d.]+) -> ([\d.]+)", warm).groups())
    assert last < first


def test_the_search_is_distilled_into_the_network_before_rl(trained) -> None:
    _, lines = trained
    distilled = next(line for line in lines if line.startswith("distilled the search"))
    labels = int(re.search(r"(\d+) labels over (\d+) DAgger rounds", distilled).group(1))
    assert labels >= HP.episode_jobs  # a label per task of every job the search started, per round
    assert lines.index(distilled) > next(i for i, line in enumerate(lines) if line.startswith("warm start"))


def test_without_rl_the_distilled_network_is_still_a_candidate(samples, small_nodes, small_jobs) -> None:
    lines: list[str] = []
    report = train(samples, small_nodes, small_jobs, HP, Ablation(rl=False), log=lines.append)
    assert [c["episode"] for c in report.curve] == [0] and report.best_validation_jct > 0
    assert any(line.startswith("distilled the search") for line in lines)
    assert report.candidates[("network", 0.0)][0] == report.best_validation_jct


def test_curve_has_one_point_per_episode_plus_the_start(trained) -> None:
    report, _ = trained
    assert [c["episode"] for c in report.curve] == list(range(HP.rl_episodes + 1))
    assert report.curve[0]["episode_jct"] is None
    validated = [c["validation_jct"] for c in report.curve if c["validation_jct"] is not None]
    # validated at the start, every `validate_every` episodes and after the last one
    assert report.curve[0]["validation_jct"] is not None and report.curve[-1]["validation_jct"] is not None
    assert all(v > 0 for v in validated)
    for point in report.curve[1:]:
        assert point["episode_jct"] > 0
        assert {"actor", "critic", "entropy"} <= set(point)
    assert report.best_validation_jct == min(validated)


def test_every_patience_level_is_replayed_for_network_and_teacher(trained) -> None:
    """... and the search over the network (which holds by itself: no patience level)."""
    from slurm_advisor.policies.patience import PATIENCE_LEVELS
    report, _ = trained
    expected = {(p, k) for p in ("network", report.teacher) for k in PATIENCE_LEVELS} | {("search", 0.0)}
    assert set(report.candidates) == expected
    # the network's replay of the trace as logged is the RL model selection's (determinism)
    assert report.candidates[("network", 0.0)][0] == report.best_validation_jct
    assert all(len(v) == 2 for v in report.candidates.values())  # as logged and sped up
    ref = report.teacher_scores[report.teacher]
    assert worst_ratio(report.candidates[report.chosen], ref) == min(
        worst_ratio(v, ref) for v in report.candidates.values())
    assert (report.deploy, report.patience) in {report.chosen, (report.teacher, 0.0)}
    assert set(report.judge_scores) == {"chosen", "teacher"}
    # learned-fast's deployment: never the search; the deployed one when that is not the search
    assert report.fast[0] != "search"
    if report.deploy != "search":
        assert report.fast == (report.deploy, report.patience)
    else:
        assert report.fast in {report.chosen_without_search, (report.teacher, 0.0)}
    assert report.deployment_meta()["fast_deploy"] == {"deploy": report.fast[0], "patience": report.fast[1]}


def test_report_names_a_teacher_and_a_fitted_speed_model(trained, samples) -> None:
    report, lines = trained
    assert report.teacher in TEACHERS and set(report.teacher_scores) == set(TEACHERS)
    ref = report.teacher_scores["slurm-default"]
    best = min(worst_ratio(v, ref) for v in report.teacher_scores.values())
    assert report.teacher == "slurm-default" or worst_ratio(report.teacher_scores[report.teacher], ref) == best
    # the sped-up trace is replayed too (a second, different score). Not "always longer": on this
    # saturated 4-node fixture the queue is full either way, and with time limits and backfill
    # faster arrivals can come out shorter (slurm-default 339.7 h as logged, 330.6 h sped up);
    # that its submit times are compressed is test_validation_replays_the_trace_as_logged_and_sped_up's.
    assert any(fast != logged for logged, fast in report.teacher_scores.values())
    assert report.speed_metrics["samples"] == len(samples)
    assert math.isfinite(report.speed_metrics["holdout_mape"])
    assert report.seconds > 0 and any(line.startswith("speed model") for line in lines)


def test_trained_policy_loads_as_learned(trained, tmp_path: Path, small_nodes, small_jobs) -> None:
    report, _ = trained
    directory = checkpoint.save(tmp_path / "m", report.policy, report.speed, report.schema, HP, {})
    policy = make_policy("learned", PolicyContext(model_dir=directory))
    assert isinstance(policy, LearnedPolicy) and policy.name == "learned" and policy.mode == "greedy"
    snap = ClusterSnapshot.empty(small_nodes)
    for job in small_jobs[:10]:
        placement = policy.place(snap, job, np.random.default_rng(0))
        if placement is not None:
            assert snap.fits(job, placement)
            snap = snap.with_job(job, placement)
    assert snap.running  # it placed something


def test_same_seed_same_training(samples, small_nodes, small_jobs, trained) -> None:
    report, _ = trained
    again = train(samples, small_nodes, small_jobs, replace(HP, rl_episodes=1), log=lambda _: None)
    assert again.speed_metrics == report.speed_metrics and again.teacher_scores == report.teacher_scores
    assert again.curve[0] == report.curve[0]  # the same start
    # and the same first episode (validated in `again` only because it is its last)
    drop = {"validation_jct"}
    assert {k: v for k, v in again.curve[1].items() if k not in drop} == \
        {k: v for k, v in report.curve[1].items() if k not in drop}


def test_ablations_without_replay_exploration_warm_start_and_distillation_still_train(samples, small_nodes,
                                                                                       small_jobs) -> None:
    lines: list[str] = []
    ablation = Ablation(replay=False, exploration=False, warm_start=False, distill=False)
    report = train(samples, small_nodes, small_jobs, replace(HP, rl_episodes=1), ablation, log=lines.append)
    assert len(report.curve) == 2 and report.curve[1]["episode_jct"] > 0
    assert not any(line.startswith(("warm start", "distilled")) for line in lines)  # no imitation at all
    assert all(torch.isfinite(p).all() for p in report.policy.parameters())


def test_no_holding_never_holds(samples, small_nodes, small_jobs) -> None:
    from slurm_advisor.training.train import deployable, simulate

    report = train(samples, small_nodes, small_jobs, replace(HP, rl_episodes=1), Ablation(holding=False),
                   log=lambda _: None)
    assert report.candidates and {k for _, k in report.candidates} == {0.0}
    assert report.patience == 0.0 and report.deployment_meta()["patience"] == 0.0
    fitted = report.speed
    policy = deployable(report.policy, report.schema, report.deploy, report.patience, fitted)
    assert simulate(small_nodes, small_jobs, policy, fitted, HP.seed).holds == 0


def test_holding_only_trains_no_network(samples, small_nodes, small_jobs) -> None:
    lines: list[str] = []
    report = train(samples, small_nodes, small_jobs, HP, Ablation(network=False), log=lines.append)
    assert report.curve == []  # no RL episode ran
    assert not any(line.startswith(("warm start", "distilled")) for line in lines)
    assert {p for p, _ in report.candidates} == {report.teacher}  # the network is never a candidate
    assert report.deploy == report.teacher and report.deploy != "network"


def test_window_shifts_submit_times_to_zero(small_jobs) -> None:
    part = window(small_jobs, 5, 10)
    assert [j.id for j in part] == [j.id for j in small_jobs[5:15]]
    assert part[0].submit_time == 0.0
    assert part[3].submit_time == small_jobs[8].submit_time - small_jobs[5].submit_time


def test_validation_replays_the_trace_as_logged_and_sped_up(small_jobs) -> None:
    logged, fast = validation_traces(small_jobs, 1.5)
    assert logged == list(small_jobs)
    assert [j.id for j in fast] == [j.id for j in small_jobs]
    assert [j.submit_time for j in fast] == [j.submit_time / 1.5 for j in small_jobs]


def test_teacher_is_slurm_default_unless_another_is_clearly_better_on_every_trace() -> None:
    from slurm_advisor.training.train import pick_teacher
    sd = (100.0, 200.0)
    assert pick_teacher({"slurm-default": sd, "pack": (99.0, 198.0), "spread": (150.0, 300.0)}) == "slurm-default"
    assert pick_teacher({"slurm-default": sd, "pack": (80.0, 180.0), "spread": (150.0, 300.0)}) == "pack"
    # a clear win as logged that loses when arrivals come faster is no win
    assert pick_teacher({"slurm-default": sd, "tetris": (70.0, 210.0)}) == "slurm-default"
    # the best worst case wins, not the best single figure
    assert pick_teacher({"slurm-default": sd, "tetris": (50.0, 190.0), "pack": (90.0, 170.0)}) == "pack"


def _report(teacher: str, candidates: dict) -> TrainReport:
    return TrainReport(None, None, None, {}, teacher, {teacher: candidates[(teacher, 0.0)]}, candidates=candidates)


def test_promotion_needs_both_the_fitted_model_and_the_judge() -> None:
    report = _report("slurm-default", {("network", 0.0): (80.0, 160.0), ("slurm-default", 0.0): (100.0, 200.0)})
    assert report.promotion(0.03) == ("network", 0.0)  # no judge: the fitted model decides
    report.judge_scores = {"chosen": (99.0, 190.0), "teacher": (100.0, 200.0)}
    assert report.promotion(0.03) == ("slurm-default", 0.0)  # the judge sees no clear win as logged
    report.judge_scores = {"chosen": (90.0, 180.0), "teacher": (100.0, 200.0)}
    assert report.promotion(0.03) == ("network", 0.0)
    report.candidates[("network", 0.0)] = (99.0, 160.0)
    assert report.promotion(0.03) == ("slurm-default", 0.0)  # the fitted model sees no clear win


def test_promotion_needs_a_win_on_the_sped_up_trace_too() -> None:
    report = _report("slurm-default", {("network", 0.0): (50.0, 199.0), ("slurm-default", 0.0): (100.0, 200.0)})
    report.judge_scores = {"chosen": (50.0, 150.0), "teacher": (100.0, 200.0)}
    assert report.promotion(0.03) == ("slurm-default", 0.0)


def test_ties_go_to_the_teacher_then_to_less_patience() -> None:
    report = _report("pack", {("network", 0.5): (60.0, 120.0), ("network", 0.3): (60.0, 120.0),
                              ("pack", 0.7): (60.0, 120.0), ("pack", 0.5): (60.0, 120.0), ("pack", 0.0): (100.0, 200.0)})
    assert report.chosen == ("pack", 0.5)
    del report.candidates[("pack", 0.5)], report.candidates[("pack", 0.7)]
    assert report.chosen == ("network", 0.3)


def test_the_best_worst_case_is_chosen() -> None:
    report = _report("slurm-default", {("network", 0.5): (40.0, 210.0), ("slurm-default", 0.3): (90.0, 170.0),
                                       ("slurm-default", 0.0): (100.0, 200.0)})
    assert report.chosen == ("slurm-default", 0.3)


def test_promotion_may_ship_the_teacher_with_patience_but_never_holds_unjudged() -> None:
    report = _report("slurm-default", {("network", 0.0): (95.0, 190.0), ("slurm-default", 0.0): (100.0, 200.0),
                                       ("slurm-default", 0.5): (60.0, 120.0), ("network", 0.5): (70.0, 140.0)})
    report.judge_scores = {"chosen": (50.0, 100.0), "teacher": (100.0, 200.0)}
    assert report.promotion(0.03) == ("slurm-default", 0.5)
    report.judge_scores = {"chosen": (100.0, 200.0), "teacher": (100.0, 200.0)}
    assert report.promotion(0.03) == ("slurm-default", 0.0)  # rejected: the plain teacher, no holding


def test_learned_fasts_pick_is_the_best_candidate_but_the_search_and_passes_the_same_gate() -> None:
    report = _report("slurm-default", {("search", 0.0): (50.0, 100.0), ("network", 0.5): (80.0, 150.0),
                                       ("slurm-default", 0.7): (70.0, 190.0), ("slurm-default", 0.0): (100.0, 200.0)})
    assert report.chosen == ("search", 0.0) and report.chosen_without_search == ("network", 0.5)
    judged = {"chosen": (85.0, 160.0), "teacher": (100.0, 200.0)}
    assert report.promotion(0.03, report.chosen_without_search, judged) == ("network", 0.5)
    judged = {"chosen": (99.0, 160.0), "teacher": (100.0, 200.0)}  # the judge sees no clear win
    assert report.promotion(0.03, report.chosen_without_search, judged) == ("slurm-default", 0.0)


def test_replays_under_one_model_share_its_isolated_speeds() -> None:
    from slurm_advisor.domain import Node
    from slurm_advisor.speedmodels.constant import ConstantSpeed
    from slurm_advisor.training.train import Replays

    nodes = (Node("n1", 8, 2, 32_000), Node("n2", 8, 2, 32_000))
    one, other = ConstantSpeed(), ConstantSpeed()
    replays = Replays(list(nodes))
    kept = replays._isolated_under(one)
    assert replays._isolated_under(one) is kept  # the same model: one set of speeds alone
    assert replays._isolated_under(other) is not kept and replays._isolated_under(other).model is other
    assert Replays(nodes)._isolated_under(one) is not kept  # another training run: its own
    assert kept.empty.nodes == nodes
