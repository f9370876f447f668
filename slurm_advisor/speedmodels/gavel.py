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
  ``{worker_type}_unconsolidated`` value when it is non-zero, else the consolidated one, and
  never above the consolidated one: the same GPUs on a slower interconnect cannot be faster,
  and the table's 8 spread-faster v100 entries (ResNet-18 and ResNet-50 at large batches,
  sf 2-8, by 2-35 %) are the measurement noise the data's README notes. Gavel's spread runs
  name no switches; for a job whose nodes sit under more than one switch, its measured spread
  penalty (per-iteration time spread minus consolidated: the time its traffic takes between
  servers) is divided by :data:`CROSS_SWITCH_FACTOR`, the share of the bandwidth it keeps.
* **Co-location.** Gavel measured pairs *sharing one GPU* (space sharing: both jobs' kernels on
  one device); a Slurm job's neighbours sit on *other* GPUs of its node and share only the
  host (CPU caches, memory bandwidth, PCIe, NIC), which costs about a tenth, not multiples:
  Crux (SIGCOMM'24) measured a GPT job's iteration 1.53 s -> 1.70 s (+11 %) beside BERT. So a
  pair's measured loss ``1 - t_self / null`` (an unmeasured pair, ``[0, 0]`` or absent, takes
  the mean loss of the self key's measured pairs) only ranks how hard a neighbour presses, and
  losses *add* over the neighbours on a node (they share the same host resources):
  ``time factor = 1 + colocation_weight * sum(loss)``. The default weight
  :data:`COLOCATION_WEIGHT` = 0.04 puts seven neighbours of the mean measured loss (0.34 over
  the 636 measured v100 sf-1 pairs) at 1.10x and seven of the worst (0.91) at 1.25x. The job
  runs at its isolated speed over the *largest* factor among its nodes, because synchronous
  training waits for its slowest worker.

Cost: a call reads only the jobs it is given; the node -> switch map is built once per
``nodes`` tuple and only when a job spans nodes.
"""
from __future__ import annotations

import json
import math
import re
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path

from slurm_advisor.domain import Job, Node, RunningJob
from slurm_advisor.domain.jobtypes import profile_for
from slurm_advisor.errors import InputError
from slurm_advisor.speedmodels.base import ColocationIndex, select
from slurm_advisor.speedmodels.contention import SwitchMap

#: Throughput kept per doubling of workers beyond the largest measured scale factor. It is the
#: median 4->8 GPU efficiency on ``v100_unconsolidated`` (0.864): more than 8 GPUs always spans
#: servers, and the consolidated v100 table is too noisy (super-linear 4->8 steps) to fit.
DOUBLING_EFFICIENCY = 0.86

#: Default weight of a neighbour's measured GPU-sharing loss when it only shares the node (see
#: the module docstring: seven mean neighbours -> 1.10x, Crux's ~11 % for one busy neighbour).
COLOCATION_WEIGHT = 0.04

#: Share of the NIC rate a flow between switches gets: 2:1 oversubscribed leaf uplinks, assumed
#: busy (the same figure and sources as ``ContentionParams.cross_switch_factor``).
CROSS_SWITCH_FACTOR = 0.5

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


def _losses(path: Path, jobs: dict) -> dict[JobKey, dict[JobKey, float]]:
    """Sf-1 pair losses ``1 - t_self / null`` for every measured pair, clamped to [0, 1]."""
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
                row[(o_model, o_bs)] = 1.0 - min(1.0, max(0.0, float(pair[0]) / alone))
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
                 colocation_weight: float = COLOCATION_WEIGHT):
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
        self._losses = _losses(path, data[worker_type])
        self._mean_loss = {k: sum(r.values()) / len(r) for k, r in self._losses.items() if r}
        self._key_cache: dict[tuple[str, int | None], JobKey] = {}
        self._iso_cache: dict[tuple[JobKey, int, str], float] = {}
        self._switches = SwitchMap()

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

    def isolated(self, job: Job, consolidated: bool, crosses_switch: bool = False) -> float:
        """Iterations/s of ``job`` with no neighbours: packed on one node, spread, or spread
        over switches."""
        key = self.key_for(job)
        layout = "packed" if consolidated else ("switches" if crosses_switch else "spread")
        sig = (key, job.num_workers, layout)
        speed = self._iso_cache.get(sig)
        if speed is None:
            packed_by_sf = self._packed[key[0]][key[1]]
            packed = scaled(packed_by_sf, job.num_workers)
            speed = packed
            if not consolidated:
                measured = self._spread.get(key[0], {}).get(key[1], {})
                spread = min(packed, scaled({sf: measured.get(sf) or t for sf, t in packed_by_sf.items()},
                                            job.num_workers))
                speed = spread
                if crosses_switch and spread > 0 and packed > 0:
                    network_s = 1.0 / spread - 1.0 / packed
                    speed = 1.0 / (1.0 / packed + network_s / CROSS_SWITCH_FACTOR)
            self._iso_cache[sig] = speed
        return speed

    def loss(self, me: JobKey, other: JobKey) -> float:
        """Measured throughput ``me`` loses sharing a GPU with ``other`` (0 = none, 1 = all)."""
        row = self._losses.get(me, {})
        return row.get(other, self._mean_loss.get(me, 0.0))

    def speeds(self, nodes: Sequence[Node], running: Sequence[RunningJob],
               only: Collection[str] | None = None) -> dict[str, float]:
        index = ColocationIndex(running)
        keys = {rj.job.id: self.key_for(rj.job) for rj in running}
        out: dict[str, float] = {}
        switch_of: Mapping[str, str | None] | None = None  # looked up only if a job spans nodes
        for rj in select(running, only):
            placed_on = rj.placement.nodes()
            me = keys[rj.job.id]
            worst = 0.0
            for node in placed_on:
                pressed = sum(self.loss(me, keys[other]) for other in sorted(index.jobs_on.get(node, ()))
                              if other != rj.job.id)  # sorted: a float sum in hash order would vary
                worst = max(worst, pressed)
            crosses = False
            if len(placed_on) > 1:
                switch_of = switch_of if switch_of is not None else self._switches.of(nodes)
                crosses = len({switch_of.get(n) for n in placed_on}) > 1
            speed = self.isolated(rj.job, len(placed_on) == 1, crosses)
            out[rj.job.id] = speed / (1.0 + self.colocation_weight * worst)
        return out
