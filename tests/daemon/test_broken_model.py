"""A corrupt or missing model never stops the advice: slurm-default serves, logged, shown in status."""
from __future__ import annotations

import json
import shutil
from dataclasses import replace

import numpy as np
import pytest

from slurm_advisor.daemon.build import build_daemon
from slurm_advisor.daemon.config import DaemonConfig
from slurm_advisor.models.meta import DEFAULT_MODEL_DIR
from slurm_advisor.models.versions import point_active


def _config(tmp_path, **changes) -> DaemonConfig:
    return replace(DaemonConfig(), mode="advise", source="simulated", socket=tmp_path / "a.sock", db=str(tmp_path / "a.db"),
                   models_dir=tmp_path / "models", **changes)


def _weights(directory, change) -> None:
    """The served weights (weights.npz) changed: the policy network's arrays."""
    path = directory / "weights.npz"
    with np.load(path) as npz:
        arrays = {k: change(k, npz[k]) if k.startswith("policy/") else npz[k] for k in npz.files}
    with open(path, "wb") as f:
        np.savez(f, **arrays)


def _no_weights(directory) -> None:
    """Neither the served weights nor the policy.pt they could be converted from."""
    (directory / "weights.npz").unlink()
    (directory / "policy.pt").unlink()


def _meta(directory, change) -> None:
    meta = json.loads((directory / "meta.json").read_text())
    change(meta)
    (directory / "meta.json").write_text(json.dumps(meta))


DAMAGES = {
    "meta not json": lambda d: (d / "meta.json").write_text("{not json"),
    "weights missing": _no_weights,
    # an empty file once crashed the start with an IndexError (issue 39, item 8)
    "weights empty": lambda d: (d / "weights.npz").write_bytes(b""),
    "weights truncated": lambda d: (d / "weights.npz").write_bytes((d / "weights.npz").read_bytes()[:1000]),
    "wrong schema: types": lambda d: _meta(d, lambda m: m.update(types="resnet50")),
    "wrong schema: version": lambda d: _meta(d, lambda m: m.update(schema_version=-1)),
    "wrong schema: hidden": lambda d: _meta(d, lambda m: m["hyper"].update(hidden=[7])),
    "network of the wrong shape": lambda d: _weights(d, lambda k, v: np.zeros([n + 1 for n in v.shape], v.dtype)),
    "weights not finite": lambda d: _weights(d, lambda k, v: np.full_like(v, np.nan)),
}


@pytest.mark.parametrize("damage", DAMAGES)
def test_a_broken_active_model_falls_back_to_slurm_default(tmp_path, caplog, damage):
    broken = tmp_path / "models" / "0123456789ab"
    shutil.copytree(DEFAULT_MODEL_DIR, broken)
    DAMAGES[damage](broken)
    point_active(tmp_path / "models", broken.name)
    daemon = build_daemon(_config(tmp_path))
    try:
        status = daemon.status()
        assert status["policy"] == "slurm-default" and status["model"] is None
        assert status["model_reload_failures"] == 1
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
    _no_weights(broken)
    point_active(tmp_path / "models", broken.name)
    daemon = build_daemon(_config(tmp_path, policy="learned-fast"))
    try:
        assert daemon.status()["policy"] == "slurm-default"  # a broken model: Slurm's own rule serves
    finally:
        daemon.stop()


def test_a_model_that_loads_but_cannot_decide_is_not_served(tmp_path, monkeypatch, caplog):
    """A policy that raises on a real job (here: any job) fails the probe at start: slurm-default."""
    from slurm_advisor import policies

    class Breaks:
        name = "learned"

        def place(self, snapshot, job, rng):
            raise RuntimeError("mat1 and mat2 shapes cannot be multiplied")

    made = policies.make_policy
    monkeypatch.setattr(policies, "make_policy", lambda name, ctx: Breaks() if name == "learned" else made(name, ctx))
    daemon = build_daemon(_config(tmp_path))
    try:
        status = daemon.status()
        assert status["policy"] == "slurm-default" and "probe job" in status["model_problem"]
        assert status["model_reload_failures"] == 1
    finally:
        daemon.stop()
