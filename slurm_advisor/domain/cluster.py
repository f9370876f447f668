"""Nodes and the immutable cluster snapshot a policy decides on.

Sites run 1,000-10,000 nodes, and every decision and every simulated event makes a new
snapshot, so a snapshot must not cost O(nodes) Python work. Free capacity is kept as three
integer arrays in node order (copying them is a memcpy); what is shared by every snapshot of
one cluster (node order, name -> index, capacities, switches) lives once in a ``NodeLayout``;
running jobs sit in a ``RunningJobs`` map (start order, looked up by id in O(1); adding or
removing one job copies a few hundred entries, not every running job).
"""
from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from types import MappingProxyType

import numpy as np

from slurm_advisor.domain.job import Job
from slurm_advisor.domain.placement import Placement
from slurm_advisor.domain.resources import Resources
from slurm_advisor.domain.running_jobs import EMPTY, Recent, RunningJobs


@dataclass(frozen=True, slots=True)
class Node:
    name: str
    cpus: int
    gpus: int
    mem_mb: int
    switch: str | None = None
    features: frozenset[str] = frozenset()
    #: Slurm partitions holding the node; empty: no partitions known (simulated clusters)
    partitions: frozenset[str] = frozenset()

    @property
    def capacity(self) -> Resources:
        return Resources(self.cpus, self.gpus, self.mem_mb)


@dataclass(frozen=True, slots=True)
class RunningJob:
    job: Job
    placement: Placement
    start_time: float = 0.0


class NodeLayout:
    """What every snapshot of one cluster shares: nodes in Slurm's order and their indices."""

    def __init__(self, nodes: tuple[Node, ...]):
        #: the last few running-job maps indexed by node (``ClusterSnapshot.jobs_on``): the
        #: next snapshot's index is patched from the nearest by the jobs that started or ended
        self.jobs_by_node = Recent()
        #: the same for the jobs crossing each switch's uplink (``learned.site_features``): per
        #: layout, since one running-job map (the empty one above all) is shared by clusters
        self.uplinks = Recent()
        self._masks: dict[tuple, np.ndarray] = {}  # see mask()
        self.nodes = nodes
        #: whether Slurm named the nodes' partitions (a simulated cluster names none; a node of a
        #: real one may be in none, which keeps it out of every partition)
        self.has_partitions = any(n.partitions for n in nodes)
        self.index: Mapping[str, int] = MappingProxyType({n.name: i for i, n in enumerate(nodes)})
        if len(self.index) != len(nodes):
            raise ValueError("node names must be unique")
        self.capacity = np.array([[n.cpus, n.gpus, n.mem_mb] for n in nodes], dtype=np.int64).reshape(-1, 3)
        self.capacity.flags.writeable = False
        #: the whole cluster's CPUs, GPUs and memory: what no job can ever exceed
        self.total = Resources(*(int(x) for x in self.capacity.sum(axis=0)))
        switches = sorted({n.switch for n in nodes if n.switch is not None})
        self.switch_names: tuple[str | None, ...] = (None, *switches)
        ids = {s: i + 1 for i, s in enumerate(switches)}
        self.switch_id = np.array([ids.get(n.switch, 0) for n in nodes], dtype=np.int64)
        self.switch_id.flags.writeable = False
        self.switch_ids: list[int] = self.switch_id.tolist()  # the same, for per-node lookups in Python loops
        # the switch ids in the order topology.conf would list them: by their first node
        _, first = np.unique(self.switch_id, return_index=True)
        self.switch_order = self.switch_id[np.sort(first)]
        self.switch_order.flags.writeable = False
        # each switch id's nodes, ascending: what a node choice reads leaf by leaf, O(its nodes)
        by_switch = np.argsort(self.switch_id, kind="stable")
        bounds = np.searchsorted(self.switch_id[by_switch], np.arange(len(self.switch_names) + 1))
        self.switch_members: tuple[np.ndarray, ...] = tuple(
            by_switch[bounds[s]:bounds[s + 1]] for s in range(len(self.switch_names)))
        for members in self.switch_members:
            members.flags.writeable = False

    def mask(self, key: tuple, compute) -> np.ndarray:
        """A read-only per-node mask that depends on the nodes alone (a partition's, a feature
        set's), computed once per layout: ``compute()`` gives one bool per node."""
        masks = self._masks
        mask = masks.get(key)
        if mask is None:
            if len(masks) > 256:  # requests name few partitions and feature sets; bound it anyway
                masks.clear()
            mask = np.array(compute(), dtype=bool).reshape(len(self.nodes))
            mask.flags.writeable = False
            masks[key] = mask
        return mask

    @classmethod
    def of(cls, nodes: tuple[Node, ...]) -> NodeLayout:
        """One layout per nodes tuple (by identity: equal tuples built apart get their own)."""
        layout = _LAYOUTS.get(id(nodes))
        if layout is None or layout.nodes is not nodes:
            layout = cls(nodes)
            if len(_LAYOUTS) > 64:
                _LAYOUTS.clear()
            _LAYOUTS[id(nodes)] = layout
        return layout


def _jobs_by_node(layout: NodeLayout, running: RunningJobs) -> dict[str, tuple[RunningJob, ...]]:
    """node name -> the running jobs with a task there, in start order. Patched from a recent
    index of the cluster (an event or a claim away: O(the jobs that changed and their nodes) and
    a copy of the dict), else built over every running job: at 10,000 nodes a full build took
    ~15 ms in each decision of the search."""
    return layout.jobs_by_node.get(running, _build_jobs_by_node, functools.partial(_patched, running=running))


def _build_jobs_by_node(running: RunningJobs) -> dict[str, tuple[RunningJob, ...]]:
    on: dict[str, list[RunningJob]] = {}
    for rj in running.values():
        for node in rj.placement.nodes():
            on.setdefault(node, []).append(rj)
    return {n: tuple(js) for n, js in on.items()}


def _patched(index: dict[str, tuple[RunningJob, ...]], gone: list[RunningJob], new: list[RunningJob], *,
             running: RunningJobs) -> dict[str, tuple[RunningJob, ...]] | None:
    """``index`` without ``gone`` and with ``new``, each node's jobs in ``running``'s start order
    (a new job need not be the latest: a snapshot from before another job ended). None for a
    job replaced under its id: it keeps its place in start order, so the index is built anew."""
    if {rj.job.id for rj in gone} & {rj.job.id for rj in new}:
        return None
    out = dict(index)
    for rj in gone:
        for node in rj.placement.nodes():
            kept = tuple(o for o in out.get(node, ()) if o is not rj)
            if kept:
                out[node] = kept
            else:
                out.pop(node, None)
    touched = set()
    for rj in new:
        for node in rj.placement.nodes():
            out[node] = out.get(node, ()) + (rj,)
            touched.add(node)
    for node in touched:
        if len(out[node]) > 1:
            out[node] = tuple(sorted(out[node], key=lambda o: running.position(o.job.id)))
    return out


# id(nodes tuple) -> its layout; the layout keeps the tuple alive, so an id is never reused
# while its entry exists.
_LAYOUTS: dict[int, NodeLayout] = {}


class FreeView(Mapping):
    """node name -> free Resources, read from the snapshot's arrays (no per-node objects kept)."""

    __slots__ = ("_free", "_layout")

    def __init__(self, layout: NodeLayout, free: np.ndarray):
        self._layout, self._free = layout, free

    def __getitem__(self, name: str) -> Resources:
        c, g, m = self._free[self._layout.index[name]].tolist()
        return Resources(c, g, m)

    def get(self, name, default=None):
        i = self._layout.index.get(name)
        return default if i is None else Resources(*self._free[i].tolist())

    def __iter__(self) -> Iterator[str]:
        return iter(self._layout.index)

    def __len__(self) -> int:
        return len(self._layout.nodes)

    def values(self):
        return [Resources(c, g, m) for c, g, m in self._free.tolist()]

    def items(self):
        return list(zip(self._layout.index, self.values()))


class _Derived:
    """The running jobs as a tuple, and by node: shared by snapshots with the same running jobs."""

    __slots__ = ("jobs_on", "running")

    def __init__(self) -> None:
        self.running: tuple[RunningJob, ...] | None = None
        self.jobs_on: dict[str, tuple[RunningJob, ...]] | None = None


class ClusterSnapshot:
    """The cluster at one instant: nodes in Slurm's order, free capacity, running placements.

    ``free`` is kept explicitly (not derived from ``running``) because on a real cluster
    other allocations that the advisor did not place also consume capacity. Immutable: every
    change returns a new snapshot, which shares the node layout and copies only arrays.
    """

    __slots__ = ("_derived", "_free", "_running", "layout", "time")

    def __init__(self, nodes: tuple[Node, ...] | list[Node], free: Mapping[str, Resources],
                 running: tuple[RunningJob, ...] = (), time: float = 0.0):
        nodes = tuple(nodes)
        layout = NodeLayout.of(nodes)
        arr = np.zeros((len(nodes), 3), dtype=np.int64)
        for name, r in free.items():
            arr[layout.index[name]] = (r.cpus, r.gpus, r.mem_mb)
        self._init(layout, arr, RunningJobs.of(running), time)

    def _init(self, layout: NodeLayout, free: np.ndarray, running: RunningJobs, time: float,
              derived: _Derived | None = None) -> None:
        free.flags.writeable = False
        self.layout, self._free, self._running, self.time = layout, free, running, time
        # What depends on the running jobs alone, built on demand and shared by every snapshot
        # that shares them (``at``, ``with_free``): the daemon derives one per request, and
        # rebuilding the running tuple cost O(running jobs) each time.
        self._derived = derived if derived is not None else _Derived()

    @classmethod
    def _make(cls, layout: NodeLayout, free: np.ndarray, running: RunningJobs,
              time: float, derived: _Derived | None = None) -> ClusterSnapshot:
        snap = cls.__new__(cls)
        snap._init(layout, free, running, time, derived)
        return snap

    @classmethod
    def empty(cls, nodes: tuple[Node, ...] | list[Node], time: float = 0.0) -> ClusterSnapshot:
        layout = NodeLayout.of(tuple(nodes)) if isinstance(nodes, tuple) else NodeLayout(tuple(nodes))
        return cls._make(layout, layout.capacity.copy(), EMPTY, time)

    # -- reading ---------------------------------------------------------------------------
    @property
    def nodes(self) -> tuple[Node, ...]:
        return self.layout.nodes

    @property
    def free(self) -> FreeView:
        return FreeView(self.layout, self._free)

    def free_array(self) -> np.ndarray:
        """Free (cpus, gpus, mem_mb) per node in node order; read-only, shape (nodes, 3)."""
        return self._free

    def index(self, name: str) -> int:
        return self.layout.index[name]

    @property
    def running(self) -> tuple[RunningJob, ...]:
        derived = self._derived
        if derived.running is None:
            derived.running = tuple(self._running.values())
        return derived.running

    @property
    def running_jobs(self) -> RunningJobs:
        """job id -> RunningJob in start order (no tuple built: ``len`` and lookups are O(1)).
        The same object for snapshots that share their running jobs (``at``, ``with_free``): a
        cache key for what depends on the running jobs alone."""
        return self._running

    def running_job(self, job_id: str) -> RunningJob | None:
        return self._running.get(job_id)

    def jobs_on(self, name: str) -> tuple[RunningJob, ...]:
        """Running jobs with a task on node ``name``, in start order (the index is made once per
        set of running jobs, on demand, and patched from a recent one where it can be)."""
        derived = self._derived
        if derived.jobs_on is None:
            derived.jobs_on = _jobs_by_node(self.layout, self._running)
        return derived.jobs_on.get(name, ())

    def node(self, name: str) -> Node:
        return self.layout.nodes[self.layout.index[name]]

    def fits(self, job: Job, placement: Placement) -> bool:
        index = self.layout.index
        for name, d in placement.demand_per_node(job).items():
            i = index.get(name)
            if i is None:
                return False
            c, g, m = self._free[i].tolist()
            if d.cpus > c or d.gpus > g or d.mem_mb > m:
                return False
        return True

    def total_capacity(self) -> Resources:
        c, g, m = self.layout.capacity.sum(axis=0).tolist() if self.nodes else (0, 0, 0)
        return Resources(c, g, m)

    # -- changing (each returns a new snapshot) --------------------------------------------
    def with_job(self, job: Job, placement: Placement, time: float | None = None) -> ClusterSnapshot:
        """The snapshot after ``job`` starts on ``placement``; refuses an over-commit."""
        if not self.fits(job, placement):
            raise ValueError(f"job {job.id} does not fit on {placement.node_list()}")
        free = self._apply(job, placement, -1)
        started = time if time is not None else self.time
        running = self._running.adding(RunningJob(job, placement, started))
        return ClusterSnapshot._make(self.layout, free, running, started)

    def without_job(self, job_id: str, time: float | None = None) -> ClusterSnapshot:
        gone = self._running.get(job_id)
        if gone is None:
            raise KeyError(f"job {job_id} is not running")
        free = self._apply(gone.job, gone.placement, +1)
        running = self._running.removing(job_id)
        return ClusterSnapshot._make(self.layout, free, running, self.time if time is None else time)

    def with_free(self, free: np.ndarray) -> ClusterSnapshot:
        """The same snapshot with other free capacity (e.g. reserved nodes masked out)."""
        return ClusterSnapshot._make(self.layout, np.array(free, dtype=np.int64), self._running, self.time,
                                     self._derived)

    def at(self, time: float) -> ClusterSnapshot:
        return ClusterSnapshot._make(self.layout, self._free, self._running, time, self._derived)

    def _apply(self, job: Job, placement: Placement, sign: int) -> np.ndarray:
        free = self._free.copy()
        index = self.layout.index
        for name, d in placement.demand_per_node(job).items():
            free[index[name]] += (sign * d.cpus, sign * d.gpus, sign * d.mem_mb)
        return free

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ClusterSnapshot):
            return NotImplemented
        return (self.nodes == other.nodes and np.array_equal(self._free, other._free)
                and self.running == other.running and self.time == other.time)

    __hash__ = None  # mutable-looking arrays inside: not hashable

    def __repr__(self) -> str:
        return f"ClusterSnapshot({len(self.nodes)} nodes, {len(self._running)} running, t={self.time})"
