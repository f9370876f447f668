"""What a retrain learns from and is judged on, read from the store.

**Samples** (live and sim): those training can use (``training_samples``: a stored sample whose
speed is not finite, not positive or outside the plausible range, or whose row does not decode,
is skipped, counted by reason and named in the log and the summary), ordered by time, sim
samples before live ones (sim samples are the
bootstrap recorded before the site ran live, and their clock starts at 0 while live samples
carry epoch times); the last ``holdout_fraction`` of that order, at most ``holdout_max`` samples, is
held out and never trained on (a share alone would grow with the store: a site a year in would never
train on its last months); so is every sample of the owners kept for the judge (retrain/owners.py).

**The job mix** is the most recent advised jobs, replayed from the decisions: each decision's
request becomes a Job exactly as the daemon built it (``job_from_request``), it arrives at its
decision's time (relative to the first), and its length in iterations is, in this order:
the reports' mean speed x its run time from its outcome (start to end), when both are known;
else the iterations its reports add up to (it ran at least that long); else the marker's
``iters=``; else the median length of the jobs whose length is known.
"""
from __future__ import annotations

import statistics
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from slurm_advisor.daemon.service import job_from_request
from slurm_advisor.domain import Job, SpeedSample
from slurm_advisor.errors import InputError
from slurm_advisor.plausible_speeds import describe_skipped, usable_samples
from slurm_advisor.slurm.marker import parse_marker

MIN_TRAIN_SAMPLES = 20  # the speed model's own minimum


@dataclass(frozen=True)
class SampleSplit:
    train: list[SpeedSample]
    holdout: list[SpeedSample]

    def describe(self, part: str) -> dict:
        samples = self.train if part == "train" else self.holdout
        return {"samples": len(samples), "live": sum(s.source == "live" for s in samples),
                "first_time": min((s.time for s in samples), default=None),
                "last_time": max((s.time for s in samples), default=None)}


@dataclass
class JobMix:
    jobs: list[Job]
    lengths: dict[str, int] = field(default_factory=dict)  # how each job's length was known -> count
    skipped: int = 0  # decisions whose request no longer builds a job


def training_samples(store, log) -> tuple[list[SpeedSample], dict[str, int]]:
    """The stored samples training can use, and how many others were skipped for each reason
    (logged in one line when any were)."""
    skipped: dict[str, int] = {}
    samples, implausible = usable_samples(store.load_samples(skipped=skipped))
    skipped = dict(implausible + Counter(skipped))
    if skipped:
        log(describe_skipped(skipped))
    return samples, skipped


def split_by_time(samples: Sequence[SpeedSample], holdout_fraction: float,
                  holdout_max: int | None = None) -> SampleSplit:
    """The oldest samples to train on, the most recent ``holdout_fraction`` (at most ``holdout_max``)
    held out."""
    ordered = sorted(samples, key=lambda s: (s.source == "live", s.time))
    cap = len(ordered) if holdout_max is None else holdout_max
    held = min(len(ordered), cap, max(1, round(len(ordered) * holdout_fraction)))
    split = SampleSplit(ordered[:len(ordered) - held], ordered[len(ordered) - held:])
    if len(split.train) < MIN_TRAIN_SAMPLES:
        raise InputError(f"only {len(samples)} speed samples ({len(split.train)} after holding out "
                         f"{held}); at least {MIN_TRAIN_SAMPLES} are needed to train on")
    return split


def split_by_time_and_owner(samples: Sequence[SpeedSample], holdout_fraction: float, holdout_max: int | None,
                            owner: Callable[[SpeedSample], int | None], judges: frozenset[int]) -> SampleSplit:
    """``split_by_time`` over the samples of owners not in ``judges``; every sample of ``judges``
    is held out as well (never trained on: retrain/owners.py)."""
    judged = [s for s in samples if owner(s) in judges]
    split = split_by_time([s for s in samples if owner(s) not in judges], holdout_fraction, holdout_max)
    return SampleSplit(split.train, split.holdout + judged)


def recent_jobs(store, limit: int) -> JobMix:
    """The most recent ``limit`` advised jobs as the simulator's Jobs (see the module's doc)."""
    decisions = sorted(store.load_decisions(limit=limit), key=lambda d: (d.time, d.id))
    reports = defaultdict(list)
    for r in store.load_reports():
        if r.decision_id is not None:
            reports[r.decision_id].append(r)
    outcomes = {o.decision_id: o for o in store.load_outcomes() if o.decision_id is not None}
    mix, unknown = JobMix([]), []
    t0 = decisions[0].time if decisions else None
    for d in decisions:
        try:
            job = job_from_request(d.request, d.id)
            marker = parse_marker(d.request.get("comment"))
        except ValueError:
            mix.skipped += 1
            continue
        length, how = _length(reports.get(d.id, []), outcomes.get(d.id), marker.iters)
        job = replace(job, submit_time=(d.time - t0).total_seconds(), iterations=length or 1.0)
        mix.jobs.append(job)
        mix.lengths[how] = mix.lengths.get(how, 0) + 1
        if length is None:
            unknown.append(len(mix.jobs) - 1)
    missing = set(unknown)
    known = [j.iterations for i, j in enumerate(mix.jobs) if i not in missing]
    if unknown and not known:
        raise InputError(f"none of the {len(mix.jobs)} recent advised jobs has a known length: "
                         "give iters= in the marker or let the jobs report their speed")
    for i in unknown:
        mix.jobs[i] = replace(mix.jobs[i], iterations=statistics.median(known))
    return mix


def _length(reports, outcome, marker_iters: float | None) -> tuple[float | None, str]:
    iterations = sum(r.iterations for r in reports)
    seconds = sum(r.seconds for r in reports)
    ran = (outcome.end_time - outcome.start_time) if outcome is not None and outcome.start_time \
        and outcome.end_time else 0.0
    if seconds > 0 and ran > 0:
        return iterations / seconds * ran, "reports x outcome"
    if iterations > 0:
        return iterations, "reports"
    if marker_iters:
        return float(marker_iters), "marker"
    return None, "median"
