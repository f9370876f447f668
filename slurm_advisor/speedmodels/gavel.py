"""Ground truth from Gavel's measured throughputs (``simulation_throughputs.json``, OSDI'20).

Gavel measured every job type alone on 1/2/4/8 GPUs, packed on one server ("consolidated") and
spread over servers (``*_unconsolidated``), and every pair of 1-GPU jobs *sharing one GPU*.
This model maps a Slurm job onto that table:

* **Job -> key.** The Gavel model is ``profile_for(...).gavel``; the batch size (the job's, else
  the profile's) snaps to the nearest batch size Gavel measured for that model.
* **Scale factor = number of workers.** Measured 1/2/4/8 are used as is; counts in between are
  interpolated linearly in throughput; above 8 the sf-8 throughput grows by ``n/8`` and loses
  :data:`DOUBLING_EFFICIENCY` for every doubling past 8. Models Gavel ran on one GPU only
  (A3C, CycleGAN, Recommendation) scale their sf-1 figure the same way from 1.
* **Placement.** All tasks on one node -> the ``worker_type`` table; spread -> the
  ``{worker_type}_unconsolidated`` value when it is non-zero, else the consolidated one.
* **Co-location.** For each other job on a node, ``ratio = t_self / null`` from the sf-1 pair;
  an unmeasured pair (``[0, 0]`` or absent) takes the mean ratio of the self key's measured
  pairs. Sharing a node is gentler than sharing a GPU, so the slowdown is damped:
  ``factor = 1 - colocation_weight * (1 - ratio)``. Factors of distinct neighbours on a node
  multiply; the job runs at its isolated speed times the *minimum* over its nodes, because
  synchronous training waits for its slowest worker.
"""
from __future__ import annotations

import json
import math
import re
from collections.abc import Collection, Sequence
from pathlib import Path

from slurm_advisor.domain import Job, Node, RunningJob
from slurm_advisor.domain.jobtypes import profile_for
from slurm_advisor.errors import InputError
from slurm_advisor.speedmodels.base import ColocationIndex, select

#: Throughput kept per doubling of workers beyond the largest measured scale factor. It is the
#: median 4->8 GPU efficiency on ``v100_unconsolidated`` (0.864): more than 8 GPUs always spans
#: servers, and the consolidated v100 table is too noisy (super-linear 4->8 steps) to fit.
DOUBLING_EFFICIENCY = 0.86

_KEY = re.compile(r"\('(.*)', (\d+)\)")
_BATCH = re.compile(r"(.*) \(batch size (\d+)\)")

# model name -> batch size (None when Gavel names none) -> scale factor -> throughput
Table = dict[str, dict[int | None, dict[int, float]]]
JobKey = tuple[str, int | None]  # (Gavel model name, snapped batch size)


def _load(path: Path) -> dict:
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError) as exc:
        raise InputError(f"{path}: cannot read Gavel throughputs: {exc}") from exc
    if not isinstance(data, dict) or not data:
        raise InputError(f"{path}: expected a JSON object keyed by worker type")
    return data


def _parse_key(path: Path, key: str) -> tuple[str, int | None, int]:
    """``"('ResNet-50 (batch size 64)', 1)"`` -> ("ResNet-50", 64, 1)."""
    m = _KEY.fullmatch(key)
    if not m:
        raise InputError(f"{path}: malformed job key {key!r}")
    name, sf = m.group(1), int(m.group(2))
    b = _BATCH.fullmatch(name)
    return (b.group(1), int(b.group(2)), sf) if b else (name, None, sf)


def _nulls(path: Path, jobs: dict) -> Table:
    table: Table = {}
    try:
        for key, entry in jobs.items():
            model, bs, sf = _parse_key(path, key)
            table.setdefault(model, {}).setdefault(bs, {})[sf] = float(entry["null"])
    except (TypeError, KeyError, ValueError, AttributeError) as exc:
        raise InputError(f"{path}: malformed throughput entry: {exc}") from exc
    return table


def _ratios(path: Path, jobs: dict) -> dict[JobKey, dict[JobKey, float]]:
    """Sf-1 pair slowdowns ``t_self / null`` for every measured pair, clamped to [0, 1]."""
    out: dict[JobKey, dict[JobKey, float]] = {}
    try:
        for key, entry in jobs.items():
            model, bs, sf = _parse_key(path, key)
            alone = float(entry["null"])
            if sf != 1 or alone <= 0:
                continue
            row = out.setdefault((model, bs), {})
            for other, pair in entry.items():
                if other == "null" or sum(pair) <= 0:
                    continue
                o_model, o_bs, _ = _parse_key(path, other)
                row[(o_model, o_bs)] = min(1.0, max(0.0, float(pair[0]) / alone))
    except (TypeError, KeyError, ValueError, AttributeError, IndexError) as exc:
        raise InputError(f"{path}: malformed co-location entry: {exc}") from exc
    return out


def scaled(by_sf: dict[int, float], n: int) -> float:
    """Throughput on ``n`` workers from the measured scale factors (interpolate/extrapolate)."""
    measured = sorted(sf for sf, t in by_sf.items() if t > 0)
    if not measured:
        return 0.0
    if n in by_sf and by_sf[n] > 0:
        return by_sf[n]
    top = measured[-1]
    if n > top:
        return by_sf[top] * (n / top) * DOUBLING_EFFICIENCY ** math.log2(n / top)
    lo = max((s for s in measured if s < n), default=measured[0])
    hi = min(s for s in measured if s > n)
    if lo >= n:
        return by_sf[hi] * n / hi
    return by_sf[lo] + (by_sf[hi] - by_sf[lo]) * (n - lo) / (hi - lo)


class GavelSpeedModel:
    """Iterations/s from Gavel's measurements on one GPU generation (see module docstring)."""

    name = "gavel"
    local = True

    def __init__(self, path: str | Path, worker_type: str = "v100",
                 colocation_weight: float = 0.5):
        path = Path(path)
        data = _load(path)
        valid = sorted(k for k in data if not k.endswith("_unconsolidated"))
        if worker_type not in valid:
            raise InputError(f"{path}: unknown worker type {worker_type!r}; valid: {', '.join(valid)}")
        if not 0.0 <= colocation_weight <= 1.0:
            raise InputError(f"colocation_weight must be in [0, 1], got {colocation_weight}")
        self.worker_type = worker_type
        self.colocation_weight = colocation_weight
        self._packed = _nulls(path, data[worker_type])
        self._spread = _nulls(path, data.get(f"{worker_type}_unconsolidated", {}))
        self._ratios = _ratios(path, data[worker_type])
        self._mean_ratio = {k: sum(r.values()) / len(r) for k, r in self._ratios.items() if r}
        self._key_cache: dict[tuple[str, int | None], JobKey] = {}
        self._iso_cache: dict[tuple[JobKey, int, bool], float] = {}
        self._factor_cache: dict[tuple[JobKey, JobKey], float] = {}

    def key_for(self, job: Job) -> JobKey:
        """The measured (model, batch size) that stands in for ``job``."""
        sig = (job.type, job.batch_size)
        key = self._key_cache.get(sig)
        if key is None:
            profile = profile_for(job.type, job.model_size_mb, job.batch_size)
            model = profile.gavel if profile.gavel in self._packed else "ResNet-50"
            sizes = self._packed[model]
            if None in sizes:
                key = (model, None)
            else:
                want = job.batch_size or profile.batch_size
                key = (model, min(sizes, key=lambda b: (abs(b - want), b)))
            self._key_cache[sig] = key
        return key

    def isolated(self, job: Job, consolidated: bool) -> float:
        """Iterations/s of ``job`` with no neighbours, packed on one node or spread."""
        key = self.key_for(job)
        sig = (key, job.num_workers, consolidated)
        speed = self._iso_cache.get(sig)
        if speed is None:
            packed = self._packed[key[0]][key[1]]
            by_sf = packed
            if not consolidated:
                spread = self._spread.get(key[0], {}).get(key[1], {})
                by_sf = {sf: spread.get(sf) or t for sf, t in packed.items()}
            speed = self._iso_cache[sig] = scaled(by_sf, job.num_workers)
        return speed

    def factor(self, me: JobKey, other: JobKey) -> float:
        """Damped slowdown of ``me`` when ``other`` shares one of its nodes."""
        sig = (me, other)
        f = self._factor_cache.get(sig)
        if f is None:
            ratio = self._ratios.get(me, {}).get(other, self._mean_ratio.get(me, 1.0))
            f = self._factor_cache[sig] = 1.0 - self.colocation_weight * (1.0 - ratio)
        return f

    def speeds(self, nodes: Sequence[Node], running: Sequence[RunningJob],
               only: Collection[str] | None = None) -> dict[str, float]:
        index = ColocationIndex(running)
        keys = {rj.job.id: self.key_for(rj.job) for rj in running}
        out: dict[str, float] = {}
        for rj in select(running, only):
            placed_on = rj.placement.nodes()
            me = keys[rj.job.id]
            worst = 1.0
            for node in placed_on:
                f = 1.0
                for other in sorted(index.jobs_on.get(node, ())):  # a product in hash order would vary by process
                    if other != rj.job.id:
                        f *= self.factor(me, keys[other])
                worst = min(worst, f)
            out[rj.job.id] = self.isolated(rj.job, len(placed_on) == 1) * worst
        return out
