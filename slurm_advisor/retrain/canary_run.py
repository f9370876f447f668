"""One `slurm-advisor canary` step: decide the running canary, or watch the active model
(retrain/canary.py says how), and move the registry and the pointers the daemon follows.

Runs under the retrain lock, so that it never races a retrain's promotion. A canary's verdict is
also written beside it, ``models_dir/<version>/canary.json`` (not one of the files its version
hashes), for `status` and the admin who asks later.
"""
from __future__ import annotations

import json
import time
from pathlib import Path

from slurm_advisor.models import versions
from slurm_advisor.retrain.canary import CanaryRules, Verdict, judge_canary, watch_active
from slurm_advisor.retrain.lock import RetrainLock
from slurm_advisor.retrain.promotion import rollback

VERDICT_FILE = "canary.json"
DECISIONS_READ = 50_000  # the newest decisions weighed; a canary decides within days, not months


def run_canary(store, models_dir: Path, rules: CanaryRules, log) -> dict:
    """The step's summary: what was judged, the verdict, and what changed."""
    models_dir = Path(models_dir)
    with RetrainLock(models_dir):
        canary = next((m for m in store.list_models() if m.status == "canary"), None)
        active = store.active_model()
        data = (store.load_decisions(limit=DECISIONS_READ), store.load_reports(), store.load_outcomes())
        if canary is not None:
            return _decide_canary(store, models_dir, canary, active, data, rules, log)
        if versions.canary_version(models_dir) is not None:  # promoted or retired by hand: the pointer follows
            versions.point_canary(models_dir, None)
        if active is None or active.promoted_at is None:
            return {"judged": None, "state": "idle", "reason": "no canary runs and no model is promoted"}
        verdict = watch_active(*data, active.version, active.promoted_at, rules)
        summary = {"judged": active.version, "against": "slurm's own placements", **verdict.to_dict()}
        if verdict.state == "rollback":
            switch = rollback(store, models_dir, action="regression", note=verdict.reason)
            log(f"rolled back {active.version} to {switch.active or 'the default model'}: {verdict.reason}")
            summary["active"] = switch.active
        return summary


def _decide_canary(store, models_dir: Path, canary, active, data, rules: CanaryRules, log) -> dict:
    if versions.canary_version(models_dir) != canary.version:  # a crash between registry and pointer
        versions.point_canary(models_dir, canary.version)
    verdict = judge_canary(*data, canary.version, active and active.version, canary.promoted_at or canary.created_at,
                           rules)
    summary = {"judged": canary.version, "against": active.version if active else "the default model",
               **verdict.to_dict()}
    if verdict.state == "promote":
        store.activate(canary.version, "canary", note=verdict.reason)
        versions.point_active(models_dir, canary.version)
        versions.point_canary(models_dir, None)
        log(f"canary {canary.version} promoted: {verdict.reason}")
    elif verdict.state == "rollback":
        store.set_model_status(canary.version, "retired")
        versions.point_canary(models_dir, None)
        log(f"canary {canary.version} rolled back: {verdict.reason}")
    if verdict.state != "waiting":
        _record(Path(canary.directory), verdict)
    return summary


def _record(directory: Path, verdict: Verdict) -> None:
    try:
        (directory / VERDICT_FILE).write_text(json.dumps({"time": time.time(), **verdict.to_dict()}) + "\n")
    except OSError:
        pass  # the registry and the log have it; the file is a convenience


def last_verdict(directory: str | Path | None) -> dict | None:
    """The canary verdict recorded beside a model, if any."""
    if not directory:
        return None
    try:
        return json.loads((Path(directory) / VERDICT_FILE).read_text())
    except (OSError, ValueError):
        return None
