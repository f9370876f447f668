"""Shared by the retrain tests: versions of the packaged model published into a models directory."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

from slurm_advisor.daemon.daemon import model_version
from slurm_advisor.learned.checkpoint import DEFAULT_MODEL_DIR
from slurm_advisor.retrain import modelsdir


def publish_copy(models_dir: Path, note: str) -> str:
    """The packaged model, its meta.json marked with ``note`` (so each note is its own version),
    published as a version of ``models_dir``; returns the version."""
    tmp = modelsdir.new_candidate_dir(models_dir)
    for name in modelsdir.MODEL_FILES:
        shutil.copy(DEFAULT_MODEL_DIR / name, tmp / name)
    meta = json.loads((tmp / "meta.json").read_text())
    (tmp / "meta.json").write_text(json.dumps({**meta, "note": note}))
    version = model_version(tmp)
    modelsdir.publish(tmp, models_dir, version)
    return version
