"""kill -9 of a retrain mid-training leaves the active model serving and the registry consistent."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from retrain_helpers import make_site, publish_copy

from slurm_advisor.domain.model_record import ModelRecord
from slurm_advisor.models import versions
from slurm_advisor.policies import PolicyContext, make_policy
from slurm_advisor.retrain.lock import RetrainLock
from slurm_advisor.store import Store

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_kill_9_mid_training_leaves_the_active_model_intact(tmp_path) -> None:
    db, cluster = make_site(tmp_path / "site")
    models = tmp_path / "models"
    active = publish_copy(models, "active")
    with Store.open(db) as store:
        store.register_model(ModelRecord(active, str(models / active), "active"))
    versions.point_active(models, active)
    # a speed model fit of many epochs: the retrain is surely still training when killed
    proc = subprocess.Popen([sys.executable, "-m", "slurm_advisor.cli", "retrain", "--db", db, "--cluster",
                             str(cluster), "--models-dir", str(models), "--hyper", "speed_epochs=5000"],
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stderr.readline()
        deadline = time.monotonic() + 60
        while not line.startswith("retrain:") and time.monotonic() < deadline and proc.poll() is None:
            line = proc.stderr.readline()
        assert line.startswith("retrain:"), line  # it read the store and starts training (5,000 epochs)
        assert proc.poll() is None
        os.kill(proc.pid, signal.SIGKILL)
        assert proc.wait(timeout=10) == -signal.SIGKILL
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()
        proc.stderr.close()
    assert versions.active_version(models) == active
    make_policy("learned", PolicyContext(model_dir=models / versions.ACTIVE))  # still loads
    with Store.open(db, create=False) as store:
        registered = store.list_models()
    assert [(m.version, m.status) for m in registered] == [(active, "active")]
    assert sorted(p.name for p in models.iterdir() if not p.name.startswith(".")) == sorted([active, versions.ACTIVE])
    with RetrainLock(models):  # the kernel released the dead retrain's lock
        pass
