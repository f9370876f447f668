"""The models directory: atomic publish, the active pointer, stale candidates, the registry mirror."""
from __future__ import annotations

import os
from dataclasses import replace

import pytest
from retrain_helpers import publish_copy

from slurm_advisor.daemon.build import build_daemon, model_version
from slurm_advisor.daemon.config import DaemonConfig
from slurm_advisor.domain.model_record import ModelRecord
from slurm_advisor.models import versions
from slurm_advisor.retrain.retrain import _reconcile
from slurm_advisor.store import Store


def test_publish_and_point(tmp_path) -> None:
    models = tmp_path / "models"
    assert versions.active_version(models) is None and versions.active_dir(None) is None
    a = publish_copy(models, "a")
    assert model_version(models / a) == a  # the version is the hash of the files
    with pytest.raises(FileNotFoundError):
        versions.point_active(models, "nope")
    versions.point_active(models, a)
    assert os.readlink(models / "active") == a  # relative: the directory may move
    assert versions.active_dir(models) == models / a
    again = versions.new_candidate_dir(models)
    (again / "x").write_text("x")
    with pytest.raises(FileExistsError):
        versions.publish(again, models, a)
    assert versions.remove_stale_candidates(models) == 1 and not again.exists()
    (models / a).rename(models / "moved")
    assert versions.active_version(models) is None  # a dangling pointer is no active model


def test_a_retrain_repairs_a_pointer_left_behind_the_registry(tmp_path) -> None:
    models = tmp_path / "models"
    a, b = publish_copy(models, "a"), publish_copy(models, "b")
    versions.point_active(models, a)
    with Store.open(str(tmp_path / "s.db")) as store:
        store.register_model(ModelRecord(a, str(models / a), "retired"))
        store.register_model(ModelRecord(b, str(models / b), "active"))  # crashed before the pointer moved
        lines: list[str] = []
        assert _reconcile(store, models, lines.append).version == b
        assert versions.active_version(models) == b and "repaired" in lines[0]
        store.register_model(ModelRecord("c" * 12, str(tmp_path / "gone"), "active"))
        assert _reconcile(store, models, lines.append) is None  # its files are gone: slurm-default judges


@pytest.mark.parametrize("rolled_back", [False, True], ids=["promoted", "rolled-back-to-default"])
def test_the_daemon_starts_on_the_active_model(tmp_path, rolled_back) -> None:
    models = tmp_path / "models"
    a = publish_copy(models, "a")
    versions.point_active(models, a)
    if rolled_back:
        versions.point_active(models, versions.DEFAULT)  # no directory of that name: the default is no version
        assert versions.active_version(models) == versions.DEFAULT and versions.active_dir(models) is None
    config = replace(DaemonConfig(), source="simulated", db=str(tmp_path / "d.db"), models_dir=models,
                     socket=tmp_path / "s.sock")
    daemon = build_daemon(config)
    try:  # after a rollback to the default: the packaged model, as before any promotion
        assert daemon.status()["model"] == (model_version(None) if rolled_back else a) and daemon.models is not None
        assert not daemon.models.check()  # already serving it
    finally:
        daemon.stop()


def test_a_retrain_repairs_a_pointer_a_rollback_to_the_default_left_behind(tmp_path) -> None:
    models = tmp_path / "models"
    a = publish_copy(models, "a")
    versions.point_active(models, a)
    with Store.open(str(tmp_path / "s.db")) as store:
        store.register_model(ModelRecord(a, str(models / a), "active"))
        store.activate(None, "rollback")  # crashed before the pointer moved
        lines: list[str] = []
        assert _reconcile(store, models, lines.append) is None
        assert versions.active_version(models) == versions.DEFAULT and "repaired" in lines[0]
