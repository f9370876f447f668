"""kill -9 at a random moment in a burst of advice and reports from several clients: after a
restart on the same store and spool, every acknowledged decision and report is stored, each
once, and the spool is empty again (benchmarks/kill_durability.py: the same, twenty times)."""
from __future__ import annotations

import random

import pytest
from kill_trials import run_trial


@pytest.mark.slow
def test_nothing_acknowledged_is_lost_to_kill_9(tmp_path):
    rng = random.Random(39)
    for n in range(3):
        work = tmp_path / f"trial{n}"
        work.mkdir()
        trial = run_trial(work, rng)
        assert trial.decisions_acked > 0 and trial.reports_acked > 0
        assert (trial.decisions_lost, trial.reports_lost, trial.reports_doubled) == (0, 0, 0), trial
        assert trial.spool_files_left == 0, trial
