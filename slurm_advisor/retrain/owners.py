"""Whose reports a retrain learns from, and how much each may weigh (pure; the store is read by
the caller).

A speed report's owner is the uid it came from (the socket's peer credentials or the MUNGE
credential); a live sample is owned by the owner of its job's reports. Reports are the users'
word, and a user's word can be wrong in a consistent way (a reporter that counts samples per node
and not per job, a bug, a lie), which the judge cannot see when it is fitted on the same word.
So, before training:

1. **Slurm's clock.** A job whose marker gave its length (``iters=``) and that Slurm saw complete
   has a run time Slurm measured. Its reports predict one: ``iters / reported speed``. An owner
   with ``min_checked`` or more such jobs of which more than ``max_contradicting`` (a share)
   predict less than ``low`` or more than ``high`` times Slurm's run time is *discounted*: none of
   that owner's samples are trained on or judged with, and the retrain's summary (and ``status``)
   names the owner and why. Jobs without ``iters=`` cannot be checked; the summary counts them.
2. **A cap.** No owner's live samples may be more than ``max_share`` of the live samples (or
   ``1/owners`` when there are too few owners for that): an owner over it keeps their newest.
   Samples recorded in simulation (the bootstrap) have no owner and are not capped.
3. **Judge owners.** With ``min_judge_owners`` or more owners, a quarter of them (chosen by a hash
   of the uid, so the same from one retrain to the next) are never trained on: every sample of
   theirs goes to the judge, beside the most recent samples of everyone else. One owner's
   consistent error then reaches either the candidate or the judge, not both.
"""
from __future__ import annotations

import hashlib
import statistics
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from slurm_advisor.domain import SpeedSample
from slurm_advisor.domain.decision import Decision
from slurm_advisor.domain.outcome import Outcome
from slurm_advisor.domain.speed_report import SpeedReport
from slurm_advisor.slurm.marker import parse_marker


@dataclass(frozen=True)
class OwnerRules:
    max_share: float = 0.25          # of the live samples, per owner
    low: float = 0.5                 # reports predicting under this share of Slurm's run time contradict it
    high: float = 2.0                # ... or over this many times it
    max_contradicting: float = 0.25  # an owner with a larger share of contradicting jobs is discounted
    min_checked: int = 3             # checked jobs needed before an owner can be discounted
    min_judge_owners: int = 3        # owners needed before some are kept for the judge alone


@dataclass
class Owners:
    """What the rules made of one store's reports."""
    of_job: dict[str, int]                                   # Slurm job id -> owner uid
    discounted: dict[int, str] = field(default_factory=dict)  # uid -> why
    judges: frozenset[int] = frozenset()                     # uids never trained on
    checked: dict[int, int] = field(default_factory=dict)     # uid -> jobs checked against Slurm's clock
    unchecked_jobs: int = 0                                  # jobs with reports but no iters= or no end
    capped: dict[int, int] = field(default_factory=dict)      # uid -> samples left out by the cap

    def owner(self, sample: SpeedSample) -> int | None:
        return self.of_job.get(sample.subject.job.id) if sample.source == "live" else None

    def describe(self) -> dict:
        return {"owners": len(set(self.of_job.values())), "judge_owners": sorted(self.judges),
                "discounted": {str(uid): why for uid, why in sorted(self.discounted.items())},
                "checked_jobs": sum(self.checked.values()), "unchecked_jobs": self.unchecked_jobs,
                "capped_samples": {str(uid): n for uid, n in sorted(self.capped.items())}}


def job_owners(reports: Iterable[SpeedReport]) -> dict[str, int]:
    """Each job's owner: the uid most of its reports came from."""
    votes: dict[str, Counter] = defaultdict(Counter)
    for r in reports:
        votes[r.job_id][r.uid] += 1
    return {job: counter.most_common(1)[0][0] for job, counter in votes.items()}


def clock_ratios(reports: Sequence[SpeedReport], outcomes: Iterable[Outcome],
                 decisions: Iterable[Decision]) -> tuple[dict[str, float], int]:
    """Per completed job with ``iters=`` and reports: the run time its reports predict over the one
    Slurm measured; and how many jobs with reports could not be checked."""
    iters = {}
    for d in decisions:
        try:
            iters[d.id] = parse_marker(d.request.get("comment")).iters
        except ValueError:
            continue
    done = {o.job_id: o for o in outcomes if o.state == "COMPLETED" and o.start_time and o.end_time
            and o.end_time > o.start_time}
    by_job: dict[str, list[SpeedReport]] = defaultdict(list)
    for r in reports:
        by_job[r.job_id].append(r)
    ratios, unchecked = {}, 0
    for job, rs in by_job.items():
        outcome, seconds = done.get(job), sum(r.seconds for r in rs)
        length = iters.get(rs[0].decision_id) if rs[0].decision_id else None
        done_iters = sum(r.iterations for r in rs)
        if outcome is None or not length or seconds <= 0 or done_iters <= 0:
            unchecked += 1
            continue
        ratios[job] = (length / (done_iters / seconds)) / (outcome.end_time - outcome.start_time)
    return ratios, unchecked


def discounted_owners(ratios: dict[str, float], of_job: dict[str, int], rules: OwnerRules
                      ) -> tuple[dict[int, str], dict[int, int]]:
    """(uid -> why, for owners whose reports contradict Slurm's clock; uid -> jobs checked)."""
    per_owner: dict[int, list[float]] = defaultdict(list)
    for job, ratio in ratios.items():
        if job in of_job:
            per_owner[of_job[job]].append(ratio)
    discounted = {}
    for uid, values in per_owner.items():
        bad = [v for v in values if not rules.low <= v <= rules.high]
        if len(values) >= rules.min_checked and len(bad) > rules.max_contradicting * len(values):
            discounted[uid] = (f"{len(bad)} of {len(values)} checked jobs' reports predict "
                               f"{statistics.median(bad):.2f}x the run time Slurm measured "
                               f"(allowed {rules.low:g}-{rules.high:g}x)")
    return discounted, {uid: len(v) for uid, v in per_owner.items()}


def judge_owners(uids: Iterable[int], rules: OwnerRules) -> frozenset[int]:
    """A quarter of the owners (at least one), by a hash of the uid; none with too few owners."""
    ordered = sorted(set(uids), key=lambda u: hashlib.sha256(str(u).encode()).hexdigest())
    if len(ordered) < rules.min_judge_owners:
        return frozenset()
    return frozenset(ordered[:max(1, len(ordered) // 4)])


def owner_cap(counts: dict[int, int], max_share: float) -> int:
    """The most samples one owner may keep: the largest c with c <= share x sum(min(n, c))."""
    if len(counts) < 2:
        return max(counts.values(), default=0)
    share = max(max_share, 1.0 / len(counts))
    low, high = min(counts.values()), max(counts.values())
    while low < high:
        c = (low + high + 1) // 2
        if c <= share * sum(min(n, c) for n in counts.values()) + 1e-9:
            low = c
        else:
            high = c - 1
    return low


def assess(reports: Sequence[SpeedReport], outcomes: Iterable[Outcome], decisions: Iterable[Decision],
           rules: OwnerRules) -> Owners:
    of_job = job_owners(reports)
    ratios, unchecked = clock_ratios(reports, outcomes, decisions)
    discounted, checked = discounted_owners(ratios, of_job, rules)
    judges = judge_owners((u for u in of_job.values() if u not in discounted), rules)
    return Owners(of_job, discounted, judges, checked, unchecked)


def weighed(samples: Sequence[SpeedSample], owners: Owners, rules: OwnerRules) -> list[SpeedSample]:
    """``samples`` less the discounted owners', each owner capped (newest kept); order kept. How
    many each capped owner lost is recorded in ``owners.capped`` (the summary's ``capped_samples``)."""
    kept = [s for s in samples if owners.owner(s) not in owners.discounted]
    counts = Counter(o for s in kept if (o := owners.owner(s)) is not None)
    cap = owner_cap(dict(counts), rules.max_share)
    over = {uid for uid, n in counts.items() if n > cap}
    if not over:
        return kept
    newest: dict[int, set[int]] = {}
    for uid in over:
        mine = sorted((i for i, s in enumerate(kept) if owners.owner(s) == uid), key=lambda i: kept[i].time)
        newest[uid] = set(mine[len(mine) - cap:])
        owners.capped[uid] = len(mine) - cap
    return [s for i, s in enumerate(kept) if (o := owners.owner(s)) not in over or i in newest[o]]
