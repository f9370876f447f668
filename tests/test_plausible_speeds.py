"""The one rule for plausible speeds: what a report must be, what training can use."""
from __future__ import annotations

import math
import threading
from collections import Counter

import pytest

from slurm_advisor.domain import Job, Placement, Resources, RunningJob, SpeedSample
from slurm_advisor.plausible_speeds import (
    TypeSpeeds,
    describe_skipped,
    sample_problem,
    speed_problem,
    usable_samples,
)


@pytest.mark.parametrize(("speed", "words"), [(0.0, "below 1e-06"), (1e-300 / 1e300, "below 1e-06"),
                                              (-1.0, "below"), (math.nan, "not finite"), (math.inf, "not finite"),
                                              (2e6, "above 1e+06 (plausible: 1e-06 to 1e+06 it/s)")])
def test_implausible_speeds_name_the_range(speed, words):
    assert words in speed_problem(speed)


@pytest.mark.parametrize("speed", [1e-6, 0.5, 1e6])
def test_the_range_holds_its_bounds(speed):
    assert speed_problem(speed) is None


def test_a_type_is_judged_only_once_it_has_enough_known_speeds():
    speeds = TypeSpeeds(factor=10, min_known=3)
    for _ in range(2):
        speeds.add("bert", 4.0)
    assert speeds.problem("bert", 1e5) is None  # 2 known: too few to judge
    speeds.add("bert", 4.0)
    assert "more than 10x from the median 4 of the 3 known bert speeds (plausible: 0.4 to 40" in \
        speeds.problem("bert", 41.0)
    assert speeds.problem("bert", 40.0) is None and speeds.problem("bert", 0.4) is None
    assert speeds.problem("vgg16", 1e5) is None  # another type knows nothing yet


def test_the_window_keeps_only_the_most_recent_speeds():
    speeds = TypeSpeeds(factor=10, min_known=3, window=3)
    for value in (1.0, 1.0, 1.0, 100.0, 100.0, 100.0):
        speeds.add("bert", value)
    assert speeds.problem("bert", 500.0) is None and speeds.problem("bert", 1.0) is not None


def test_concurrent_reporters_lose_no_speed():
    speeds = TypeSpeeds(window=100_000)
    threads = [threading.Thread(target=lambda: [speeds.add("bert", 1.0) for _ in range(1000)]) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(speeds._speeds["bert"]) == 8000


def _sample(speed: float) -> SpeedSample:
    job = Job("1", "bert", 0, 1, Resources(1, 0, 100), Resources(1, 1, 100), 10.0)
    return SpeedSample(0.0, RunningJob(job, Placement.of(job, ["n1"]), 0.0), (), (), speed)


def test_usable_samples_counts_each_reason():
    samples = [_sample(s) for s in (1.0, 0.0, -2.0, math.nan, math.inf, 1e9, 3.0)]
    kept, skipped = usable_samples(samples)
    assert [s.speed for s in kept] == [1.0, 3.0]
    assert skipped == Counter({"non-positive speed": 2, "non-finite speed": 2, "speed outside 1e-06 to 1e+06 it/s": 1})
    assert sample_problem(samples[0]) is None
    assert describe_skipped(skipped) == ("skipped 5 samples training cannot use: 2 non-finite speed, "
                                         "2 non-positive speed, 1 speed outside 1e-06 to 1e+06 it/s")
    assert describe_skipped({"unreadable": 1}) == "skipped 1 sample training cannot use: 1 unreadable"
