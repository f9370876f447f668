"""What a decision stores so that it can be judged later without rebuilding anything. Pure: no I/O.

On the snapshot the decision was made on (the request's own view of it), the daemon records:

- ``advised``: the layout it advised (in observe mode: would have), as Slurm runs it when pinned;
- ``slurm``: Slurm's own choice for the unmodified request (``slurm/cons_tres.py``, the release
  read at start), where the model knows it (not for a request that names nodes or fixes per-node
  counts: ``JobRequest.narrows``);
- other feasible layouts, at most ``alternatives`` (config ``evidence_alternatives``, default
  :data:`MAX_ALTERNATIVES`): Slurm's choice under a node count ``-N k`` (k in
  :data:`NODE_COUNTS`, the first ``alternatives`` of them inside the request's own range), that
  fits now and honours the whole request. Each costs a cons_tres pass over the nodes
  (0.05-0.2 ms at 1,000 nodes): hence the bound.

The daemon computes it after the reply, in a background worker (``daemon/evidence_worker.py``):
:class:`Pending` holds the inputs of the moment (the decision's own frozen snapshot view, the
placements, the deciding model's speed model object, not the service's current one), and
:class:`Recorded` is what follows the decision to the store, keyed by its id.

Each layout is its per-node ``[node, ps, workers]`` counts with its speed predicted then, by the
speed model of the model that decided (``model``), all in one pass where the model batches (a
layout recorded twice, the advised one being Slurm's own choice, is predicted once).
Layouts equal up to identical nodes (same CPUs, GPUs, memory and switch, same PS and worker
counts: :func:`signature`) are one layout, stored once. The record's size is bounded by the job's
own size: at most 2 + ``alternatives`` layouts of at most one entry per task.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from slurm_advisor.domain import ClusterSnapshot, Job, Placement, Role, TaskAssignment
from slurm_advisor.slurm.cons_tres import select, slurm_choice
from slurm_advisor.slurm.release import DEFAULT, Release

VERSION = 1
MAX_ALTERNATIVES = 2
NODE_COUNTS = (1, 2, 4)
ADVISED, SLURM = "advised", "slurm"
UNMODELLED = "not modelled: the request names nodes or fixes per-node counts, which Slurm places otherwise"

Tasks = list[list]  # [[node, ps, workers], ...]
LATER = "found by the worker"  # ``Pending.slurm``: Slurm's choice not needed on the request path, found after it


@dataclass(frozen=True)
class Pending:
    """One decision's evidence, still to compute: everything :func:`record` reads, captured when
    the decision was made. The snapshot is immutable (every change makes a new one) and ``speed``
    is the deciding model's own object, which a promotion or a canary's end replaces in the
    service without changing it, so computing this later gives what computing it then gave."""

    view: ClusterSnapshot
    job: Job
    advised: Placement
    slurm: Placement | str | None  # None: not modelled (topology/block); LATER: found when computed
    speed: Any
    model: str | None
    topology: bool = False
    release: Release = DEFAULT
    alternatives: int = MAX_ALTERNATIVES

    def __call__(self) -> dict[str, Any]:
        slurm = slurm_choice(self.view, self.job, topology=self.topology, release=self.release) \
            if self.slurm == LATER else self.slurm
        return record(self.view, self.job, self.advised, slurm, self.speed, self.model,
                      topology=self.topology, release=self.release, alternatives=self.alternatives)


@dataclass(frozen=True)
class Recorded:
    """A decision's evidence, as it follows the decision (spooled after it, applied to its row)."""

    decision_id: str
    evidence: dict[str, Any]


def tasks_of(placement: Placement) -> Tasks:
    return [[node, ps, workers] for node, ps, workers in placement.per_node()]


def placement_of(job: Job, tasks: Sequence[Sequence]) -> Placement:
    """The placement of per-node counts: each node's PS tasks, then its workers, node by node."""
    ps = [TaskAssignment(Role.PS, node) for node, p, _ in tasks for _ in range(int(p))]
    workers = [TaskAssignment(Role.WORKER, node) for node, _, w in tasks for _ in range(int(w))]
    return Placement(job.id, tuple(ps + workers))


def signature(tasks: Sequence[Sequence], kind: Callable[[str], tuple]) -> tuple:
    """What makes two layouts different: the kind of each node with its PS and worker counts."""
    return tuple(sorted((kind(node), int(ps), int(workers)) for node, ps, workers in tasks))


def node_kind(snapshot: ClusterSnapshot) -> Callable[[str], tuple]:
    """A node's kind on ``snapshot`` (CPUs, GPUs, memory, switch); a node it lacks is its own kind."""
    index, nodes = snapshot.layout.index, snapshot.nodes

    def kind(name: str) -> tuple:
        if name not in index:
            return (name,)
        n = nodes[index[name]]
        return (n.cpus, n.gpus, n.mem_mb, n.switch or "")

    return kind


def record(view: ClusterSnapshot, job: Job, advised: Placement, slurm: Placement | None, speed,
           model: str | None, *, topology: bool = False, release: Release = DEFAULT,
           alternatives: int = MAX_ALTERNATIVES) -> dict[str, Any]:
    """The evidence of one decision (see the module's doc); ``speed`` None: layouts, no predictions."""
    kind = node_kind(view)
    named: list[tuple[str, Placement]] = [(ADVISED, advised)]
    seen = {signature(tasks_of(advised), kind)}
    out: dict[str, Any] = {"v": VERSION, "model": model if speed is not None else None}
    narrows = job.request is not None and job.request.narrows()
    if narrows:
        out[SLURM] = UNMODELLED
    elif slurm is not None:
        named.append((SLURM, slurm))  # kept even when it is the advised one: shadow compares to it
        seen.add(signature(tasks_of(slurm), kind))
    if not narrows and alternatives > 0:
        named.extend(_alternatives(view, job, seen, kind, topology, release, alternatives))
    out["layouts"] = [{"name": name, "tasks": tasks_of(p), "predicted": s}
                      for (name, p), s in zip(named, _predicted(speed, view, job, [p for _, p in named]))]
    return out


def _predicted(speed, view: ClusterSnapshot, job: Job, placements: list[Placement]) -> list[float | None]:
    """Each placement's predicted speed (None without a speed model), an equal one predicted once."""
    if speed is None:
        return [None] * len(placements)
    keys = [tuple(p.per_node()) for p in placements]
    unique = list(dict.fromkeys(keys))
    first = {key: placements[keys.index(key)] for key in unique}
    by_key = dict(zip(unique, predict_many(speed, view, job, [first[k] for k in unique])))
    return [by_key[key] for key in keys]


def _alternatives(view: ClusterSnapshot, job: Job, seen: set, kind, topology: bool,
                  release: Release, most: int) -> list[tuple[str, Placement]]:
    """Slurm's layouts under the first ``most`` node counts inside the request's range, new ones only."""
    request = job.request
    low, high = (1, None) if request is None else (request.min_nodes, request.max_nodes)
    counts = [k for k in NODE_COUNTS if low <= k <= min(job.num_tasks, high or job.num_tasks)][:most]
    out: list[tuple[str, Placement]] = []
    for k in counts:
        placement = select(view, job, topology=topology, min_nodes=k, max_nodes=k, release=release)
        if placement is None or (request is not None and request.violations(view, placement)):
            continue
        sig = signature(tasks_of(placement), kind)
        if sig not in seen:
            seen.add(sig)
            out.append((f"nodes={k}", placement))
    return out


def predict_many(speed, snapshot: ClusterSnapshot, job: Job, placements: Sequence[Placement]) -> list[float]:
    """Each placement's predicted speed, in one batch where the speed model offers one."""
    batch = getattr(speed, "predict_many", None)
    if batch is not None:
        return [round(float(s), 6) for s in batch(snapshot, job, placements)]
    return [round(float(speed.predict(snapshot, job, p)), 6) for p in placements]


def layouts(evidence: dict[str, Any] | None) -> dict[str, dict[str, Any]]:
    """The recorded layouts by name (empty: none recorded)."""
    return {entry["name"]: entry for entry in (evidence or {}).get("layouts", ())}
