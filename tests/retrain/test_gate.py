"""The promotion decision on literal scores."""
from __future__ import annotations

import math

from slurm_advisor.retrain.gate import Scores, decide

H = 3600.0


def _decide(candidate: Scores, incumbent: Scores, margin: float = 0.02, max_mape: float = 0.5):
    return decide(candidate, incumbent, incumbent_name="the active model a", margin=margin, max_mape=max_mape)


def test_better_by_the_margin_with_no_worse_speed_model_is_promoted() -> None:
    verdict = _decide(Scores(90 * H, 0.20), Scores(100 * H, 0.25))
    assert verdict.promote
    assert "90.00 h vs 100.00 h" in verdict.reason and "10.0 % better" in verdict.reason


def test_a_win_smaller_than_the_margin_keeps_the_active_model() -> None:
    verdict = _decide(Scores(99 * H, 0.20), Scores(100 * H, 0.25))
    assert not verdict.promote and "not better by the margin of 2.0 %" in verdict.reason
    assert _decide(Scores(98 * H, 0.2), Scores(100 * H, 0.25)).promote  # exactly the margin is enough
    assert not _decide(Scores(101 * H, 0.2), Scores(100 * H, 0.25), margin=0.0).promote  # worse never


def test_a_worse_speed_model_keeps_the_active_model_even_with_a_better_jct() -> None:
    verdict = _decide(Scores(50 * H, 0.30), Scores(100 * H, 0.25))
    assert not verdict.promote and "MAPE 30.0 % vs 25.0 %" in verdict.reason


def test_first_model_against_slurm_default_has_no_mape_to_beat() -> None:
    sd = Scores(100 * H, None)
    assert decide(Scores(90 * H, 0.4), sd, incumbent_name="slurm-default", margin=0.02, max_mape=0.5).promote
    kept = decide(Scores(99 * H, 0.4), sd, incumbent_name="slurm-default", margin=0.02, max_mape=0.5)
    assert not kept.promote and "for slurm-default" in kept.reason


def test_an_insane_speed_model_is_never_promoted() -> None:
    for mape in (0.9, math.inf, math.nan, None):
        verdict = _decide(Scores(10 * H, mape), Scores(100 * H, 2.0), max_mape=0.5)
        assert not verdict.promote and "misses the held-out speeds" in verdict.reason


def test_a_candidate_that_finishes_nothing_is_not_promoted() -> None:
    assert not _decide(Scores(math.inf, 0.1), Scores(100 * H, 0.2)).promote


def test_a_candidate_much_worse_under_the_prior_is_kept_whatever_the_fitted_judge_says() -> None:
    """Reports wrong in a consistent way fool the judge fitted on them, not the prior."""
    fooled = Scores(10 * H, 0.10, prior_jct=350 * H)       # "90 % better" to the fitted judge
    verdict = _decide(fooled, Scores(100 * H, 0.25, prior_jct=100 * H))
    assert not verdict.promote
    assert "under the prior" in verdict.reason and "250.0 % worse" in verdict.reason
    assert "at most 10.0 % allowed" in verdict.reason


def test_a_little_worse_under_the_prior_is_allowed_and_the_judge_being_the_prior_skips_it() -> None:
    assert _decide(Scores(90 * H, 0.2, prior_jct=109 * H), Scores(100 * H, 0.25, prior_jct=100 * H)).promote
    assert not _decide(Scores(90 * H, 0.2, prior_jct=111 * H), Scores(100 * H, 0.25, prior_jct=100 * H)).promote
    tight = decide(Scores(90 * H, 0.2, prior_jct=101 * H), Scores(100 * H, 0.25, prior_jct=100 * H),
                   incumbent_name="x", margin=0.02, max_mape=0.5, prior_tolerance=0.0)
    assert not tight.promote
    assert _decide(Scores(90 * H, 0.2), Scores(100 * H, 0.25)).promote  # no prior scores: the judge was the prior
