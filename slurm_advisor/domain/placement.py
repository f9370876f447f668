"""Where each task of one job runs."""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from slurm_advisor.domain.job import Job, Role
from slurm_advisor.domain.resources import Resources


@dataclass(frozen=True, slots=True)
class TaskAssignment:
    role: Role
    node: str


@dataclass(frozen=True, slots=True)
class Placement:
    """Every task of ``job_id`` mapped to a node, in the job's task order (PS first)."""

    job_id: str
    tasks: tuple[TaskAssignment, ...]
    # Derived once: speed models and schedulers ask for these on every event.
    _per_node: tuple[tuple[str, int, int], ...] = field(init=False, repr=False, compare=False, default=())
    _nodes: tuple[str, ...] = field(init=False, repr=False, compare=False, default=())

    def __post_init__(self) -> None:
        counts: dict[str, list[int]] = {}
        for t in self.tasks:
            counts.setdefault(t.node, [0, 0])[0 if t.role is Role.PS else 1] += 1
        object.__setattr__(self, "_per_node", tuple((n, c[0], c[1]) for n, c in counts.items()))
        object.__setattr__(self, "_nodes", tuple(counts))

    @classmethod
    def of(cls, job: Job, nodes: list[str] | tuple[str, ...]) -> Placement:
        roles = job.roles()
        if len(nodes) != len(roles):
            raise ValueError(f"job {job.id}: {len(roles)} tasks but {len(nodes)} nodes given")
        return cls(job.id, tuple(TaskAssignment(r, n) for r, n in zip(roles, nodes)))

    def nodes(self) -> tuple[str, ...]:
        """Distinct nodes in first-use order."""
        return self._nodes

    def per_node(self) -> tuple[tuple[str, int, int], ...]:
        """(node, PS tasks, worker tasks) for each distinct node, in first-use order."""
        return self._per_node

    def count(self, node: str, role: Role | None = None) -> int:
        return sum(1 for t in self.tasks if t.node == node and (role is None or t.role is role))

    def role_counts(self) -> dict[str, Counter]:
        """node -> Counter({Role.PS: n, Role.WORKER: m})."""
        return {n: Counter({Role.PS: ps, Role.WORKER: w}) for n, ps, w in self._per_node}

    def demand_per_node(self, job: Job) -> dict[str, Resources]:
        out: dict[str, Resources] = {}
        for t in self.tasks:
            out[t.node] = out.get(t.node, Resources()) + job.demand(t.role)
        return out

    def node_list(self) -> str:
        """Slurm-style comma-separated node list, one entry per distinct node."""
        return ",".join(self.nodes())
