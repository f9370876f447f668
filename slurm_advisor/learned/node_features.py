"""The policy's per-node features while one job's tasks are placed (numpy; no torch here).

``PlacementState`` computes every node's row for every task: what the network was trained on,
used for training and on clusters up to ``agent.FULL_SCORING_MAX_NODES`` nodes. Every column
is a numpy pass over the nodes; the co-located load comes from the cluster's ``LoadIndex`` and
switch affinity from switch ids, so nothing loops over nodes or running jobs in Python.

``IncrementalState`` serves larger clusters: the per-node state stays in columns (free
capacity, this job's tasks, feasibility, the order by free GPU share), each task updates them
for the chosen node only (the order by one deletion and one insertion), and rows are built
only for the nodes the network looks at (the candidates and the summary's nodes, see ``agent``).
"""
from __future__ import annotations

import weakref

import numpy as np

from slurm_advisor.domain import ClusterSnapshot, Job, Role
from slurm_advisor.domain.cluster import NodeLayout
from slurm_advisor.learned.features import CPU, GPU, MEM, FeatureSchema, job_vector
from slurm_advisor.learned.load_index import LoadIndex
from slurm_advisor.policies.slurm_default import SlurmDefaultPolicy

PICK = 16  # nodes per candidate group on large clusters (see agent)


class _Layout:
    """Per-cluster constants of the node features (cached on the shared NodeLayout)."""

    def __init__(self, layout: NodeLayout):
        n = len(layout.nodes)
        self.names = [node.name for node in layout.nodes]
        self.cap = layout.capacity.astype(np.float64)
        self.cap_safe = np.where(self.cap > 0, self.cap, 1.0)
        self.scaled_cap = self.cap / np.array([CPU, GPU, MEM])
        self.position = np.arange(n) / max(1, n)
        cluster_cap = self.cap.sum(0)
        self.cluster_cap = np.where(cluster_cap > 0, cluster_cap, 1.0)
        self.switch_id = layout.switch_id
        self.n_switch_ids = len(layout.switch_names)
        by_switch = np.argsort(self.switch_id, kind="stable")
        bounds = np.searchsorted(self.switch_id[by_switch], np.arange(self.n_switch_ids + 1))
        self.switch_members = [by_switch[bounds[s]:bounds[s + 1]] for s in range(self.n_switch_ids)]


_LAYOUTS: weakref.WeakKeyDictionary[NodeLayout, _Layout] = weakref.WeakKeyDictionary()


def _layout_of(layout: NodeLayout) -> _Layout:
    static = _LAYOUTS.get(layout)
    if static is None:
        static = _LAYOUTS.setdefault(layout, _Layout(layout))
    return static


class PlacementState:
    """Arrays describing the cluster while one job's tasks are placed (updated per task)."""

    def __init__(self, snapshot: ClusterSnapshot, job: Job, schema: FeatureSchema):
        self.job, self.schema = job, schema
        self.static = static = _layout_of(snapshot.layout)
        self.names, self.index = static.names, snapshot.layout.index
        self.cap = static.cap
        self.free = snapshot.free_array().astype(np.float64)
        self.free_total = self.free.sum(0)
        self._demands: dict[Role, np.ndarray] = {}
        with LoadIndex.synced(snapshot) as load:
            self.others = load.others().copy()  # the index changes it in place on its next sync
        self.own = np.zeros((len(self.names), 2))  # placed PS, workers of this job per node
        self.has_own = np.zeros(len(self.names), dtype=bool)
        self.switch_has_own = np.zeros(static.n_switch_ids, dtype=bool)
        self.job_vec = job_vector(job, schema)
        total = job.total_demand()
        self.remaining = np.array([total.cpus, total.gpus, total.mem_mb], dtype=np.float64)
        # What Slurm itself would do with this job: the policy sees it and learns when to differ.
        proposal = SlurmDefaultPolicy().place(snapshot, job)
        self.hint = [self.index[t.node] for t in proposal.tasks] if proposal else None

    def demand(self, role: Role) -> np.ndarray:
        demand = self._demands.get(role)
        if demand is None:
            d = self.job.demand(role)
            demand = self._demands[role] = np.array([d.cpus, d.gpus, d.mem_mb], dtype=np.float64)
        return demand

    def features(self, role: Role, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        demand = self.demand(role)
        cap = self.static.cap_safe
        mask = (self.free >= demand).all(axis=1)
        after = np.where(mask[:, None], (self.free - demand) / cap, 0.0)
        whole = (self.free >= self.remaining).all(axis=1)
        has_own = self.has_own
        hint = np.zeros(len(self.names))
        if self.hint is not None:
            hint[self.hint[k]] = 1.0
        on_switch = self.switch_has_own[self.static.switch_id]
        elsewhere = has_own.any() & ~has_own
        first, rank, feasible = _ranks(mask, self.free[:, 1] / cap[:, 1])
        nodes = np.column_stack([
            self.static.scaled_cap, self.free / cap,
            after[:, 0], after[:, 1], whole, self.own[:, 0] / max(1, self.job.num_ps),
            self.own[:, 1] / self.job.num_workers, on_switch, elsewhere, self.static.position,
            has_own, first, rank, feasible, hint, self.others,
        ]).astype(np.float32)
        return nodes, self.glob(role, k), mask

    def glob(self, role: Role, k: int) -> np.ndarray:
        free_share = self.free_total / self.static.cluster_cap
        return np.concatenate([self.job_vec, np.array(
            [float(role is Role.PS), k / self.job.num_tasks, free_share[1], free_share[0]], dtype=np.float32)])

    def take(self, i: int, role: Role) -> None:
        demand = self.demand(role)
        self.free[i] -= demand
        self.free_total -= demand
        self.remaining -= demand
        self.own[i, 0 if role is Role.PS else 1] += 1
        self.has_own[i] = True
        self.switch_has_own[self.static.switch_id[i]] = True


class IncrementalState(PlacementState):
    """``PlacementState`` for large clusters: per-node state kept as columns, updated per task in
    O(1) or one vector pass, and rows built only for the nodes asked for (``rows``)."""

    def __init__(self, snapshot: ClusterSnapshot, job: Job, schema: FeatureSchema):
        super().__init__(snapshot, job, schema)
        self.role: Role | None = None
        self.near: list[np.ndarray] = []  # the nodes of each switch holding a task of the job
        self.any_own = False
        self.share = self.free[:, 1] / self.static.cap_safe[:, 1]

    def begin(self, role: Role) -> None:
        """A role's first task: its demand decides which nodes are feasible."""
        self.role, self.need = role, self.demand(role)
        self.mask = (self.free >= self.need).all(axis=1)
        feasible = np.flatnonzero(self.mask)
        self.order = feasible[np.argsort(self.share[feasible], kind="stable")]
        self.sorted_share = self.share[self.order]
        self.first = -1
        self._positions()
        self.whole = (self.free >= self.remaining).all(axis=1)
        self._dirty: list[np.ndarray] = []
        # The least loaded feasible nodes, with room to spare for the nodes this role fills up.
        load = self.others[feasible, :6].sum(1)
        keep = min(len(feasible), PICK + self.job.num_tasks)
        idle = np.flatnonzero(load == 0.0)  # no load is the least: ties go by node order anyway
        if len(idle) >= keep:
            self.least_loaded = feasible[idle[:keep]]
        else:
            top = np.argpartition(load, keep - 1)[:keep] if 0 < keep < len(feasible) else np.arange(len(feasible))
            self.least_loaded = feasible[top[np.lexsort((top, load[top]))]]

    def _positions(self) -> None:
        if not hasattr(self, "position_of"):
            self.position_of = np.zeros(len(self.names), dtype=np.int64)  # read where feasible only
        self.position_of[self.order] = np.arange(len(self.order))
        if self.first < 0 or not self.mask[self.first]:  # the first feasible node in Slurm's order
            self.first = int(np.argmax(self.mask)) if len(self.order) else -1

    def rows(self, idx: np.ndarray, k: int) -> np.ndarray:
        """The rows ``PlacementState.features`` gives nodes ``idx`` for task ``k``."""
        st, free, mask = self.static, self.free[idx], self.mask[idx]
        cap = st.cap_safe[idx]
        after = np.where(mask[:, None], (free - self.need) / cap, 0.0)
        has_own = self.has_own[idx]
        rank = np.where(mask, self.position_of[idx] / max(1, len(self.order) - 1), 0.0)
        hint = (idx == self.hint[k]) if self.hint is not None else np.zeros(len(idx), dtype=bool)
        return np.column_stack([
            st.scaled_cap[idx], free / cap, after[:, 0], after[:, 1], self.whole[idx],
            self.own[idx, 0] / max(1, self.job.num_ps), self.own[idx, 1] / self.job.num_workers,
            self.switch_has_own[st.switch_id[idx]], self.any_own & ~has_own, st.position[idx],
            has_own, idx == self.first, rank, mask, hint, self.others[idx],
        ]).astype(np.float32)

    def dirty(self, k: int) -> np.ndarray:
        """Nodes whose rows changed (other than in rank) since the last call, for task ``k``."""
        if self.hint is not None and k > 0:
            self._dirty.append(np.array([self.hint[k - 1], self.hint[k]]))
        out = np.unique(np.concatenate(self._dirty)) if self._dirty else np.zeros(0, dtype=np.int64)
        self._dirty = []
        return out[out >= 0]  # -1: "no first feasible node"

    def take(self, i: int, role: Role) -> None:
        new_switch = not self.switch_has_own[self.static.switch_id[i]]
        first = self.first
        super().take(i, role)
        self.any_own = True
        self.share[i] = self.free[i, 1] / self.static.cap_safe[i, 1]
        whole = (self.free >= self.remaining).all(axis=1)
        self._dirty += [np.array([i, first]), np.flatnonzero(whole != self.whole)]
        self.whole = whole
        sid = self.static.switch_id[i]
        if new_switch:
            self._dirty.append(self.static.switch_members[sid])
        if new_switch and sid:
            self.near.append(self.static.switch_members[sid])
        elif not sid:  # nodes on no switch: "the same switch" is every such node; keep to its own
            self.near.append(np.array([i]))
        self._reorder(i)
        self._dirty.append(np.array([self.first]))

    def _reorder(self, i: int) -> None:
        if not self.mask[i]:
            return
        p = int(self.position_of[i])  # move i to its place by (share, index) in the order
        order, shares = np.delete(self.order, p), np.delete(self.sorted_share, p)
        self.mask[i] = bool((self.free[i] >= self.need).all())
        if self.mask[i]:
            lo, hi = np.searchsorted(shares, self.share[i], "left"), np.searchsorted(shares, self.share[i], "right")
            q = lo + int(np.searchsorted(order[lo:hi], i))
            order, shares = np.insert(order, q, i), np.insert(shares, q, self.share[i])
        self.order, self.sorted_share = order, shares
        self._positions()

    def candidates(self, k: int) -> np.ndarray:
        """The feasible nodes the scoring head sees for task ``k`` (the rule is in ``agent``),
        ascending: ties go to the earlier node, as when every node is scored."""
        mask, order = self.mask, self.order
        if len(order) <= 8 * PICK:
            return np.sort(order)
        feasible = np.flatnonzero(mask)
        whole = self.whole & mask
        near = [m[mask[m]] for m in self.near]  # feasible nodes on the switches holding the job's tasks
        picks = [feasible[:PICK], order[:PICK], order[-PICK:], np.flatnonzero(whole)[:PICK],
                 self.least_loaded[mask[self.least_loaded]][:PICK], *near]
        if self.hint is not None and mask[self.hint[k]]:
            picks.append(np.array([self.hint[k]]))
        return np.unique(np.concatenate(picks))


def _ranks(mask: np.ndarray, free_gpu_share: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Where each feasible node stands among the feasible ones: first in Slurm's order, and its
    rank from fullest (0) to emptiest (1). The heuristics' rules become easy to express."""
    first = np.zeros(len(mask))
    rank = np.zeros(len(mask))
    feasible = np.flatnonzero(mask)
    if len(feasible):
        first[feasible[0]] = 1.0
        order = feasible[np.argsort(free_gpu_share[feasible], kind="stable")]
        rank[order] = np.arange(len(order)) / max(1, len(order) - 1)
    return first, rank, mask.astype(np.float64)
