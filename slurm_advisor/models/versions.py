"""The models directory: one subdirectory per version and an ``active`` pointer to one of them.

    models-dir/
      3f9a0c1d2e4b/     policy.pt, speed.pt, meta.json (the version is the hash of these files),
                        weights.npz (the same weights for serving without torch)
      7c21e5aa9f00/
      active -> 7c21e5aa9f00      a relative symlink; the daemon follows it
                                  (``active -> default``: no promoted model, the daemon's default serves)
      canary -> 3f9a0c1d2e4b      while a canary runs: the daemon serves it to a share of the jobs
      .retrain.lock               held by a running retrain
      .candidate-*/               a retrain's unfinished candidate (removed by the next retrain)

A version directory is complete before its name exists (written in a temporary directory,
fsynced, renamed), and ``active`` changes only by renaming a new symlink over it, so a crash at
any moment leaves the old pointer to a complete model. The registry (the store's ``models``
table) is the source of truth; ``active`` mirrors its active row, and a retrain repairs the
mirror first if a crash fell between the two. No torch here: the daemon imports this module.

``DEFAULT`` is the name of the model the daemon serves when none is promoted: its config's
``model``, the packaged one unless set. It is no directory here and never a version (those are
hex hashes); ``models rollback`` past the first promotion points ``active`` at it, so that the
daemon swaps back to that model without a restart.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from pathlib import Path

from slurm_advisor.models.meta import DEFAULT_MODEL_DIR

ACTIVE = "active"
CANARY = "canary"
DEFAULT = "default"

CANDIDATE_PREFIX = ".candidate-"
MODEL_FILES = ("lif_profile.json", "meta.json", "policy.pt", "speed.pt", "weights.npz")  # what a retrain publishes


def model_version(model_dir: Path | None) -> str:
    """A short hash of the model's files: what the decision log names (None: the packaged model)."""
    directory = Path(model_dir) if model_dir else DEFAULT_MODEL_DIR
    digest = hashlib.sha256()
    for name in ("meta.json", "policy.pt", "speed.pt"):
        path = directory / name
        if path.is_file():
            digest.update(path.read_bytes())
    return digest.hexdigest()[:12]


def active_version(models_dir: Path) -> str | None:
    """The version ``active`` points at, ``DEFAULT``, or None (no pointer, or one that points
    nowhere valid)."""
    return _pointed(models_dir, ACTIVE)


def canary_version(models_dir: Path | None) -> str | None:
    """The version ``canary`` points at, or None (no canary runs)."""
    version = None if models_dir is None else _pointed(models_dir, CANARY)
    return None if version == DEFAULT else version


def _pointed(models_dir: Path, pointer: str) -> str | None:
    try:
        target = os.readlink(Path(models_dir) / pointer)
    except OSError:
        return None
    name = Path(target).name
    if name == DEFAULT:
        return DEFAULT
    return name if name and (Path(models_dir) / name).is_dir() else None


def active_dir(models_dir: Path | None) -> Path | None:
    """The promoted version's directory, or None (none promoted, or ``active`` names ``DEFAULT``)."""
    if models_dir is None:
        return None
    version = active_version(models_dir)
    return None if version in (None, DEFAULT) else Path(models_dir) / version


def new_candidate_dir(models_dir: Path) -> Path:
    """A fresh temporary directory inside ``models_dir`` (same file system: the rename is atomic)."""
    Path(models_dir).mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=CANDIDATE_PREFIX, dir=models_dir))


def publish(candidate: Path, models_dir: Path, version: str) -> Path:
    """fsync the candidate's files, then rename it to ``models_dir/version``; returns the new path.

    FileExistsError when that version already exists (the same files were published before)."""
    for name in os.listdir(candidate):
        _fsync(Path(candidate) / name)
    _fsync(candidate)
    final = Path(models_dir) / version
    if final.exists():
        raise FileExistsError(final)
    os.rename(candidate, final)
    _fsync(models_dir)
    return final


def point_active(models_dir: Path, version: str) -> None:
    """Make ``active`` point at ``version`` (or ``DEFAULT``), atomically (a new symlink renamed
    over the old one)."""
    _point(models_dir, ACTIVE, version)


def point_canary(models_dir: Path, version: str | None) -> None:
    """Make ``canary`` point at ``version``, atomically; None: no canary (the pointer removed)."""
    if version is not None:
        _point(models_dir, CANARY, version)
        return
    try:
        os.unlink(Path(models_dir) / CANARY)
    except FileNotFoundError:
        return
    _fsync(models_dir)


def _point(models_dir: Path, pointer: str, version: str) -> None:
    models_dir = Path(models_dir)
    if version != DEFAULT and not (models_dir / version).is_dir():
        raise FileNotFoundError(models_dir / version)
    tmp = models_dir / f".{pointer}.{os.getpid()}"
    tmp.unlink(missing_ok=True)
    os.symlink(version, tmp)
    os.replace(tmp, models_dir / pointer)
    _fsync(models_dir)


def remove_stale_candidates(models_dir: Path) -> int:
    """Remove what killed retrains left behind; only call while holding the retrain lock."""
    removed = 0
    for path in Path(models_dir).glob(f"{CANDIDATE_PREFIX}*"):
        shutil.rmtree(path, ignore_errors=True)
        removed += 1
    return removed


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
