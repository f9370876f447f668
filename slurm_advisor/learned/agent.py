"""The learned policy as a Policy: places one task at a time, infeasible nodes masked.

In ``greedy`` mode (deployment) it takes the most likely node. In ``sample`` mode (training)
it samples, may hand a whole job to a heuristic (job-aware exploration: a job's tasks are
placed coherently by one rule, not by scattered random moves), and records every decision
so that the trainer can assign returns afterwards.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from slurm_advisor.domain import ClusterSnapshot, Job, Placement, Role, TaskAssignment
from slurm_advisor.learned.features import CPU, GPU, MEM, FeatureSchema, NodeLoad, job_vector
from slurm_advisor.learned.policy_net import NumpyScorer, PolicyNet
from slurm_advisor.policies.base import Policy
from slurm_advisor.policies.slurm_default import SlurmDefaultPolicy


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

    def __init__(self, net: PolicyNet, schema: FeatureSchema, *, mode: str = "greedy",
                 explorers: tuple[Policy, ...] = (), explore_prob: float = 0.0):
        self.net, self.schema, self.mode = net, schema, mode
        self.scorer = NumpyScorer(net)
        self.explorers, self.explore_prob = explorers, explore_prob
        self.decisions: list[Decision] | None = [] if mode == "sample" else None

    def place(self, snapshot: ClusterSnapshot, job: Job, rng: np.random.Generator) -> Placement | None:
        state = _PlacementState(snapshot, job, self.schema)
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
        state = _PlacementState(snapshot, job, self.schema)
        nodes, glob, mask = state.features(job.roles()[0], 0)
        probs = _softmax(self.scorer.logits(nodes, glob, mask))
        return {name: round(float(p), 4) for name, p in zip(state.names, probs)}


class _PlacementState:
    """Arrays describing the cluster while one job's tasks are placed (updated per task)."""

    def __init__(self, snapshot: ClusterSnapshot, job: Job, schema: FeatureSchema):
        self.job, self.schema = job, schema
        self.names = [n.name for n in snapshot.nodes]
        self.index = {name: i for i, name in enumerate(self.names)}
        self.cap = np.array([[n.cpus, n.gpus, n.mem_mb] for n in snapshot.nodes], dtype=np.float64)
        self.free = np.array([[snapshot.free[n].cpus, snapshot.free[n].gpus, snapshot.free[n].mem_mb]
                              for n in self.names], dtype=np.float64)
        load = NodeLoad(snapshot.nodes, snapshot.running)
        self.others = np.stack([load.others(n) for n in self.names])
        switches = [n.switch for n in snapshot.nodes]
        self.same_switch = np.array([[a == b for b in switches] for a in switches], dtype=bool)
        self.own = np.zeros((len(self.names), 2))  # placed PS, workers of this job per node
        self.position = np.arange(len(self.names)) / max(1, len(self.names))
        self.job_vec = job_vector(job, schema)
        self.remaining = np.array([job.total_demand().cpus, job.total_demand().gpus,
                                   job.total_demand().mem_mb], dtype=np.float64)
        cluster_cap = self.cap.sum(0)
        self.cluster_cap = np.where(cluster_cap > 0, cluster_cap, 1.0)
        # What Slurm itself would do with this job: the policy sees it and learns when to differ.
        proposal = SlurmDefaultPolicy().place(snapshot, job)
        self.hint = [self.index[t.node] for t in proposal.tasks] if proposal else None

    def features(self, role: Role, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        d = self.job.demand(role)
        demand = np.array([d.cpus, d.gpus, d.mem_mb], dtype=np.float64)
        cap = np.where(self.cap > 0, self.cap, 1.0)
        mask = (self.free >= demand).all(axis=1)
        after = np.where(mask[:, None], (self.free - demand) / cap, 0.0)
        whole = (self.free >= self.remaining).all(axis=1)
        has_own = self.own.sum(1) > 0
        hint = np.zeros(len(self.names))
        if self.hint is not None:
            hint[self.hint[k]] = 1.0
        on_switch = (self.same_switch & has_own[None, :]).any(axis=1)
        elsewhere = has_own.any() & ~has_own
        nodes = np.column_stack([
            self.cap[:, 0] / CPU, self.cap[:, 1] / GPU, self.cap[:, 2] / MEM, self.free / cap,
            after[:, 0], after[:, 1], whole, self.own[:, 0] / max(1, self.job.num_ps),
            self.own[:, 1] / self.job.num_workers, on_switch, elsewhere, self.position,
            has_own, *_ranks(mask, self.free[:, 1] / cap[:, 1]), hint, self.others,
        ]).astype(np.float32)
        free_share = self.free.sum(0) / self.cluster_cap
        glob = np.concatenate([self.job_vec, np.array(
            [float(role is Role.PS), k / self.job.num_tasks, free_share[1], free_share[0]], dtype=np.float32)])
        return nodes, glob, mask

    def take(self, i: int, role: Role) -> None:
        d = self.job.demand(role)
        demand = np.array([d.cpus, d.gpus, d.mem_mb], dtype=np.float64)
        self.free[i] -= demand
        self.remaining -= demand
        self.own[i, 0 if role is Role.PS else 1] += 1


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


def _softmax(logits: np.ndarray) -> np.ndarray:
    z = np.exp(logits.astype(np.float64) - logits.max())
    return z / z.sum()
