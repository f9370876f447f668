"""One retrain, end to end, under the retrain lock:

1. repair the ``active`` pointer if a crash left it behind the registry; remove dead candidates;
2. read the samples; leave out the owners whose reports contradict Slurm's clock and cap each
   owner's share (``owners``); hold out the most recent share and every sample of the judge's
   own owners (``data.split_by_time_and_owner``); read the recent job mix (``data.recent_jobs``,
   or a given trace);
3. fit the speed model and fine-tune the policy (``training.train.train``), warm-started from the
   active model's policy where one loads (same feature schema; its width is kept);
4. write the candidate to a new version directory, atomically (``versions.publish``);
5. score candidate and incumbent (the active model, else slurm-default) under the judge fitted
   on the held-out samples and under the prior, which read no report (``evaluate``, ``gate``);
6. register the candidate with its data range and metrics; if the gate says so, promote it:
   the registry first (one transaction), then the ``active`` pointer (one rename) -- or, with
   ``canary``, make it the canary (the ``canary`` pointer) for measured outcomes to decide.

Nothing here changes the active model before step 6, so a crash or kill -9 at any earlier
moment leaves it serving; a crash inside step 6 leaves the registry ahead of the pointer,
which the next retrain repairs in step 1.
"""
from __future__ import annotations

import math
import shutil
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from enum import IntEnum
from pathlib import Path

from tqdm import tqdm

from slurm_advisor.domain import Job, Node
from slurm_advisor.domain.model_record import ModelRecord
from slurm_advisor.errors import InputError
from slurm_advisor.learned.hyper import Hyper
from slurm_advisor.models import versions
from slurm_advisor.retrain.data import (
    MIN_TRAIN_SAMPLES,
    JobMix,
    SampleSplit,
    recent_jobs,
    split_by_time_and_owner,
    training_samples,
)
from slurm_advisor.retrain.gate import Scores, Verdict, decide
from slurm_advisor.retrain.lock import RetrainLock
from slurm_advisor.retrain.owners import OwnerRules, Owners, assess, weighed
from slurm_advisor.store import Store

DEFAULT_MODELS_DIR = Path("/var/lib/slurm-advisor/models")


class RetrainExit(IntEnum):
    """``slurm-advisor retrain``'s exit statuses."""
    PROMOTED = 0   # the candidate is the active model now
    ERROR = 1      # an unexpected failure (the active model is unchanged)
    BAD_INPUT = 2  # bad options, no database, too few samples or jobs
    KEPT = 3       # the candidate was not better: the active model stays (the reason says why)
    LOCKED = 4     # another retrain holds the lock on the models directory


@dataclass(frozen=True)
class RetrainSettings:
    margin: float = 0.02            # the candidate's avg JCT must be this share better
    holdout_fraction: float = 0.2   # the most recent share of samples, never trained on
    holdout_max: int = 5000         # ... but at most this many (enough to fit the judge on)
    max_mape: float = 0.5           # a candidate missing held-out speeds by more is never promoted
    recent_jobs: int = 300          # advised jobs in the replayed mix
    prior_tolerance: float = 0.1    # the candidate may be at most this share worse under the prior
    canary: bool = False            # an accepted candidate becomes the canary, not the active model
    holds: bool = True              # judged as served with holds (enforce mode); False: advise mode
    owners: OwnerRules = field(default_factory=OwnerRules)
    hyper: Hyper = field(default_factory=Hyper)


@dataclass
class RetrainResult:
    status: RetrainExit
    reason: str
    candidate: str | None = None
    active_before: str | None = None
    metrics: dict = field(default_factory=dict)
    data: dict = field(default_factory=dict)
    seconds: float = 0.0
    canary: bool = False  # promoted as the canary: `slurm-advisor canary` decides it

    @property
    def promoted(self) -> bool:
        return self.status is RetrainExit.PROMOTED

    def summary(self) -> dict:
        """The one object ``--json`` prints."""
        active = self.candidate if self.promoted and not self.canary else self.active_before
        return {"promoted": self.promoted, "canary": self.canary, "exit_code": int(self.status), "reason": self.reason,
                "candidate": self.candidate, "active_before": self.active_before, "active": active,
                **self.metrics, "data": self.data, "seconds": round(self.seconds, 1)}


def run_retrain(db: str, models_dir: Path, nodes: Sequence[Node], settings: RetrainSettings, *,
                trace: Sequence[Job] | None = None, log: Callable[[str], None] = print,
                progress: bool | None = None) -> RetrainResult:
    """Raises AnotherRetrain (the lock is held) and InputError (bad inputs); see the module doc."""
    started = time.time()
    models_dir = Path(models_dir)
    with RetrainLock(models_dir), Store.open(db, create=False) as store:
        if versions.remove_stale_candidates(models_dir):
            log("removed the unfinished candidate of an earlier retrain")
        active = _reconcile(store, models_dir, log)
        samples, skipped = training_samples(store, log)
        owners = _owners(store, settings.owners, log)
        samples = weighed(samples, owners, settings.owners)
        if owners.discounted and len(samples) < MIN_TRAIN_SAMPLES:
            raise InputError(f"the reports of {len(owners.discounted)} of {owners.describe()['owners']} owners "
                             f"contradict Slurm's clock and were left out; {len(samples)} samples remain: "
                             "nothing trustworthy to train on (the lines above name them and why)")
        split = split_by_time_and_owner(samples, settings.holdout_fraction, settings.holdout_max,
                                        owners.owner, owners.judges)
        mix = JobMix(list(trace), {"trace": len(trace)}) if trace else recent_jobs(store, settings.recent_jobs)
        if not mix.jobs:
            raise InputError("no advised jobs in the store to replay; pass --trace FILE for a job mix")
        result = _retrain(store, models_dir, nodes, settings, split, mix, active, log, progress,
                          {"skipped_samples": skipped, "owners": owners.describe()})
    result.seconds = time.time() - started
    return result


def _retrain(store, models_dir: Path, nodes, settings: RetrainSettings, split: SampleSplit, mix: JobMix,
             active: ModelRecord | None, log, progress, read: dict) -> RetrainResult:
    from slurm_advisor.training.judge import for_retrain

    active_dir = Path(active.directory) if active else None
    data = {"train": split.describe("train"), "holdout": split.describe("holdout"), "jobs": len(mix.jobs),
            "job_lengths": mix.lengths, "skipped_decisions": mix.skipped, **read}
    log(f"retrain: {data['train']['samples']} samples to train on, {data['holdout']['samples']} held out, "
        f"{len(mix.jobs)} jobs in the mix, active model: {active.version if active else 'none (slurm-default)'}")
    report, hp = _train(split, nodes, mix.jobs, settings.hyper, active_dir, log, progress)
    candidate, existed = _write_candidate(models_dir, report, hp, data, active)
    if existed and store.model(candidate) is not None:
        return RetrainResult(RetrainExit.KEPT, f"the candidate is identical to the registered model {candidate}",
                             candidate, active and active.version, data=data)
    judge = for_retrain(split.holdout, hp)
    log(f"judge: {judge.description}; each model as served "
        f"{'with its holds (enforce mode)' if settings.holds else 'in advise mode (a hold is left to Slurm)'}")
    verdict, metrics = _evaluate(nodes, mix.jobs, split, judge, models_dir / candidate, active, settings, hp.seed)
    metrics["candidate_metrics"]["deploys"] = f"{report.deploy} at patience {report.patience}"
    log(f"{'promote' if verdict.promote else 'keep the active model'}: {verdict.reason}")
    train_part = data["train"]
    store.register_model(ModelRecord(
        candidate, str(models_dir / candidate), "candidate", time.time(), train_part["first_time"],
        train_part["last_time"], train_part["samples"], train_part["live"],
        {**metrics, "holdout": data["holdout"], "owners": data["owners"], "promoted": verdict.promote,
         "reason": verdict.reason}))
    reason = verdict.reason
    if verdict.promote and settings.canary:
        # measured outcomes decide from here (retrain/canary.py); the active model serves the rest
        store.set_model_status(candidate, "canary")
        versions.point_canary(models_dir, candidate)
        reason = f"{reason}; serving a share of the jobs as a canary until measured outcomes decide"
    elif verdict.promote:
        store.activate(candidate, "retrain", note=verdict.reason)  # one transaction: the old active retires
        versions.point_active(models_dir, candidate)
    status = RetrainExit.PROMOTED if verdict.promote else RetrainExit.KEPT
    return RetrainResult(status, reason, candidate, active and active.version, metrics, data,
                         canary=verdict.promote and settings.canary)


def _owners(store, rules: OwnerRules, log) -> Owners:
    """The reports' owners as the rules judge them (retrain/owners.py), the discounted ones logged."""
    reports = store.load_reports()
    ids = {r.decision_id for r in reports if r.decision_id}
    decisions = [d for d in map(store.decision, sorted(ids)) if d is not None]
    owners = assess(reports, store.load_outcomes(), decisions, rules)
    for uid, why in sorted(owners.discounted.items()):
        log(f"reports of uid {uid} left out: {why}")
    if owners.judges:
        log(f"the judge alone learns from uid {', '.join(map(str, sorted(owners.judges)))}")
    return owners


def _reconcile(store, models_dir: Path, log) -> ModelRecord | None:
    """The registry's active model (None if there is none or its files are gone), with the
    ``active`` pointer made to agree with it."""
    active = store.active_model()
    if active is None:
        _reconcile_default(store, models_dir, log)
        return None
    if not Path(active.directory).is_dir():
        log(f"the registry's active model {active.version} has no directory {active.directory}: "
            "judged against slurm-default")
        return None
    inside = Path(active.directory).resolve() == (models_dir / active.version).resolve()
    if inside and versions.active_version(models_dir) != active.version:
        versions.point_active(models_dir, active.version)
        log(f"repaired {models_dir / versions.ACTIVE} -> {active.version} (the registry's active model)")
    return active


def _reconcile_default(store, models_dir: Path, log) -> None:
    """After a rollback to the default model whose pointer move a crash cut short: the pointer
    made to name the default too (only then: a pointer with no registry behind it is left be)."""
    history = store.model_history()
    if history and history[-1].version is None and \
            versions.active_version(models_dir) not in (None, versions.DEFAULT):
        versions.point_active(models_dir, versions.DEFAULT)
        log(f"repaired {models_dir / versions.ACTIVE} -> {versions.DEFAULT} (the registry's rollback)")


def _train(split: SampleSplit, nodes, jobs, hp: Hyper, active_dir: Path | None, log, progress):
    from slurm_advisor.training.train import train

    init, hp = _warm_start(active_dir, hp, log)
    show = sys.stderr.isatty() if progress is None else progress
    with tqdm(total=hp.rl_episodes, desc="RL episodes", disable=not show, file=sys.stderr) as bar:
        report = train(split.train, nodes, jobs, hp, log=log, bar=bar, init_policy=init)
    return report, hp


def _warm_start(active_dir: Path | None, hp: Hyper, log):
    """The active model's policy network and the hyperparameters to fine-tune it with (its width)."""
    from slurm_advisor.learned.policy.features import FeatureSchema
    from slurm_advisor.training import checkpoint

    if active_dir is None:
        return None, hp
    try:
        ckpt = checkpoint.load(active_dir)
    except InputError as exc:
        log(f"no warm start: the active model does not load ({exc})")
        return None, hp
    if ckpt.schema.types != FeatureSchema().types:
        log("no warm start: the active model was trained for other job types")
        return None, hp
    return ckpt.policy, replace(hp, hidden=ckpt.hyper.hidden)


def _write_candidate(models_dir: Path, report, hp: Hyper, data: dict, active: ModelRecord | None):
    """(version, whether its directory existed already): the candidate, written atomically. An
    existing directory of that version holds the same files (the version is their hash)."""
    from slurm_advisor.training import checkpoint

    meta = {"speed_model": {"holdout_mape": report.speed_metrics["holdout_mape"],
                            "samples": report.speed_metrics["samples"]},
            **report.deployment_meta(), "retrain": {**data, "warm_start": active and active.version},
            "curve": report.curve}
    tmp = versions.new_candidate_dir(models_dir)
    try:
        checkpoint.save(tmp, report.policy, report.speed, report.schema, hp, meta, lif_profile=report.lif_profile)
        version = versions.model_version(tmp)
        versions.publish(tmp, models_dir, version)
    except FileExistsError:
        shutil.rmtree(tmp, ignore_errors=True)
        return version, True
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return version, False


def _evaluate(nodes, jobs, split: SampleSplit, judge, candidate_dir: Path, active: ModelRecord | None,
              settings: RetrainSettings, seed: int) -> tuple[Verdict, dict]:
    from slurm_advisor.retrain.evaluate import holdout_mape, replay_jct
    from slurm_advisor.training.judge import PRIOR

    def prior(model_dir: Path | None) -> float | None:  # None: the judge is the prior itself
        if judge.model is PRIOR.model:
            return None
        return replay_jct(nodes, jobs, PRIOR, model_dir, seed, holds=settings.holds)

    baseline = replay_jct(nodes, jobs, judge, None, seed)
    candidate = Scores(replay_jct(nodes, jobs, judge, candidate_dir, seed, holds=settings.holds),
                       holdout_mape(candidate_dir, split.holdout), prior(candidate_dir))
    name, incumbent = "slurm-default", Scores(baseline, None, prior(None))
    if active is not None:
        try:
            incumbent = Scores(replay_jct(nodes, jobs, judge, Path(active.directory), seed, holds=settings.holds),
                               holdout_mape(Path(active.directory), split.holdout), prior(Path(active.directory)))
            name = f"the active model {active.version}"
        except InputError as exc:  # a broken active model: the candidate must beat Slurm's own rule
            name = f"slurm-default (the active model {active.version} does not load: {exc})"
    verdict = decide(candidate, incumbent, incumbent_name=name, margin=settings.margin, max_mape=settings.max_mape,
                     prior_tolerance=settings.prior_tolerance)
    metrics = {"judge": judge.description, "margin": settings.margin,
               "candidate_metrics": _scores(candidate), "incumbent": name, "incumbent_metrics": _scores(incumbent),
               "slurm_default_avg_jct": _finite(baseline)}
    return verdict, metrics


def _scores(s: Scores) -> dict:
    return {"avg_jct": _finite(s.avg_jct), "holdout_mape": None if s.mape is None else _finite(s.mape),
            "prior_avg_jct": None if s.prior_jct is None else _finite(s.prior_jct)}


def _finite(x: float) -> float | None:
    return round(float(x), 4) if math.isfinite(x) else None
