"""A model's weights as numpy arrays: ``weights.npz`` beside ``policy.pt`` and ``speed.pt``.

Training writes both (``training.checkpoint.save``); serving reads only this file, so the daemon,
the hook's answers, ``explain`` and the search run without torch. The arrays are the networks'
state_dicts under ``policy/`` and ``speed/``, in the precision the .pt files hold (float16, the
site ensemble float32): loaded as float32 they are the values torch computes with, to the bit.
The architecture is meta.json's (``hyper.hidden``, ``speed_hidden``, ``speed_kind``, ...): every
array's shape is checked against it here, and a test checks these shapes against the torch
modules'. A model directory made before this file existed is exported by
``slurm-advisor models export DIR`` (needs torch); where torch is installed, loading converts it
in memory instead.
"""
from __future__ import annotations

import os
import zipfile
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from slurm_advisor.errors import InputError
from slurm_advisor.models.meta import ModelMeta

WEIGHTS_FILE = "weights.npz"
FORMAT = 1
N_SLOT_PARAMS, N_GLOBAL, _TERMS = 7, 14, 3  # as learned/speed/net.py


def write(directory: Path, policy: Mapping[str, np.ndarray], speed: Mapping[str, np.ndarray]) -> Path:
    """``weights.npz`` from the two state_dicts' arrays, in their dtypes; atomically (a daemon may
    be reading the directory)."""
    arrays = {"format": np.array(FORMAT)}
    for prefix, state in (("policy", policy), ("speed", speed)):
        arrays.update({f"{prefix}/{k}": np.asarray(v) for k, v in state.items()})
    tmp = Path(directory) / f".{WEIGHTS_FILE}.{os.getpid()}.tmp"  # open(): the umask's mode, as the .pt files
    try:
        with open(tmp, "wb") as f:
            np.savez(f, **arrays)
        os.replace(tmp, Path(directory) / WEIGHTS_FILE)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return Path(directory) / WEIGHTS_FILE


def read(directory: Path, meta: ModelMeta) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """(policy, speed) float32 arrays, checked against meta.json's architecture; InputError
    naming the file for anything wrong."""
    path = Path(directory) / WEIGHTS_FILE
    if not path.is_file():
        return _converted(directory, path, meta)
    try:
        with np.load(path, allow_pickle=False) as npz:
            raw = {k: npz[k] for k in npz.files}
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as e:
        raise InputError(f"{path}: cannot load weights: {e}") from None
    fmt = raw.pop("format", None)
    if fmt is None or fmt.shape != () or fmt != FORMAT:
        raise InputError(f"{path}: not a weights file of format {FORMAT}; export it again with "
                         f"`slurm-advisor models export {directory}`")
    policy = _part(path, raw, "policy", policy_shapes(meta))
    speed = _part(path, raw, "speed", speed_shapes(meta))
    return policy, speed


def _part(path: Path, raw: dict, prefix: str, shapes: dict[str, tuple]) -> dict[str, np.ndarray]:
    got = {k[len(prefix) + 1:]: v for k, v in raw.items() if k.startswith(prefix + "/")}
    if set(got) != set(shapes):
        missing, extra = sorted(set(shapes) - set(got)), sorted(set(got) - set(shapes))
        raise InputError(f"{path}: the {prefix} network's arrays do not match meta.json "
                         f"(missing {missing}, unexpected {extra})")
    out = {}
    for name, want in shapes.items():
        a = got[name]
        if a.shape != want or not np.issubdtype(a.dtype, np.floating):
            raise InputError(f"{path}: {prefix}/{name} must be a float array of shape {want} (as meta.json "
                             f"says), got {a.dtype} {a.shape}")
        out[name] = a.astype(np.float32)
        if not np.isfinite(out[name]).all():  # it loads, and every decision it makes would be noise
            raise InputError(f"{path}: cannot load weights: {prefix}/{name} holds NaN or infinite values")
    return out


def _linear(name: str, n_in: int, n_out: int) -> dict[str, tuple]:
    return {f"{name}.weight": (n_out, n_in), f"{name}.bias": (n_out,)}


def policy_shapes(meta: ModelMeta) -> dict[str, tuple]:
    """``policy_net.PolicyNet``'s state_dict shapes."""
    s, h = meta.schema, meta.hyper.hidden
    return {**_linear("encode.0", s.node_dim, h), **_linear("encode.2", h, h), **_linear("context.0", s.global_dim, h),
            **_linear("score.0", 3 * h, h), **_linear("score.2", h, 1),
            **_linear("value.0", 2 * h, h), **_linear("value.2", h, 1)}


def speed_shapes(meta: ModelMeta) -> dict[str, tuple]:
    """The speed model's state_dict shapes: ``learned.speed.net.SiteSpeedNet``'s."""
    h, vocab = meta.hyper.speed_hidden, meta.speed_vocab
    m, n = meta.speed_members, vocab.n_slots
    d_in = meta.speed_resid + n + 1 + _TERMS
    return {"slot_params": (m, n, N_SLOT_PARAMS), "node_pace": (m, vocab.n_node_slots - 1),
            "global_params": (m, N_GLOBAL), "w1": (m, d_in, h), "b1": (m, 1, h), "w2": (m, h, h), "b2": (m, 1, h),
            "w3": (m, h, 1), "b3": (m, 1, 1), "prior_ref": (n, 2), "solo": (n,), "log_lo": (), "log_hi": ()}


def _converted(directory: Path, path: Path, meta: ModelMeta) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """A model without ``weights.npz``: its .pt files converted in memory where torch is installed
    (the directory is left as it is: a published version never changes), else a clear error."""
    try:
        import torch  # noqa: F401  (only to know whether the conversion can run)
    except ImportError:
        raise InputError(f"{path}: missing (the model was saved before serving went torch-free); "
                         f"export it once where torch is installed: `slurm-advisor models export {directory}`"
                         ) from None
    from slurm_advisor.learned.numpy_nets import arrays_of
    from slurm_advisor.models import torch_files

    policy, speed = torch_files.networks(directory, meta)
    return arrays_of(policy), arrays_of(speed)

