"""The policy's per-node features while one job's tasks are placed (numpy; no torch here).

``PlacementState`` computes every node's row for every task: what the network was trained on,
used for training and on clusters up to ``agent.FULL_SCORING_MAX_NODES`` nodes. Every column
is a numpy pass over the nodes; the co-located load comes from the cluster's ``LoadIndex`` and
switch affinity from switch ids, so nothing loops over nodes or running jobs in Python.

``IncrementalState`` serves larger clusters: the per-node state stays in columns (free
capacity, this job's tasks, feasibility, the order by free GPU share, rows already built), each
task updates them for the nodes it changes only (the order shifted in place, "whole" nodes by
the job's known remaining demand, see ``whole_nodes``), and rows are built only for the nodes
the network looks at (the candidates and the summary's nodes, see ``agent``). A task costs a
few dozen small numpy calls, none over every node except when a node stops fitting.
"""
from __future__ import annotations

import weakref

import numpy as np

from slurm_advisor.domain import ClusterSnapshot, Job, Role
from slurm_advisor.domain.cluster import NodeLayout
from slurm_advisor.learned.policy.features import CPU, GPU, MEM, FeatureSchema, job_vector
from slurm_advisor.policies.learned.fast.whole_nodes import WholeNodes
from slurm_advisor.policies.load_index import LoadIndex
from slurm_advisor.policies.slurm_default import SlurmDefaultPolicy

PICK = 16  # nodes per candidate group on large clusters (see agent)
# columns of a node's row (PlacementState.features)
_FREE, _AFTER, _WHOLE, _OWN, _SWITCH, _ELSEWHERE = slice(3, 6), slice(6, 8), 8, slice(9, 11), 11, 12
_POSITION, _HAS_OWN, _FIRST, _RANK, _MASK, _HINT, _OTHERS = 13, 14, 15, 16, 17, 18, 19


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
        self.switch_members = layout.switch_members
        self.cap_list = self.cap_safe.tolist()
        self.uniform_gpus = bool(n) and self.cap_safe[0, 1] < 1 << 16 and bool((self.cap_safe[:, 1] == self.cap_safe[0, 1]).all())
        # Nodes with a non-zero static column (capacity, position): their rows are never all zeros.
        self.nonzero = (self.scaled_cap != 0).any(axis=1) | (self.position != 0)


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
        # = free.sum(0), exactly (whole numbers): numpy's sum down three columns is far slower
        self.free_total = np.ones(len(self.free)) @ self.free
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
    O(1) or one vector pass, and rows built only for the nodes asked for (``rows``).

    The rows live in one float32 matrix ``R`` (every column of ``features``), filled for a node
    when a row is first asked for (since the role began) and updated by each task for the nodes
    it changes only; ``rows`` gathers it and fills in the columns that depend on the task (first
    feasible node, rank, Slurm's hint). The order by free GPU share is a
    preallocated array shifted in place. Every value is computed by the same float64 expression
    as in ``PlacementState.features`` and rounded once to float32, so the rows are the same."""

    def __init__(self, snapshot: ClusterSnapshot, job: Job, schema: FeatureSchema):
        super().__init__(snapshot, job, schema)
        st = self.static
        self.role: Role | None = None
        self.near: list[np.ndarray] = []  # the nodes of each switch holding a task of the job
        self.any_own = False
        self.share = self.free[:, 1] / st.cap_safe[:, 1]
        self._by_resource = [np.ascontiguousarray(self.free[:, j]) for j in range(3)]
        self.R = np.empty((len(self.names), _OTHERS + self.others.shape[1]), dtype=np.float32)
        self._have = np.zeros(len(self.names), dtype=bool)  # rows of R filled (since the role began)
        self.position_of = np.zeros(len(self.names), dtype=np.int64)  # read where feasible only
        self.first = -1
        self._flag = np.zeros(len(self.names), dtype=bool)
        self._roles, self._placed = job.roles(), 0
        self._whole_nodes: WholeNodes | None = None
        # "whole" followed without a pass over the nodes (uint16 counts); a one-task job's last
        # (only) task is never taken, so its "whole" is the feasibility test of begin().
        if 1 < len(self._roles) < (1 << 16) - 1:
            self._whole_nodes = WholeNodes(self.free, self.remaining, [self.demand(r) for r in self._roles])
        if self.hint is not None:
            self.hint = np.array(self.hint, dtype=np.int64)

    @property
    def order(self) -> np.ndarray:
        """The feasible nodes by (free GPU share, index), fullest first."""
        return self._order[:self.n_feasible]

    def _fits(self, need: np.ndarray) -> np.ndarray:
        f0, f1, f2 = self._by_resource
        out = f0 >= need[0]
        out &= f1 >= need[1]
        out &= f2 >= need[2]
        return out

    def _by_share(self, nodes: np.ndarray) -> np.ndarray:
        """``argsort(share[nodes], kind="stable")``; by the free GPU counts (a radix sort) when
        every node has the same GPU capacity and the counts are small integers: the same order."""
        gpus = self._by_resource[1][nodes]
        if self.static.uniform_gpus and len(gpus) and 0 <= gpus.min() and gpus.max() < 1 << 16:
            keys = gpus.astype(np.uint16)
            if np.array_equal(keys, gpus):
                return np.argsort(keys, kind="stable")
        return np.argsort(self.share[nodes], kind="stable")

    def begin(self, role: Role) -> None:
        """A role's first task: its demand decides which nodes are feasible."""
        self.role, self.need = role, self.demand(role)
        self._need = self.need.tolist()
        self.mask = mask = self._fits(self.need)
        feasible = np.flatnonzero(mask)
        self._order = feasible[self._by_share(feasible)]
        self._sorted_share = self.share[self._order]
        self.n_feasible = len(feasible)
        self.position_of[self._order] = np.arange(len(feasible))
        self.first = int(feasible[0]) if len(feasible) else -1  # the first feasible node in Slurm's order
        self.whole = self._whole_nodes.whole if self._whole_nodes is not None else self._fits(self.remaining)
        self._have[:] = False  # the role's demand changes every row
        self._dirty: list[np.ndarray] = []
        self._hint_k = 0  # the task of the last dirty() call
        self._kept: np.ndarray | None = None  # candidates() groups kept between tasks
        # The least loaded feasible nodes, with room to spare for the nodes this role fills up.
        o = self.others  # the co-located usage: its six columns added in sum(1)'s order, faster
        load = (o[:, 0] + o[:, 1] + o[:, 2] + o[:, 3] + o[:, 4] + o[:, 5])[feasible]
        keep = min(len(feasible), PICK + self.job.num_tasks)
        idle = np.flatnonzero(load == 0.0)  # no load is the least: ties go by node order anyway
        if len(idle) >= keep:
            self.least_loaded = feasible[idle[:keep]]
        else:
            top = np.argpartition(load, keep - 1)[:keep] if 0 < keep < len(feasible) else np.arange(len(feasible))
            self.least_loaded = feasible[top[np.lexsort((top, load[top]))]]

    def rows(self, idx: np.ndarray, k: int) -> np.ndarray:
        """The rows ``PlacementState.features`` gives nodes ``idx`` for task ``k``."""
        missing = idx[~self._have[idx]]
        if len(missing):
            self._fill(missing)
        out = self.R[idx]
        out[:, _FIRST] = idx == self.first
        out[:, _RANK] = np.where(self.mask[idx], self.position_of[idx] / max(1, self.n_feasible - 1), 0.0)
        if self.hint is not None:
            out[:, _HINT] = idx == self.hint[k]
        return out

    def _fill(self, idx: np.ndarray) -> None:
        """Rows of ``R`` for nodes ``idx`` from the current state (``take`` keeps them current)."""
        st, free, mask, has_own = self.static, self.free[idx], self.mask[idx], self.has_own[idx]
        cap = st.cap_safe[idx]
        block = np.empty((len(idx), self.R.shape[1]), dtype=np.float32)
        block[:, :3], block[:, _FREE] = st.scaled_cap[idx], free / cap
        block[:, _AFTER] = np.where(mask[:, None], (free[:, :2] - self.need[:2]) / cap[:, :2], 0.0)
        block[:, _WHOLE] = self.whole[idx]
        block[:, _OWN] = self.own[idx] / (max(1, self.job.num_ps), self.job.num_workers)
        block[:, _SWITCH] = self.switch_has_own[st.switch_id[idx]]
        block[:, _ELSEWHERE] = self.any_own & ~has_own
        block[:, _POSITION], block[:, _HAS_OWN], block[:, _MASK] = st.position[idx], has_own, mask
        block[:, _OTHERS:] = self.others[idx]
        self.R[idx] = block
        self._have[idx] = True

    def dirty(self, k: int, stride: int = 1) -> np.ndarray:
        """Nodes whose rows changed (other than in rank) since the last call, for task ``k``,
        ascending; with ``stride``, only those at multiples of it (the summary's nodes)."""
        if self.hint is not None and k > 0:  # the hint's nodes since the last call (k - 1 task by task)
            self._dirty.append(self.hint[min(self._hint_k, k - 1):k + 1])
        self._hint_k = k
        out = self._union(np.concatenate(self._dirty)) if self._dirty else np.zeros(0, dtype=np.int64)
        self._dirty = []
        return out[out % stride == 0] if stride > 1 else out

    def take(self, i: int, role: Role, settle: bool = True) -> None:
        """Task ``role`` on node ``i``. ``settle=False`` (a run of tasks on ``i``): ``i``'s place
        in the order, its row and Slurm's first feasible node are brought up to date by the
        ``settle(i)`` that ends the run: no row is read in between, and the order reached at
        once is the one reached task by task (a sort by share and index)."""
        st, R = self.static, self.R
        sid = int(st.switch_id[i])
        new_switch = not self.switch_has_own[sid]
        first, first_task = self.first, not self.any_own
        super().take(i, role)
        self.any_own = True
        free = self.free[i].tolist()
        for column, value in zip(self._by_resource, free):
            column[i] = value
        cap = st.cap_list[i]
        self.share[i] = free[1] / cap[1]
        self._placed += 1
        if self._whole_nodes is not None and role is self._roles[self._placed - 1]:
            flipped = self._whole_nodes.turn_whole(self._placed, i, free)
        else:  # tasks out of the job's order: the direct test
            self._whole_nodes, whole = None, self._fits(self.remaining)
            flipped = np.flatnonzero(whole != self.whole)
            self.whole = whole
        whole = self.whole
        R[flipped, _WHOLE] = whole[flipped]
        self._dirty += [np.array([i, first] if first >= 0 else [i]), flipped]
        if len(flipped):
            self._kept = None
        if new_switch:
            R[st.switch_members[sid], _SWITCH] = 1.0
            self._dirty.append(st.switch_members[sid])
        if new_switch and sid:
            self.near.append(st.switch_members[sid])
        elif not sid:  # nodes on no switch: "the same switch" is every such node; keep to its own
            self.near.append(np.array([i]))
        if (new_switch and sid) or not sid:
            self._kept = None
        if first_task:
            R[:, _ELSEWHERE] = 1.0  # every node but i, set below
        if settle:
            self.settle(i)

    def fits_another(self, i: int) -> bool:
        """Whether node ``i`` has room for one more task of the current role."""
        need = self._need
        return all(column[i] >= need[j] for j, column in enumerate(self._by_resource))

    def settle(self, i: int) -> None:
        """After the tasks taken on ``i``: its place in the order, its row, the first feasible node."""
        st = self.static
        self._reorder(i)
        if self._have[i]:  # i's row, as _fill computes it (Python floats: the same float64 arithmetic)
            free, cap = self.free[i].tolist(), st.cap_list[i]
            fits, need = bool(self.mask[i]), self._need
            after = ((free[0] - need[0]) / cap[0], (free[1] - need[1]) / cap[1]) if fits else (0.0, 0.0)
            own_ps, own_w = self.own[i].tolist()
            self.R[i, 3:18] = (free[0] / cap[0], free[1] / cap[1], free[2] / cap[2], *after, bool(self.whole[i]),
                               own_ps / max(1, self.job.num_ps), own_w / self.job.num_workers, 1.0, 0.0,
                               st.position[i], 1.0, 0.0, 0.0, fits)
        if self.first >= 0:
            self._dirty.append(np.array([self.first]))

    def _reorder(self, i: int) -> None:
        """Moves i to its place by (share, index) in the order, or out of it if it no longer fits."""
        if not self.mask[i]:
            return
        order, shares, n = self._order, self._sorted_share, self.n_feasible
        p = int(self.position_of[i])
        f, need = self.free[i].tolist(), self._need
        self.mask[i] = still = f[0] >= need[0] and f[1] >= need[1] and f[2] >= need[2]
        if not still:
            self._kept = None
            order[p:n - 1], shares[p:n - 1] = order[p + 1:n], shares[p + 1:n]
            self.n_feasible = n = n - 1
            self.position_of[order[p:n]] = np.arange(p, n)
            if self.first == i:
                self.first = int(np.argmax(self.mask)) if n else -1
            return
        s = self.share[i]
        if s <= shares[p]:  # free only shrinks: i moves towards the fullest (searched in order[:p])
            lo, hi = np.searchsorted(shares[:p], s, "left"), np.searchsorted(shares[:p], s, "right")
            q = int(lo + np.searchsorted(order[lo:hi], i))
            order[q + 1:p + 1], shares[q + 1:p + 1] = order[q:p].copy(), shares[q:p].copy()
            lo_p, hi_p = q, p
        else:  # (not reached: kept exact for any update) searched in order[p + 1:]
            rest_s, rest_o = shares[p + 1:n], order[p + 1:n]
            lo, hi = np.searchsorted(rest_s, s, "left"), np.searchsorted(rest_s, s, "right")
            q = p + int(lo + np.searchsorted(rest_o[lo:hi], i))
            order[p:q], shares[p:q] = order[p + 1:q + 1].copy(), shares[p + 1:q + 1].copy()
            lo_p, hi_p = p, q
        order[q], shares[q] = i, s
        self.position_of[order[lo_p:hi_p + 1]] = np.arange(lo_p, hi_p + 1)

    def candidates(self, k: int) -> np.ndarray:
        """The feasible nodes the scoring head sees for task ``k`` (the rule is in ``agent``),
        ascending: ties go to the earlier node, as when every node is scored. The groups that
        change only when a node stops fitting, or turns "whole", are kept between tasks."""
        mask, order = self.mask, self.order
        if len(order) <= 8 * PICK:
            return np.sort(order)
        if self._kept is None:
            near = [m[mask[m]] for m in self.near]  # feasible nodes on the switches holding the job's tasks
            self._kept = np.concatenate([self._first_feasible(), np.flatnonzero(self.whole & mask)[:PICK],
                                         self.least_loaded[mask[self.least_loaded]][:PICK], *near])
        picks = [self._kept, order[:PICK], order[-PICK:]]
        if self.hint is not None and mask[self.hint[k]]:
            picks.append(self.hint[k:k + 1])
        return self._union(np.concatenate(picks))

    def _union(self, idx: np.ndarray) -> np.ndarray:
        """The distinct values of ``idx`` (node indices), ascending (np.unique by a flag per node)."""
        flag = self._flag
        flag[idx] = True
        out = np.flatnonzero(flag)
        flag[out] = False
        return out

    def _first_feasible(self) -> np.ndarray:
        """The first ``PICK`` feasible nodes in Slurm's order (a window from the first, else all)."""
        window = np.flatnonzero(self.mask[self.first:self.first + 8 * PICK])
        if len(window) >= PICK:
            return window[:PICK] + self.first
        return np.flatnonzero(self.mask)[:PICK]


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
