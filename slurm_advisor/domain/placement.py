"""Where each task of one job runs."""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

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

    @classmethod
    def of(cls, job: Job, nodes: list[str] | tuple[str, ...]) -> Placement:
        roles = job.roles()
        if len(nodes) != len(roles):
            raise ValueError(f"job {job.id}: {len(roles)} tasks but {len(nodes)} nodes given")
        return cls(job.id, tuple(TaskAssignment(r, n) for r, n in zip(roles, nodes)))

    def nodes(self) -> tuple[str, ...]:
        """Distinct nodes in first-use order."""
        return tuple(dict.fromkeys(t.node for t in self.tasks))

    def count(self, node: str, role: Role | None = None) -> int:
        return sum(1 for t in self.tasks if t.node == node and (role is None or t.role is role))

    def role_counts(self) -> dict[str, Counter]:
        """node -> Counter({Role.PS: n, Role.WORKER: m})."""
        out: dict[str, Counter] = {}
        for t in self.tasks:
            out.setdefault(t.node, Counter())[t.role] += 1
        return out

    def demand_per_node(self, job: Job) -> dict[str, Resources]:
        out: dict[str, Resources] = {}
        for t in self.tasks:
            out[t.node] = out.get(t.node, Resources()) + job.demand(t.role)
        return out

    def node_list(self) -> str:
        """Slurm-style comma-separated node list, one entry per distinct node."""
        return ",".join(self.nodes())
