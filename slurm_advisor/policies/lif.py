"""`lif`: least-interference-first, Harmony's third baseline. Each task (PS first, then
workers) goes to the node with room where the interference it suffers and causes is least,
by a pairwise profile of job types fitted from logged speed samples; ties go to the
least-loaded node (as `spread`), then to the earlier node in Slurm's order.

The profile says, for job types A and B, ``cost(A, B)``: how much A's log speed drops per task
of B sharing a node with each of A's tasks (A runs ``exp(-cost)`` as fast; ``slowdown`` is the
lost share). It is fitted within each job run (a job keeps its placement, so its speed changes
only with its neighbours): per run, log speed and exposures are demeaned, so neither the job's
size nor its placement's locality confound the fit. Types it has never seen fall back to a
type-independent average: the victim's sensitivity to any neighbour, else the aggressor's
effect on anyone, else the overall mean; with no samples every cost is 0 and LIF is `spread`.

A placing task of type A on node n costs ``sum_B tasks_n(B) * (cost(A, B) + cost(B, A))``:
what it suffers plus what it causes. The job's own tasks are not counted (the samples never
measure a job against itself). Per-node task counts by type come from the cluster's
:class:`LoadIndex`, kept in step with snapshots by the jobs that started or ended: a decision
costs one numpy pass over the nodes per task, never a loop over the running jobs.

The profile is saved as ``lif_profile.json`` beside a trained model (``checkpoint.save``):
``PolicyContext(model_dir=...)`` makes LIF use the profile fitted from that model's samples.
"""
from __future__ import annotations

import json
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from slurm_advisor.domain import ClusterSnapshot, Job, Placement, SpeedSample, TaskAssignment
from slurm_advisor.errors import InputError
from slurm_advisor.policies.base import free_shares
from slurm_advisor.policies.load_index import LoadIndex

PROFILE_FILE = "lif_profile.json"
FORMAT = "slurm-advisor lif profile"
VERSION = 1
# Ridge weight pulling a type's (or pair's) cost toward its fallback, in squared exposures:
# a pair seen in a few samples stays near the average, one seen in hundreds keeps its own.
PRIOR_WEIGHT = 4.0
_SEEN = 1e-9  # squared exposure change below which a type counts as never seen changing (rounding)


@dataclass(frozen=True)
class InterferenceProfile:
    """Pairwise interference of job types (log-speed loss per co-located task); pure data."""

    overall: float = 0.0                                          # any type beside any type
    victim: dict[str, float] = field(default_factory=dict)        # A beside any type
    aggressor: dict[str, float] = field(default_factory=dict)     # any type beside B
    pair: dict[tuple[str, str], float] = field(default_factory=dict)  # (A, B): A beside B
    samples: int = 0                                              # samples it was fitted on

    @property
    def is_neutral(self) -> bool:
        return not any((self.overall, *self.victim.values(), *self.aggressor.values(), *self.pair.values()))

    def cost(self, victim: str, aggressor: str) -> float:
        """Log-speed loss of a ``victim`` task per ``aggressor`` task on its node."""
        c = self.pair.get((victim, aggressor))
        if c is not None:
            return c
        c = self.victim.get(victim)
        if c is not None:
            return c
        return self.aggressor.get(aggressor, self.overall)

    def slowdown(self, victim: str, aggressor: str) -> float:
        """The share of its speed ``victim`` loses beside one ``aggressor`` task."""
        return 1.0 - math.exp(-self.cost(victim, aggressor))

    def to_dict(self) -> dict:
        pairs: dict[str, dict[str, float]] = {}
        for (a, b), c in sorted(self.pair.items()):
            pairs.setdefault(a, {})[b] = c
        return {"format": FORMAT, "version": VERSION, "samples": self.samples, "overall": self.overall,
                "victim": dict(sorted(self.victim.items())), "aggressor": dict(sorted(self.aggressor.items())),
                "pair": pairs}

    @classmethod
    def from_dict(cls, d: object, where: str) -> InterferenceProfile:
        """The profile in ``d``; InputError naming ``where`` and the field for anything wrong."""
        if not isinstance(d, dict):
            raise InputError(f"{where}: must be a JSON object, got {type(d).__name__}")
        if d.get("format") != FORMAT or d.get("version") != VERSION:
            raise InputError(f"{where}: not a {FORMAT} of version {VERSION} "
                             f"(format {d.get('format')!r}, version {d.get('version')!r})")
        samples = d.get("samples", 0)
        if isinstance(samples, bool) or not isinstance(samples, int) or samples < 0:
            raise InputError(f"{where}: field 'samples' must be a count, got {samples!r}")
        pairs = d.get("pair", {})
        if not isinstance(pairs, dict):
            raise InputError(f"{where}: field 'pair' must be an object of objects, got {type(pairs).__name__}")
        pair = {(a, b): c for a, row in pairs.items()
                for b, c in _costs(row, f"{where}: field 'pair.{a}'").items()}
        return cls(_cost(d.get("overall"), f"{where}: field 'overall'"),
                   _costs(d.get("victim", {}), f"{where}: field 'victim'"),
                   _costs(d.get("aggressor", {}), f"{where}: field 'aggressor'"), pair, samples)

    def save(self, path: Path) -> Path:
        path = Path(path)
        path.write_text(json.dumps(self.to_dict(), indent=2) + "\n")
        return path

    @classmethod
    def load(cls, path: Path) -> InterferenceProfile:
        path = Path(path)
        try:
            data = json.loads(path.read_bytes().decode("utf-8"))
        except OSError as e:
            raise InputError(f"{path}: cannot read the LIF profile: {e.strerror}") from None
        except UnicodeDecodeError as e:
            raise InputError(f"{path}: not UTF-8 text (byte {e.start})") from None
        except json.JSONDecodeError as e:
            raise InputError(f"{path}: not valid JSON: {e}") from None
        return cls.from_dict(data, str(path))


def _cost(value: object, what: str) -> float:
    ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value) and value >= 0
    if not ok:
        raise InputError(f"{what} must be a non-negative number, got {value!r}")
    return float(value)


def _costs(value: object, what: str) -> dict[str, float]:
    if not isinstance(value, dict):
        raise InputError(f"{what} must be an object of job type -> cost, got {type(value).__name__}")
    return {str(k): _cost(v, f"{what}.{k}") for k, v in value.items()}


def profile_for_model(model_dir: Path | None) -> InterferenceProfile:
    """The profile saved beside the model in ``model_dir``; neutral without one (no model, or a
    model trained before profiles were saved)."""
    path = Path(model_dir) / PROFILE_FILE if model_dir is not None else None
    return InterferenceProfile.load(path) if path is not None and path.exists() else InterferenceProfile()


# -- fitting ------------------------------------------------------------------------------------
def fit_profile(samples: Iterable[SpeedSample], prior_weight: float = PRIOR_WEIGHT) -> InterferenceProfile:
    """The profile from logged samples: ridge least squares on within-run demeaned log speeds,
    each level shrunk toward the one above (pair -> victim -> overall; aggressor -> overall)."""
    runs, victims, ys, rows = _rows(samples)
    types = sorted({t for row in rows for t in row})
    if not types:
        return InterferenceProfile(samples=len(ys))
    x = np.zeros((len(rows), len(types)))
    col = {t: i for i, t in enumerate(types)}
    for i, row in enumerate(rows):
        for t, e in row.items():
            x[i, col[t]] = e
    y = np.asarray(ys)
    x, y = _demeaned(np.asarray(runs), x), _demeaned(np.asarray(runs), y[:, None])[:, 0]
    overall = _ridge(x.sum(axis=1, keepdims=True), y, np.zeros(1), prior_weight)[0]
    aggressor = _ridge(x, y, np.full(len(types), overall), prior_weight)
    seen = (x * x).sum(axis=0) > _SEEN
    victim: dict[str, float] = {}
    pair: dict[tuple[str, str], float] = {}
    victims = np.asarray(victims)
    for v in sorted(set(victims.tolist())):
        xv, yv = x[victims == v], y[victims == v]
        if not (xv * xv).sum() > _SEEN:
            continue  # never seen beside a changing neighbour: the fallbacks speak for it
        victim[v] = c_v = _ridge(xv.sum(axis=1, keepdims=True), yv, np.full(1, overall), prior_weight)[0]
        cols = np.flatnonzero((xv * xv).sum(axis=0) > _SEEN)
        fitted = _ridge(xv[:, cols], yv, np.full(len(cols), c_v), prior_weight)
        pair.update({(v, types[j]): c for j, c in zip(cols.tolist(), fitted)})
    return InterferenceProfile(overall, victim, {t: aggressor[i] for i, t in enumerate(types) if seen[i]}, pair,
                               len(y))


def _rows(samples: Iterable[SpeedSample]) -> tuple[list[int], list[str], list[float], list[dict[str, float]]]:
    """Per usable sample: its run (one job on one placement), the job's type, -log speed, and
    per neighbour type the mean number of its tasks beside each of the job's tasks."""
    run_ids: dict[object, int] = {}
    runs, victims, ys, rows = [], [], [], []
    for s in samples:
        if not (s.speed > 0 and math.isfinite(s.speed)):
            continue
        own = {n: ps + w for n, ps, w in s.subject.placement.per_node()}
        total = sum(own.values())
        exposure: dict[str, float] = {}
        for nb in s.neighbours:
            for n, ps, w in nb.placement.per_node():
                if n in own:
                    exposure[nb.job.type] = exposure.get(nb.job.type, 0.0) + own[n] * (ps + w) / total
        runs.append(run_ids.setdefault((s.subject.job.id, s.subject.start_time, s.subject.placement.tasks),
                                       len(run_ids)))
        victims.append(s.subject.job.type)
        ys.append(-math.log(s.speed))
        rows.append(exposure)
    return runs, victims, ys, rows


def _demeaned(groups: np.ndarray, values: np.ndarray) -> np.ndarray:
    counts = np.bincount(groups).astype(float)
    sums = np.zeros((len(counts), values.shape[1]))
    np.add.at(sums, groups, values)
    return values - (sums / counts[:, None])[groups]


def _ridge(x: np.ndarray, y: np.ndarray, prior: np.ndarray, weight: float) -> list[float]:
    """argmin |x c - y|^2 + weight |c - prior|^2, clipped at 0 (sharing never speeds a job up)."""
    lhs = x.T @ x + weight * np.eye(x.shape[1])
    c = np.linalg.solve(lhs, x.T @ y + weight * prior)
    return [max(0.0, float(v)) for v in c]


# -- the policy ---------------------------------------------------------------------------------
class LifPolicy:
    name = "lif"

    def __init__(self, profile: InterferenceProfile | None = None):
        self.profile = profile or InterferenceProfile()
        self._neutral = self.profile.is_neutral

    def place(self, snapshot: ClusterSnapshot, job: Job, rng: np.random.Generator | None = None
              ) -> Placement | None:
        cost = self._node_costs(snapshot, job)
        cap = snapshot.layout.capacity
        free = snapshot.free_array().copy()
        share = free_shares(free, cap)
        placed: list[TaskAssignment] = []
        for role in job.roles():
            d = job.demand(role)
            fits = np.flatnonzero((free[:, 0] >= d.cpus) & (free[:, 1] >= d.gpus) & (free[:, 2] >= d.mem_mb))
            if not fits.size:
                return None
            least = fits[cost[fits] == cost[fits].min()]
            i = int(least[np.argmax(share[least])])  # the first of the least loaded: Slurm's order
            free[i] -= (d.cpus, d.gpus, d.mem_mb)
            share[i] = free_shares(free[i:i + 1], cap[i:i + 1])[0]
            placed.append(TaskAssignment(role, snapshot.nodes[i].name))
        return Placement(job.id, tuple(placed))

    def score_nodes(self, snapshot: ClusterSnapshot, job: Job) -> dict[str, float]:
        """Minus the interference a task of the job would suffer and cause on each node (0:
        a clean node; all 0 with a neutral profile, where the least-loaded node wins)."""
        cost = self._node_costs(snapshot, job)
        return {n.name: -float(c) for n, c in zip(snapshot.nodes, cost)}

    def _node_costs(self, snapshot: ClusterSnapshot, job: Job) -> np.ndarray:
        """Per node (in order): interference of one task of ``job`` with the tasks there."""
        if self._neutral or not snapshot.running_jobs:
            return np.zeros(len(snapshot.nodes))
        with LoadIndex.synced(snapshot) as index:
            types = list(index.types)
            counts = index.type_counts[:, :len(types)].astype(float)
        p, a = self.profile, job.type
        weights = np.array([p.cost(a, t) + p.cost(t, a) for t in types])
        # rounded so that equal neighbourhoods tie exactly (then load, then Slurm's order decide)
        return np.round(counts @ weights, 9)


__all__ = ["PROFILE_FILE", "InterferenceProfile", "LifPolicy", "fit_profile", "profile_for_model"]

