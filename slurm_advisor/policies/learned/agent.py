"""The learned policy as a Policy: places one task at a time, infeasible nodes masked.

In ``greedy`` mode (deployment) it takes the most likely node. In ``sample`` mode (training)
it samples, may hand a whole job to a heuristic (job-aware exploration: a job's tasks are
placed coherently by one rule, not by scattered random moves), and records every decision
so that the trainer can assign returns afterwards.

Cost per task is a few numpy passes over the nodes (no Python loop over nodes or running
jobs: the co-located load comes from the cluster's ``LoadIndex``, switch affinity from switch
ids; see ``node_features``); on large clusters a task touches only the nodes it changes. On
clusters above ``FULL_SCORING_MAX_NODES`` nodes, greedy mode (deployment) does not push every
node through the network for every task:

* the cluster summary (mean of every node's encoding) is computed at a role's first task (PS,
  then workers) over every node, or, beyond ``SUMMARY_NODES`` (512) nodes, over every k-th
  node in Slurm's order (k = ceil(nodes / 512)): a strided sample across every switch.
  For the role's later tasks only those of its nodes whose features changed are re-encoded,
  except for rank-only changes (a task moves the other nodes' "rank among the feasible" by
  about 1/feasible nodes): those keep their previous encoding in the mean;
* the scoring head sees candidate nodes only, all feasible, with current features: the node
  Slurm would use for this task, the nodes holding this job's tasks and the feasible nodes on
  their switches, and the first ``PICK`` (16) feasible nodes in Slurm's order, the ``PICK``
  fullest and the ``PICK`` emptiest by free GPU share, the first ``PICK`` that hold the rest of
  the job, and the ``PICK`` with the least co-located load. With at most ``8 * PICK`` feasible
  nodes, all of them are candidates;
* with ``fill_runs``, a network step chooses the node of a run of the role's tasks: they go
  there while it has room for one more, as a network that fills its nodes would place them
  task by task (``runs``: used only for a network a probe found to do so; the shipped one does not).

Up to that size (the benchmarks' 16 nodes, training, sample mode at any size) every node is
scored for every task, as the network was trained; ``tests/policies/learned/test_scaling.py`` checks
that the selective path makes the same decisions as scoring every node on small clusters, and
``tests/policies/learned/test_fast_selective.py`` that it decides and holds as its previous, slower
implementation (kept there) at 16 and 1,000 nodes.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from slurm_advisor.domain import ClusterSnapshot, Job, Placement, TaskAssignment
from slurm_advisor.learned.numpy_nets import NumpyScorer, Weights, mlp_forward
from slurm_advisor.learned.policy.features import FeatureSchema
from slurm_advisor.policies.base import Policy
from slurm_advisor.policies.learned.fast import runs
from slurm_advisor.policies.learned.node_features import IncrementalState, PlacementState

FULL_SCORING_MAX_NODES = 256
SUMMARY_NODES = 512
_PlacementState = PlacementState  # the name the tests know


@dataclass
class Decision:
    nodes: np.ndarray    # [N, node_dim]
    glob: np.ndarray     # [global_dim]
    mask: np.ndarray     # [N] bool
    action: int
    time: float
    job_id: str
    explored: bool


class LearnedPolicy:
    name = "learned"

    def __init__(self, net: Weights, schema: FeatureSchema, *, mode: str = "greedy",
                 explorers: tuple[Policy, ...] = (), explore_prob: float = 0.0,
                 full_scoring_max_nodes: int = FULL_SCORING_MAX_NODES, fill_runs: bool | None = None):
        """``fill_runs``: on the large-cluster path, one network step per run of a role's tasks
        on a node (``runs``); None: when ``runs.fills_its_nodes`` finds the network does so,
        probed at the first large-cluster decision."""
        self.net, self.schema, self.mode = net, schema, mode
        self.full_scoring_max_nodes = full_scoring_max_nodes
        self.fill_runs = fill_runs
        self.scorer = NumpyScorer(net)
        self.explorers, self.explore_prob = explorers, explore_prob
        self.decisions: list[Decision] | None = [] if mode == "sample" else None

    def place(self, snapshot: ClusterSnapshot, job: Job, rng: np.random.Generator) -> Placement | None:
        if self.mode == "greedy" and len(snapshot.nodes) > self.full_scoring_max_nodes:
            return self._place_selectively(snapshot, job)
        state = PlacementState(snapshot, job, self.schema)
        guide = self._explore(snapshot, job, rng)
        tasks: list[TaskAssignment] = []
        pending: list[Decision] = []
        for k, role in enumerate(job.roles()):
            nodes, glob, mask = state.features(role, k)
            if not mask.any():
                return None
            if guide is not None:
                action = state.index[guide.tasks[k].node]
            else:
                action = self._choose(nodes, glob, mask, rng)
            if self.decisions is not None:
                pending.append(Decision(nodes, glob, mask, action, snapshot.time, job.id, guide is not None))
            state.take(action, role)
            tasks.append(TaskAssignment(role, state.names[action]))
        if self.decisions is not None:
            self.decisions.extend(pending)  # only decisions that produced a placement
        return Placement(job.id, tuple(tasks))

    def _place_selectively(self, snapshot: ClusterSnapshot, job: Job) -> Placement | None:
        """Greedy placement on a large cluster: candidate nodes only, and with ``fill_runs`` one
        network step per run of a role's tasks on a node (see the module doc)."""
        if self.fill_runs is None:
            self.fill_runs = runs.fills_its_nodes(self.net, self.schema)
        state = IncrementalState(snapshot, job, self.schema)
        summary = _Summary(self.scorer, len(state.names))
        tasks: list[TaskAssignment] = []
        roles = job.roles()
        last = len(roles) - 1
        k, elsewhere_seen = 0, False
        while k <= last:
            role = roles[k]
            # After the first task "tasks elsewhere" turns on at every node: the summary is
            # rebuilt at the first step that follows it.
            fresh = role is not state.role or (k > 0 and not elsewhere_seen)
            elsewhere_seen = k > 0
            if role is not state.role:
                state.begin(role)
            if not len(state.order):
                return None
            action = summary.choose(state, k, state.glob(role, k), fresh)
            while True:  # the run: one task, or with fill_runs the role's tasks while the node has room
                tasks.append(TaskAssignment(role, state.names[action]))
                if k == last:  # the last task's effects on the state are never read
                    return Placement(job.id, tuple(tasks))
                state.take(action, role, settle=False)
                k += 1
                if not (self.fill_runs and roles[k] is role and state.fits_another(action)):
                    state.settle(action)
                    break
        return Placement(job.id, tuple(tasks))

    def _explore(self, snapshot, job, rng) -> Placement | None:
        """A heuristic's whole-job placement to follow, or None: the network decides (also when
        the drawn heuristic finds no placement)."""
        if self.mode != "sample" or not self.explorers or rng.random() >= self.explore_prob:
            return None
        heuristic = self.explorers[int(rng.integers(len(self.explorers)))]
        return heuristic.place(snapshot, job, rng)

    def _choose(self, nodes, glob, mask, rng: np.random.Generator) -> int:
        logits = self.scorer.logits(nodes, glob, mask)
        if self.mode == "greedy":
            return int(np.argmax(logits))
        return int(rng.choice(len(logits), p=_softmax(logits)))

    def score_nodes(self, snapshot: ClusterSnapshot, job: Job) -> dict[str, float]:
        """Probability of each node for the job's first task."""
        state = PlacementState(snapshot, job, self.schema)
        nodes, glob, mask = state.features(job.roles()[0], 0)
        probs = _softmax(self.scorer.logits(nodes, glob, mask))
        return {name: round(float(p), 4) for name, p in zip(state.names, probs)}


class _Summary:
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

    def choose(self, state: IncrementalState, k: int, glob: np.ndarray, fresh: bool) -> int:
        if fresh or self.h is None:
            rows = state.rows(self.nodes, k)
            self.h = self.scorer.encode_nodes(rows)
            # Rows with a non-zero static column stay valid: the sums then need no mask (h * True is h).
            self.always_valid = bool(state.static.nonzero[self.nodes].all())
            if self.always_valid:
                self.valid, self.count = None, max(1.0, float(len(self.nodes)))
                self.total = self.h.sum(0, dtype=np.float64)
            else:
                self.valid = np.abs(rows).sum(1) > 0
                self.count = max(1.0, float(self.valid.sum()))
                self.total = (self.h * self.valid[:, None]).sum(0, dtype=np.float64)
            state.dirty(k)
            changed = _NONE
        else:
            changed = state.dirty(k, self.stride)  # those in the summary
        candidates = state.candidates(k)
        # One pass for the summary's changed nodes and the candidates (encoded from current rows).
        both = np.concatenate([changed, candidates]) if len(changed) else candidates
        rows = state.rows(both, k)
        h = self.scorer.encode_nodes(rows)
        if len(changed):
            m, at = len(changed), changed // self.stride
            if self.always_valid:
                self.total += h[:m].sum(0, dtype=np.float64) - self.h[at].sum(0, dtype=np.float64)
                self.h[at] = h[:m]
            else:
                new_valid = np.abs(rows[:m]).sum(1) > 0
                self.total += ((h[:m] * new_valid[:, None]).sum(0, dtype=np.float64)
                               - (self.h[at] * self.valid[at][:, None]).sum(0, dtype=np.float64))
                self.h[at], self.valid[at] = h[:m], new_valid
                self.count = max(1.0, float(self.valid.sum()))
            h = h[m:]
        pooled = (self.total / self.count).astype(np.float32)
        base = np.concatenate([pooled, self.scorer.context_of(glob)]) @ self.w_rest + self.b1
        logits = mlp_forward(np.maximum(h @ self.w_node + base, 0.0), self.head, relu_last=False)[:, 0]
        return int(candidates[int(np.argmax(logits))])


_NONE = np.zeros(0, dtype=np.int64)


def _softmax(logits: np.ndarray) -> np.ndarray:
    z = np.exp(logits.astype(np.float64) - logits.max())
    return z / z.sum()
