"""`contention`: a parametric ground truth of shared-resource contention and PS/worker traffic.

Per iteration a synchronous job takes

    t = max over workers (t_compute * interference(node)) + t_comm + t_ps_update

* ``t_compute``: 3 x forward FLOPs x batch on a reference GPU (see ``jobtypes.reference_speed``).
* ``interference(node) = (1 + sum_r k_r * u_r(self) * others_r) * max(1, load_cpu)``: each
  task uses a share ``u_r`` of its node's CPU, memory bandwidth and PCIe (job-type profile).
  Others' use of a resource slows the part of the step that needs it; when the node's CPU is
  oversubscribed the input pipelines time-share it.
* ``t_comm``: gradients and parameters (4 bytes/parameter) cross the network. A PS job moves
  2 x model / num_ps between every worker and every PS each step; an all-reduce job runs a
  hierarchical ring, 2 (g-1)/g x model through each of its g nodes' NICs. Traffic that stays
  on a node uses the (much faster) intra-node path; traffic that leaves it shares the node's
  NIC equally with the other jobs whose traffic crosses that NIC, and traffic between switches
  runs at ``cross_switch_factor`` of the NIC rate (oversubscribed uplinks).
* ``t_ps_update``: a PS applies the updates of every worker to its shard on the CPU; a PS on a
  busy node is slowed by CPU interference like any task.

So packing saves network time but costs interference, spreading does the reverse, and which
one wins depends on the job's compute/communication ratio and on its neighbours: no single
placement rule is right for every job, which is the point of a learned policy.
"""
from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

from slurm_advisor.domain import Node, RunningJob
from slurm_advisor.domain.jobtypes import JobTypeProfile, profile_for, reference_speed
from slurm_advisor.speedmodels.base import select


@dataclass(frozen=True)
class ContentionParams:
    nic_gbps: float = 25.0            # per-node NIC, Gbit/s
    intra_node_gbps: float = 100.0    # PCIe / shared memory between tasks of one node
    cross_switch_factor: float = 0.5  # 2:1 oversubscribed uplinks between switches
    k_cpu: float = 3.0                # interference strength per resource
    k_membw: float = 3.0
    k_pcie: float = 2.0
    ps_update_s_per_gparam: float = 0.5  # CPU seconds to apply 1e9 parameter updates on a PS


class ContentionSpeedModel:
    name = "contention"
    local = True

    def __init__(self, params: ContentionParams | None = None):
        self.p = params or ContentionParams()
        self._profiles: dict[tuple, JobTypeProfile] = {}
        self._usages_by_type: dict[tuple, tuple[tuple[float, float, float], ...]] = {}

    def speeds(self, nodes: Sequence[Node], running: Sequence[RunningJob],
               only: Collection[str] | None = None) -> dict[str, float]:
        switch_of = {n.name: n.switch for n in nodes}
        targets = select(running, only)
        # Only the nodes the asked-for jobs use need a load: the simulator asks for a few jobs
        # at a time, with their neighbours (which span further nodes) as context.
        needed = None if only is None else {n for rj in targets for n in rj.placement.nodes()}
        load = self._node_loads(running, needed)
        nic_users = _nic_users(running)
        return {rj.job.id: 1.0 / self._iteration_time(rj, load, nic_users, switch_of) for rj in targets}

    def profile(self, rj: RunningJob) -> JobTypeProfile:
        job = rj.job
        key = (job.type, job.model_size_mb, job.batch_size)
        if key not in self._profiles:
            self._profiles[key] = profile_for(job.type, job.model_size_mb, job.batch_size)
        return self._profiles[key]

    def _node_loads(self, running: Sequence[RunningJob], needed: set[str] | None = None
                    ) -> dict[str, tuple[float, float, float]]:
        """Summed CPU, memory-bandwidth and PCIe use of all tasks on each node (of ``needed``)."""
        loads: dict[str, tuple[float, float, float]] = {}
        for rj in running:
            ps_u, w_u = self._usages(rj)
            for node, n_ps, n_w in rj.placement.per_node():
                if needed is not None and node not in needed:
                    continue
                c, m, p = loads.get(node, (0.0, 0.0, 0.0))
                loads[node] = (c + n_ps * ps_u[0] + n_w * w_u[0], m + n_ps * ps_u[1] + n_w * w_u[1],
                               p + n_ps * ps_u[2] + n_w * w_u[2])
        return loads

    def _usages(self, rj: RunningJob) -> tuple[tuple[float, float, float], tuple[float, float, float]]:
        """(PS, worker) share of a node's CPU, memory bandwidth and PCIe that one task uses."""
        job = rj.job
        key = (job.type, job.model_size_mb, job.batch_size)
        usages = self._usages_by_type.get(key)
        if usages is None:
            prof = self.profile(rj)
            # A PS is CPU and memory-bandwidth work, no GPU traffic.
            usages = ((0.5 * prof.cpu + 0.05, prof.membw, 0.0), (prof.cpu, prof.membw, prof.pcie))
            self._usages_by_type[key] = usages
        return usages

    def _interference(self, u: tuple[float, float, float], total: tuple[float, float, float]) -> float:
        """Slowdown of a task using ``u`` on a node whose tasks use ``total`` (itself included)."""
        p = self.p
        slow = (1.0 + p.k_cpu * u[0] * max(0.0, total[0] - u[0])
                + p.k_membw * u[1] * max(0.0, total[1] - u[1])
                + p.k_pcie * u[2] * max(0.0, total[2] - u[2]))
        return slow * max(1.0, total[0])

    def _iteration_time(self, rj: RunningJob, load, nic_users, switch_of: dict[str, str | None]) -> float:
        prof = self.profile(rj)
        ps_u, w_u = self._usages(rj)
        compute = 1.0 / reference_speed(prof)
        worst = 0.0
        ps_worst = 0.0
        for node, n_ps, n_w in rj.placement.per_node():  # tasks of one role on a node are alike
            if n_w:
                worst = max(worst, compute * self._interference(w_u, load[node]))
            if n_ps:
                ps_worst = max(ps_worst, self._interference(ps_u, load[node]))
        comm = self._comm_time(rj, prof, nic_users, switch_of)
        ps_update = 0.0
        if rj.job.num_ps:
            shard_gparams = prof.params_m / 1000.0 / rj.job.num_ps
            ps_update = shard_gparams * rj.job.num_workers * self.p.ps_update_s_per_gparam * ps_worst
        return worst + comm + ps_update

    def _comm_time(self, rj: RunningJob, prof: JobTypeProfile, nic_users: dict[str, int],
                   switch_of: dict[str, str | None]) -> float:
        model_gbit = prof.model_size_mb * 8.0 / 1000.0
        per_node = rj.placement.per_node()  # (node, PS tasks, worker tasks)
        crosses_switch = len(per_node) > 1 and len({switch_of.get(n) for n, _, _ in per_node}) > 1
        nic = self.p.nic_gbps * (self.p.cross_switch_factor if crosses_switch else 1.0)
        if rj.job.num_ps:
            return self._ps_comm(rj, model_gbit, per_node, nic, nic_users)
        return self._ring_comm(rj, model_gbit, per_node, nic, nic_users)

    def _ps_comm(self, rj, model_gbit, per_node, nic, nic_users) -> float:
        """Every worker exchanges 2 x model/num_ps with every PS each step."""
        pair_gbit = 2.0 * model_gbit / rj.job.num_ps
        n_ps, n_w = rj.job.num_ps, rj.job.num_workers
        worst_nic = worst_local = 0.0
        for node, ps_here, w_here in per_node:
            remote = ps_here * (n_w - w_here) + w_here * (n_ps - ps_here)
            local = ps_here * w_here
            worst_nic = max(worst_nic, remote * pair_gbit / (nic / max(1, nic_users.get(node, 1))))
            worst_local = max(worst_local, local * pair_gbit / self.p.intra_node_gbps)
        return worst_nic + worst_local

    def _ring_comm(self, rj, model_gbit, per_node, nic, nic_users) -> float:
        """Hierarchical ring all-reduce: reduce inside each node, then a ring across nodes."""
        n_w = rj.job.num_workers
        if n_w == 1:
            return 0.0
        g = len(per_node)
        most_local = max(w for _, _, w in per_node)
        local = 2.0 * (most_local - 1) / max(1, most_local) * model_gbit / self.p.intra_node_gbps
        if g == 1:
            return local
        share = min(nic / max(1, nic_users.get(node, 1)) for node, _, _ in per_node)
        return local + 2.0 * (g - 1) / g * model_gbit / share


def _nic_users(running: Sequence[RunningJob]) -> dict[str, int]:
    """How many jobs send traffic through each node's NIC (jobs spanning more than one node)."""
    users: dict[str, int] = {}
    for rj in running:
        per_node = rj.placement.per_node()
        if len(per_node) > 1:
            for n, _, _ in per_node:
                users[n] = users.get(n, 0) + 1
    return users
