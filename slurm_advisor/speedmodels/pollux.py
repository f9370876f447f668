"""Ground truth from Pollux's measured step times by placement (AdaptDL ``osdi21-artifact``).

Pollux measured, per model, the step time of every placement of 1-4 replicas on each of 1-4
nodes (``placements.csv``) and of larger jobs by (num_nodes, num_replicas)
(``scalability.csv``). The lookup follows AdaptDL's ``Application.get_throughput``:

* **Placement -> tuple.** Workers per node, zeros dropped, rotated to the lexicographically
  smallest rotation. A measured tuple is looked up exactly and interpolated linearly over
  ``local_bsz`` (the job's batch size, else the profile's, clamped to the measured range).
* **Fallback.** Anything else (a digit above 4, more than 4 nodes) is interpolated over
  (num_nodes, num_replicas): num_nodes is capped at 16 as AdaptDL does; at each measured node
  count the replica count is interpolated linearly between measured rows (rows are the mean of
  all placements with that node and replica count, plus ``scalability.csv``), then the two node
  counts around the query are blended linearly. AdaptDL uses a 3-D Delaunay ``griddata``, which
  returns NaN outside the measured hull; ours always answers.
* **More replicas than measured** at a node count (e.g. 8 GPUs on one 8-GPU node): the largest
  measured row keeps its compute time and its sync time grows like ring all-reduce traffic per
  GPU, ``2 (r-1)/r`` times the gradient size, i.e. by ``((r-1)/r) / ((m-1)/m)``.
* **Parameter-server jobs** are priced as data-parallel over their workers; every node holding
  only PS tasks counts as one more node (it adds a network hop to each synchronisation), which
  sends the placement to the fallback.

Pollux measured **no co-location interference**: a job's speed never depends on its neighbours.
Under this ground truth only consolidation matters. speed = 1 / step_time.
"""
from __future__ import annotations

import bisect
import csv
from collections import defaultdict
from collections.abc import Collection, Sequence
from pathlib import Path

from slurm_advisor.domain import Job, Node, Role, RunningJob
from slurm_advisor.domain.jobtypes import profile_for
from slurm_advisor.errors import InputError
from slurm_advisor.speedmodels.base import select

MAX_NODES = 16  # AdaptDL caps num_nodes here: the largest measured cluster


class Curve:
    """Step and sync time against local batch size; linear in between, clamped outside."""

    def __init__(self, points: dict[int, tuple[float, float]]):
        self.bsz = sorted(points)
        self.step = [points[b][0] for b in self.bsz]
        self.sync = [points[b][1] for b in self.bsz]

    def at(self, bsz: float) -> tuple[float, float]:
        bsz = min(max(bsz, self.bsz[0]), self.bsz[-1])
        i = bisect.bisect_left(self.bsz, bsz)
        if self.bsz[i] == bsz:
            return self.step[i], self.sync[i]
        lo, hi = self.bsz[i - 1], self.bsz[i]
        w = (bsz - lo) / (hi - lo)
        return (self.step[i - 1] + w * (self.step[i] - self.step[i - 1]),
                self.sync[i - 1] + w * (self.sync[i] - self.sync[i - 1]))


def canonical(counts: Sequence[int]) -> tuple[int, ...]:
    """Zeros dropped, smallest rotation: the form AdaptDL keys placements by."""
    t = tuple(c for c in counts if c)
    return min((t[i:] + t[:i] for i in range(len(t))), default=())


def _rows(path: Path) -> list[dict[str, str]]:
    try:
        with open(path, newline="", encoding="utf-8") as fh:
            rows = list(csv.DictReader(fh))
    except OSError as exc:
        raise InputError(f"{path}: cannot read Pollux profile: {exc}") from exc
    if not rows:
        raise InputError(f"{path}: no rows")
    return rows


def _mean(points: dict, key: tuple, bsz: int, step: float, sync: float) -> None:
    acc = points[key].setdefault(bsz, [0.0, 0.0, 0])
    acc[0] += step
    acc[1] += sync
    acc[2] += 1


class ModelProfile:
    """One Pollux model folder: exact placement curves and the (nodes, replicas) grid."""

    def __init__(self, folder: Path):
        exact: dict[tuple, dict] = defaultdict(dict)
        grid: dict[tuple, dict] = defaultdict(dict)
        path = folder / "placements.csv"
        try:
            for r in _rows(path):
                digits = tuple(int(c) for c in r["placement"])
                bsz, step, sync = int(r["local_bsz"]), float(r["step_time"]), float(r["sync_time"])
                exact[canonical(digits)][bsz] = (step, sync)
                _mean(grid, (len(digits), sum(digits)), bsz, step, sync)
            path = folder / "scalability.csv"
            for r in _rows(path):
                _mean(grid, (int(r["num_nodes"]), int(r["num_replicas"])), int(r["local_bsz"]),
                      float(r["step_time"]), float(r["sync_time"]))
        except (KeyError, ValueError, TypeError) as exc:
            raise InputError(f"{path}: malformed row: {exc}") from exc
        self.exact = {k: Curve(v) for k, v in exact.items()}
        by_nodes: dict[int, dict[int, Curve]] = defaultdict(dict)
        for (n, r), pts in grid.items():
            by_nodes[n][r] = Curve({b: (a[0] / a[2], a[1] / a[2]) for b, a in pts.items()})
        self.levels = sorted(by_nodes)
        self.grid = {n: (sorted(rs), rs) for n, rs in by_nodes.items()}

    def step_time(self, placement: tuple[int, ...], extra_nodes: int, bsz: float) -> float:
        if not extra_nodes and placement in self.exact:
            return self.exact[placement].at(bsz)[0]
        nodes = min(len(placement) + extra_nodes, MAX_NODES)
        return self.fallback(nodes, sum(placement), bsz)

    def fallback(self, nodes: int, replicas: int, bsz: float) -> float:
        """Linear over node count between the measured levels around ``nodes``."""
        i = bisect.bisect_left(self.levels, nodes)
        if i < len(self.levels) and self.levels[i] == nodes:
            return self._at_level(nodes, replicas, bsz)
        lo, hi = self.levels[max(i - 1, 0)], self.levels[min(i, len(self.levels) - 1)]
        if lo == hi:
            return self._at_level(lo, replicas, bsz)
        w = (nodes - lo) / (hi - lo)
        return (1 - w) * self._at_level(lo, replicas, bsz) + w * self._at_level(hi, replicas, bsz)

    def _at_level(self, nodes: int, replicas: int, bsz: float) -> float:
        """Linear over replicas at one node count; ring-scaled sync beyond the largest row."""
        counts, curves = self.grid[nodes]
        if replicas <= counts[0]:
            return curves[counts[0]].at(bsz)[0]
        if replicas >= counts[-1]:
            top = counts[-1]
            step, sync = curves[top].at(bsz)
            grow = ((replicas - 1) / replicas) / ((top - 1) / top) if top > 1 else 1.0
            return step - sync + sync * grow
        j = bisect.bisect_left(counts, replicas)
        lo, hi = counts[j - 1], counts[j]
        w = (replicas - lo) / (hi - lo)
        return (1 - w) * curves[lo].at(bsz)[0] + w * curves[hi].at(bsz)[0]


def _layout(rj: RunningJob) -> tuple[tuple[int, ...], int]:
    """Canonical workers-per-node tuple and the number of nodes holding only PS tasks."""
    counts = rj.placement.role_counts()
    workers = [c[Role.WORKER] for c in counts.values()]
    return canonical(workers), sum(1 for w in workers if w == 0)


class PolluxSpeedModel:
    """Iterations/s from Pollux's placement profiles (see module docstring)."""

    name = "pollux"
    local = True

    def __init__(self, models_dir: str | Path):
        root = Path(models_dir)
        if not root.is_dir():
            raise InputError(f"{root}: Pollux models directory not found")
        folders = sorted(p for p in root.iterdir() if p.is_dir())
        if not folders:
            raise InputError(f"{root}: no Pollux model folders")
        self.models = {p.name: ModelProfile(p) for p in folders}
        self._cache: dict[tuple, float] = {}

    def model_for(self, job: Job) -> str:
        """The measured model standing in for ``job`` (imagenet when its own is absent)."""
        name = profile_for(job.type, job.model_size_mb, job.batch_size).pollux
        return name if name in self.models else ("imagenet" if "imagenet" in self.models
                                                 else next(iter(self.models)))

    def speed(self, rj: RunningJob) -> float:
        job = rj.job
        placement, extra = _layout(rj)
        sig = (job.type, job.batch_size, placement, extra)
        speed = self._cache.get(sig)
        if speed is None:
            bsz = job.batch_size or profile_for(job.type, job.model_size_mb).batch_size
            step = self.models[self.model_for(job)].step_time(placement, extra, bsz)
            speed = self._cache[sig] = 1.0 / step
        return speed

    def speeds(self, nodes: Sequence[Node], running: Sequence[RunningJob],
               only: Collection[str] | None = None) -> dict[str, float]:
        return {rj.job.id: self.speed(rj) for rj in select(running, only)}
