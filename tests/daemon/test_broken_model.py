"""A corrupt or missing model never stops the advice: slurm-default serves, logged, shown in status."""
from __future__ import annotations

import shutil
from dataclasses import replace

import pytest

from slurm_advisor.daemon.config import DaemonConfig
from slurm_advisor.daemon.daemon import build_daemon
from slurm_advisor.learned.checkpoint import DEFAULT_MODEL_DIR
from slurm_advisor.retrain.modelsdir import point_active


def _config(tmp_path, **changes) -> DaemonConfig:
    return replace(DaemonConfig(), source="simulated", socket=tmp_path / "a.sock", db=str(tmp_path / "a.db"),
                   models_dir=tmp_path / "models", **changes)


@pytest.mark.parametrize("damage", ["meta not json", "policy missing", "policy empty", "policy truncated"])
def test_a_broken_active_model_falls_back_to_slurm_default(tmp_path, caplog, damage):
    broken = tmp_path / "models" / "0123456789ab"
    shutil.copytree(DEFAULT_MODEL_DIR, broken)
    if damage == "meta not json":
        (broken / "meta.json").write_text("{not json")
    elif damage == "policy missing":
        (broken / "policy.pt").unlink()
    else:  # an empty file once crashed the start with an IndexError (issue 39, item 8)
        weights = (broken / "policy.pt").read_bytes()
        (broken / "policy.pt").write_bytes(b"" if damage == "policy empty" else weights[:len(weights) // 2])
    point_active(tmp_path / "models", broken.name)
    daemon = build_daemon(_config(tmp_path))
    try:
        status = daemon.status()
        assert status["policy"] == "slurm-default" and status["model"] is None
        assert "does not load" in status["model_problem"] and "serving slurm-default" in caplog.text
        reply = daemon.advise({"comment": "slurm-advisor: type=resnet50 ps=0 workers=2", "num_tasks": 2,
                               "tres_per_task": "gres:gpu:1", "user_id": 0})
        assert reply["ok"] is True and reply["action"] in ("place", "none")
    finally:
        daemon.stop()


def test_a_good_model_reports_no_problem(tmp_path):
    daemon = build_daemon(_config(tmp_path))
    try:
        status = daemon.status()
        assert status["policy"] == "learned" and status["model"] and status["model_problem"] is None
    finally:
        daemon.stop()


def test_learned_fast_is_served_from_the_model_and_follows_promotions_as_learned(tmp_path):
    """`--policy learned-fast` (the gate's pick without the search) loads from the same model
    directory as `learned`: its version, its fallback, the model follower with the same policy."""
    daemon = build_daemon(_config(tmp_path, policy="learned-fast"))
    try:
        status = daemon.status()
        assert status["policy"] == "learned" and status["model"] and status["model_problem"] is None
        assert daemon.models is not None
        advisor = daemon.models._load(DEFAULT_MODEL_DIR)
        assert advisor.fallback is not None and advisor.policy.name == "learned"
    finally:
        daemon.stop()
    broken = tmp_path / "models" / "0123456789ab"
    shutil.copytree(DEFAULT_MODEL_DIR, broken)
    (broken / "policy.pt").unlink()
    point_active(tmp_path / "models", broken.name)
    daemon = build_daemon(_config(tmp_path, policy="learned-fast"))
    try:
        assert daemon.status()["policy"] == "slurm-default"  # a broken model: Slurm's own rule serves
    finally:
        daemon.stop()
