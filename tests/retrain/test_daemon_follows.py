"""The daemon picks up a promoted model without a restart, and keeps its model when the new one is broken."""
from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

import pytest
from retrain_helpers import publish_copy

from slurm_advisor.advisor import Advisor
from slurm_advisor.cluster.simulated import SimulatedSource
from slurm_advisor.daemon.config import DaemonConfig
from slurm_advisor.daemon.daemon import Daemon
from slurm_advisor.daemon.queue import NoQueue
from slurm_advisor.daemon.service import AdviceService
from slurm_advisor.models import versions
from slurm_advisor.policies import PolicyContext, make_policy
from slurm_advisor.policies.slurm_default import SlurmDefaultPolicy

FIELDS = {"comment": "slurm-advisor: type=resnet50 ps=0 workers=2", "num_tasks": 2, "cpus_per_task": 1,
          "pn_min_memory": 1000, "mem_per_cpu": True, "tres_per_task": "gres:gpu:1", "user_id": 1000}


@pytest.fixture
def daemon(tmp_path: Path):
    models = tmp_path / "models"
    first = publish_copy(models, "first")
    versions.point_active(models, first)
    cfg = replace(DaemonConfig(), mode="advise", socket=tmp_path / "a.sock", refresh_s=0.05, models_dir=models,
                  db=str(tmp_path / "advisor.db"))
    advisor = Advisor(make_policy("learned", PolicyContext(model_dir=models / first)), fallback=SlurmDefaultPolicy())
    service = AdviceService(advisor, lambda snapshot, job, placement: placement, model_version=first)
    d = Daemon(cfg, SimulatedSource(), NoQueue(), service, None)
    d.start()
    yield d, models, first
    d.stop()


def _wait(predicate, timeout_s: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return False


def test_a_promoted_model_is_served_without_a_restart(daemon) -> None:
    d, models, first = daemon
    assert d.status()["model"] == first and d.status()["model_reloads"] == 0
    before = d.service.advisor
    second = publish_copy(models, "second")
    versions.point_active(models, second)  # what a promoting retrain does
    assert _wait(lambda: d.status()["model"] == second)  # the refresher thread did it
    assert d.status()["model_reloads"] == 1 and d.service.advisor is not before
    assert d.advise(FIELDS)["ok"]
    assert d.service.model_version == second


def test_a_model_that_does_not_load_is_counted_and_the_current_one_kept(daemon) -> None:
    d, models, first = daemon
    broken = publish_copy(models, "broken")
    (models / broken / "weights.npz").write_bytes(b"not an npz file")  # what the daemon serves from
    before = d.service.advisor
    versions.point_active(models, broken)
    assert _wait(lambda: d.status()["model_reload_failures"] == 1)
    seen = d.status()["refreshes"]
    assert _wait(lambda: d.status()["refreshes"] >= seen + 3)  # not retried while the pointer stays
    status = d.status()
    assert status["model"] == first and status["model_reload_failures"] == 1 and d.service.advisor is before
    # still answering with the old model (observe: it agrees with Slurm's own choice, which is not pinned)
    assert d.advise(FIELDS)["action"] in ("place", "none", "observe")
    good = publish_copy(models, "good")
    versions.point_active(models, good)
    assert _wait(lambda: d.status()["model"] == good)


def test_a_rollback_to_the_default_model_is_served_without_a_restart(daemon) -> None:
    d, models, first = daemon
    versions.point_active(models, versions.DEFAULT)  # what `models rollback` past the first promotion does
    d.refresher.refresh_once()  # the refresh checks the pointer (beside the refresh thread, one at a time)
    packaged = versions.model_version(None)
    assert d.status()["model"] == packaged and d.status()["model_reloads"] == 1
    assert d.advise(FIELDS)["ok"]
    assert not d.models.check()  # serving it: not loaded again at every refresh
    versions.point_active(models, first)  # promoted again
    d.refresher.refresh_once()
    assert d.status()["model"] == first and d.status()["model_reloads"] == 2


def test_a_canary_is_followed_beside_the_active_model_and_its_end_is_counted(daemon) -> None:
    d, models, first = daemon
    canary = publish_copy(models, "canary")
    versions.point_canary(models, canary)  # what a retrain that accepts a candidate does
    assert _wait(lambda: d.status()["canary"] == canary)
    assert d.status()["canary_share"] == 0.2 and d.status()["model"] == first
    assert d.advise(FIELDS)["ok"] and d.service.canary.version == canary
    # the canary promoted: the active pointer moves to it and the canary pointer goes
    versions.point_active(models, canary)
    versions.point_canary(models, None)
    assert _wait(lambda: d.status()["canary"] is None and d.status()["model"] == canary)
    assert d.status()["canary_promotions"] == 1 and d.status()["canary_rollbacks"] == 0
    # another canary, rolled back: the pointer goes, the active model stays
    again = publish_copy(models, "again")
    versions.point_canary(models, again)
    assert _wait(lambda: d.status()["canary"] == again)
    versions.point_canary(models, None)
    assert _wait(lambda: d.status()["canary"] is None)
    assert d.status()["canary_rollbacks"] == 1 and d.status()["model"] == canary
