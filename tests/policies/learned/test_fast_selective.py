"""The large-cluster decision path decides as the implementation it replaced (kept here).

``ReferenceState`` and ``ReferenceSummary`` are verbatim copies of ``IncrementalState`` and
``agent._Summary`` before the decision path was made fast (rows built column by column for
each call, the order rebuilt by ``numpy.delete``/``insert``, every node's "whole" recomputed
per task). The optimised path must give the same placements and the same holds, task by
task, on loaded clusters of 16 nodes (the selective path forced) and 1,000 nodes.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

from slurm_advisor.domain import ClusterSnapshot, Job, Node, Placement, Role, TaskAssignment
from slurm_advisor.learned.numpy_nets import NumpyScorer, mlp_forward
from slurm_advisor.learned.policy.features import FeatureSchema
from slurm_advisor.learned.policy.net import PolicyNet
from slurm_advisor.policies.learned.agent import SUMMARY_NODES, LearnedPolicy
from slurm_advisor.policies.learned.node_features import PICK, PlacementState
from slurm_advisor.policies.patience import PatientPolicy
from slurm_advisor.policies.slurm_default import SlurmDefaultPolicy
from slurm_advisor.traces.synthetic import synthetic_jobs
from slurm_advisor.training import checkpoint

CKPT = checkpoint.load(None)
SCHEMA = CKPT.schema


class ReferenceState(PlacementState):
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


class ReferenceSummary:
    """Greedy choice among candidate nodes on a large cluster (see the module doc): keeps the
    encodings of the summary's nodes and re-encodes those the state reports changed (other
    than in rank); candidates are encoded from their current rows."""

    def __init__(self, scorer: NumpyScorer, n: int):
        self.scorer = scorer
        (w1, self.b1), *self.head = scorer.score
        hidden = w1.shape[1]
        self.w_node, self.w_rest = w1[:hidden], w1[hidden:]
        self.stride = -(-n // SUMMARY_NODES)
        self.nodes = np.arange(0, n, self.stride)  # every node, or every k-th
        self.h: np.ndarray | None = None

    def choose(self, state: ReferenceState, k: int, glob: np.ndarray, fresh: bool) -> int:
        if fresh or self.h is None:
            rows = state.rows(self.nodes, k)
            self.h = self.scorer.encode_nodes(rows)
            self.valid = np.abs(rows).sum(1) > 0
            self.total = (self.h * self.valid[:, None]).sum(0, dtype=np.float64)
            state.dirty(k)
            changed = np.zeros(0, dtype=np.int64)
        else:
            changed = state.dirty(k)
            changed = changed[changed % self.stride == 0]  # those in the summary
        candidates = state.candidates(k)
        # One pass for the summary's changed nodes and the candidates (encoded from current rows).
        both = np.concatenate([changed, candidates]) if len(changed) else candidates
        rows = state.rows(both, k)
        h = self.scorer.encode_nodes(rows)
        if len(changed):
            m, at = len(changed), changed // self.stride
            new_valid = np.abs(rows[:m]).sum(1) > 0
            self.total += ((h[:m] * new_valid[:, None]).sum(0, dtype=np.float64)
                           - (self.h[at] * self.valid[at][:, None]).sum(0, dtype=np.float64))
            self.h[at], self.valid[at] = h[:m], new_valid
            h = h[m:]
        pooled = (self.total / max(1.0, float(self.valid.sum()))).astype(np.float32)
        base = np.concatenate([pooled, self.scorer.context_of(glob)]) @ self.w_rest + self.b1
        logits = mlp_forward(np.maximum(h @ self.w_node + base, 0.0), self.head, relu_last=False)[:, 0]
        return int(candidates[int(np.argmax(logits))])


class ReferencePolicy:
    """The previous greedy large-cluster placement, as a policy."""

    name = "learned"

    def __init__(self, net: PolicyNet):
        self.scorer, self.schema = NumpyScorer(net), SCHEMA

    def place(self, snapshot: ClusterSnapshot, job: Job, rng=None) -> Placement | None:
        return self._place_selectively(snapshot, job)

    def _place_selectively(self, snapshot: ClusterSnapshot, job: Job) -> Placement | None:
        """Greedy placement on a large cluster: candidate nodes only (see the module doc)."""
        state = ReferenceState(snapshot, job, self.schema)
        summary = ReferenceSummary(self.scorer, len(state.names))
        tasks: list[TaskAssignment] = []
        for k, role in enumerate(job.roles()):
            fresh = role is not state.role or k == 1  # k == 1: "tasks elsewhere" turns on everywhere
            if role is not state.role:
                state.begin(role)
            if not len(state.order):
                return None
            action = summary.choose(state, k, state.glob(role, k), fresh)
            state.take(action, role)
            tasks.append(TaskAssignment(role, state.names[action]))
        return Placement(job.id, tuple(tasks))


def cluster(n: int, per_switch: int) -> tuple[Node, ...]:
    return tuple(Node(f"g{i:04d}", 48, 8, 384_000, f"s{i // per_switch}") for i in range(n))


def jobs(n: int, seed: int) -> list[Job]:
    philly, large = synthetic_jobs(n, seed=seed, mix="philly"), synthetic_jobs(n, seed=seed + 1, mix="large")
    return [philly[i] if i % 2 else large[i] for i in range(n)]


def loaded(nodes, seed: int, load: float = 0.6) -> ClusterSnapshot:
    """~``load`` of the GPUs taken by slurm-default's placements, a quarter removed and refilled."""
    rng = np.random.default_rng(seed)
    snap, stream = ClusterSnapshot.empty(nodes, time=100.0), iter(jobs(40 * len(nodes), seed))
    gpus, target = 0, load * sum(n.gpus for n in nodes)
    for _ in range(2):
        while gpus < target:
            job = next(stream)
            placement = SlurmDefaultPolicy().place(snap, job)
            if placement is not None:
                snap, gpus = snap.with_job(job, placement, float(rng.uniform(0, 100))), gpus + job.total_demand().gpus
        for rj in [rj for rj in snap.running if rng.random() < 0.25]:
            snap, gpus = snap.without_job(rj.job.id), gpus - rj.job.total_demand().gpus
    return snap.at(100.0)


@pytest.fixture(scope="module")
def nets() -> dict[str, PolicyNet]:
    torch.manual_seed(3)
    return {"default-model": CKPT.policy, "random": PolicyNet(SCHEMA.node_dim, SCHEMA.global_dim, 32).eval()}


@pytest.mark.parametrize("n, per_switch, seeds, count", [(16, 8, (0, 1), 100), (1000, 32, (0,), 150)])
@pytest.mark.parametrize("which", ["default-model", "random"])
def test_fast_selective_path_decides_and_holds_as_the_reference(n, per_switch, seeds, count, which, nets) -> None:
    speed = CKPT.speed_model
    fast = LearnedPolicy(nets[which], SCHEMA, full_scoring_max_nodes=0)
    ref = ReferencePolicy(nets[which])
    patient_fast, patient_ref = PatientPolicy(fast, speed, 0.85), PatientPolicy(ref, speed, 0.85)
    nodes = cluster(n, per_switch)
    placed = held = 0
    for seed in seeds:
        snap, rng = loaded(nodes, seed), np.random.default_rng(seed)
        for i, job in enumerate(jobs(count, 500 + seed)):
            expected = ref.place(snap, job)
            assert fast.place(snap, job, np.random.default_rng(0)) == expected, (n, seed, i, job)
            decision = patient_fast.place(snap, job, np.random.default_rng(0))
            assert decision == patient_ref.place(snap, job, np.random.default_rng(0)), (n, seed, i, job)
            placed += isinstance(decision, Placement)
            held += decision is not None and not isinstance(decision, Placement)
            if isinstance(decision, Placement) and i % 3 == 0:  # the load moves: a job starts, one ends
                snap = snap.with_job(job, decision, snap.time + 1.0)
                snap = snap.without_job(snap.running[int(rng.integers(len(snap.running) - 1))].job.id)
    assert placed > count // 2 and (held or which == "default-model")
