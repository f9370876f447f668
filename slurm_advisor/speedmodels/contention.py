"""`contention`: a parametric ground truth of shared-resource contention and PS/worker traffic.

The modelled cluster: 8-GPU V100-class servers on PCIe, one 25 GbE NIC each, leaf switches with
2:1 oversubscribed uplinks. Per iteration a synchronous job takes

    t = max over workers (t_compute * interference(node)) + t_comm + t_ps_update

* ``t_compute``: 3 x forward FLOPs x batch on a reference GPU (``jobtypes.reference_speed``,
  fitted to Gavel's 4.39 it/s for ResNet-50 at batch 64 on one V100).
* ``interference(node) = 1 + sum_r k_r * u_r(self) * others_r``: each task uses a share ``u_r``
  of its node's CPU, memory bandwidth and PCIe (job-type profile, ``jobtypes``); the others'
  use of a resource (every other task on the node, the job's own included) slows the part of
  the step that needs it. Tasks never time-share cores: Slurm's task/cgroup plugin
  (``ConstrainCores=yes``, cgroup.conf(5)) confines each job to the cores it was allocated,
  so what co-located jobs share is the last-level cache, memory bandwidth, PCIe and the NIC.
* ``t_comm``: gradients and parameters (4 bytes/parameter) move every step. An all-reduce job
  runs a ring: ``2 (n-1)/n x model`` over the ring's slowest link, the intra-node path when
  the ring stays on one node, else the NIC (nccl-tests' *bus bandwidth*). A PS job moves
  ``2 x model / num_ps`` between every worker and every PS; a PS node's NIC carries that for
  every remote worker (the incast that makes a PS the bottleneck). Traffic that leaves a node
  shares its NIC equally with the other jobs crossing that NIC; traffic between switches runs
  at ``cross_switch_factor`` of the NIC rate.
* ``t_ps_update``: a PS sums every worker's gradient into its shard on the CPU; a PS on a
  busy node is slowed by interference like any task.

Constants (:class:`ContentionParams`) and where they come from:

* ``nic_gbps = 25``: one 25 GbE NIC per server. NCCL over TCP reaches about the line rate with
  one GPU per node (30.6 of 32 Gbit/s on GCP) and half of it with 8 (14.5-14.9 Gbit/s;
  NVIDIA/nccl#209): 25 is the optimistic end.
* ``intra_node_gbps = 80``: the PCIe path between GPUs and host memory, ~80 Gbit/s measured
  on a V100 (AWS p3, NVIDIA/nccl#398: "80Gbps for the bidirectional scenario", ~90 pinned on
  p3dn). Intra- over inter-node bandwidth is then 3.2x; nccl-tests on two 8xA100 nodes with
  4x200G IB give 232.5 GB/s inside a node and 86 GB/s across two (2.7x, NVIDIA/nccl-tests#175).
* ``cross_switch_factor = 0.5``: a 2:1 oversubscribed leaf (e.g. 32 node links, 16 uplinks:
  Cornelis CN5000 fat-tree docs, "2:1 Oversubscribed 2-Tier Fat Tree"; Juniper's AI fabric
  JVD lists 2:1 with 8 servers per leaf). A local model cannot see the uplinks' load, so it
  assumes them busy: a flow crossing switches gets half its NIC rate.
* ``k_cpu = k_membw = k_pcie = 0.5``: host-side interference between jobs on separate GPUs of
  one server is about a tenth: Crux (SIGCOMM'24, Alibaba) measured a GPT job's iteration time
  1.53 s -> 1.70 s (+11 %) beside a BERT job from communication contention (intra-host PCIe
  and network); Gandiva (OSDI'18; summary at xzhu0027.gitbook.io) reports two LM jobs in a
  shared execution environment (e.g. one PCIe switch) slowing each other 19 %, ResNet-50
  beside LM not at all. No measurement separates CPU, memory bandwidth and PCIe, so the
  three are equal; 0.5 puts a 1-GPU job beside seven others of the Philly mix at ~1.1x and
  beside seven of the heaviest types at <= 1.2x (tests/speedmodels/test_contention.py).
* ``ps_update_s_per_gparam = 0.5``: summing a gradient into a parameter reads 8 and writes 4
  bytes; one core streams ~20-24 GB/s (std::accumulate 19-24 GB/s on an i7-12700H,
  duvanenko.tech.blog "Maximum read bandwidth"), i.e. 12 B / 24 GB/s = 0.5 s per 1e9 updates.
  The PS's per-node traffic ``2 x model x workers / num_ps`` is BytePS's (OSDI'20) analysis
  of non-colocated PS.

So packing saves network time but costs some interference, spreading does the reverse, and
which wins depends on the job's compute/communication ratio and on its neighbours.

Cost: a call looks only at the jobs it is given (the asked-for ones and their neighbours) and
at their nodes; node switches are looked up in a map built once per ``nodes`` tuple.
"""
from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from slurm_advisor.domain import Node, RunningJob
from slurm_advisor.domain.jobtypes import JobTypeProfile, profile_for, reference_speed
from slurm_advisor.speedmodels.base import select

Usage = tuple[float, float, float]  # share of a node's CPU, memory bandwidth, PCIe


@dataclass(frozen=True)
class ContentionParams:
    """The modelled hardware; sources in the module docstring."""

    nic_gbps: float = 25.0            # per-node NIC, Gbit/s
    intra_node_gbps: float = 80.0     # PCIe between GPUs / host memory of one node, Gbit/s
    cross_switch_factor: float = 0.5  # 2:1 oversubscribed uplinks between switches
    k_cpu: float = 0.5                # interference strength per resource
    k_membw: float = 0.5
    k_pcie: float = 0.5
    ps_update_s_per_gparam: float = 0.5  # CPU seconds to apply 1e9 parameter updates on a PS


class SwitchMap:
    """Node name -> switch, built once per ``nodes`` tuple (by identity), not once per call.

    The simulator passes the same nodes tuple on every call; any other sequence (a list a
    test built) is read afresh, since it could have changed in between.
    """

    def __init__(self) -> None:
        self._nodes: Sequence[Node] | None = None
        self._map: dict[str, str | None] = {}

    def of(self, nodes: Sequence[Node]) -> Mapping[str, str | None]:
        if nodes is self._nodes:
            return self._map
        switch_of = {n.name: n.switch for n in nodes}
        if isinstance(nodes, tuple):
            self._nodes, self._map = nodes, switch_of
        return switch_of


class ContentionSpeedModel:
    name = "contention"
    local = True

    def __init__(self, params: ContentionParams | None = None):
        self.p = params or ContentionParams()
        self._profiles: dict[tuple, JobTypeProfile] = {}
        self._usages_by_type: dict[tuple, tuple[Usage, Usage]] = {}
        self._switches = SwitchMap()

    def speeds(self, nodes: Sequence[Node], running: Sequence[RunningJob],
               only: Collection[str] | None = None) -> dict[str, float]:
        targets = select(running, only)
        # Only the nodes the asked-for jobs use need a load: the simulator asks for a few jobs
        # at a time, with their neighbours (which span further nodes) as context.
        needed = {n for rj in targets for n in rj.placement.nodes()}
        load = self._node_loads(running, needed)
        nic_users = _nic_users(running, needed)
        crossing = self._crossing(nodes, targets)
        return {rj.job.id: 1.0 / self._iteration_time(rj, load, nic_users, rj.job.id in crossing)
                for rj in targets}

    def profile(self, rj: RunningJob) -> JobTypeProfile:
        job = rj.job
        key = (job.type, job.model_size_mb, job.batch_size)
        if key not in self._profiles:
            self._profiles[key] = profile_for(job.type, job.model_size_mb, job.batch_size)
        return self._profiles[key]

    def _crossing(self, nodes: Sequence[Node], targets: list[RunningJob]) -> set[str]:
        """Ids of the asked-for jobs whose nodes sit under more than one switch."""
        spanning = [rj for rj in targets if len(rj.placement.nodes()) > 1]
        if not spanning:
            return set()
        switch_of = self._switches.of(nodes)
        return {rj.job.id for rj in spanning
                if len({switch_of.get(n) for n in rj.placement.nodes()}) > 1}

    def _node_loads(self, running: Sequence[RunningJob], needed: set[str]) -> dict[str, Usage]:
        """Summed CPU, memory-bandwidth and PCIe use of all tasks on each node of ``needed``."""
        loads: dict[str, Usage] = {}
        for rj in running:
            ps_u, w_u = self._usages(rj)
            for node, n_ps, n_w in rj.placement.per_node():
                if node not in needed:
                    continue
                c, m, p = loads.get(node, (0.0, 0.0, 0.0))
                loads[node] = (c + n_ps * ps_u[0] + n_w * w_u[0], m + n_ps * ps_u[1] + n_w * w_u[1],
                               p + n_ps * ps_u[2] + n_w * w_u[2])
        return loads

    def _usages(self, rj: RunningJob) -> tuple[Usage, Usage]:
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

    def _interference(self, u: Usage, total: Usage) -> float:
        """Slowdown of a task using ``u`` on a node whose tasks use ``total`` (itself included)."""
        p = self.p
        return (1.0 + p.k_cpu * u[0] * max(0.0, total[0] - u[0])
                + p.k_membw * u[1] * max(0.0, total[1] - u[1])
                + p.k_pcie * u[2] * max(0.0, total[2] - u[2]))

    def _iteration_time(self, rj: RunningJob, load: dict[str, Usage], nic_users: dict[str, int],
                        crosses_switch: bool) -> float:
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
        comm = self._comm_time(rj, prof, nic_users, crosses_switch)
        ps_update = 0.0
        if rj.job.num_ps:
            shard_gparams = prof.params_m / 1000.0 / rj.job.num_ps
            ps_update = shard_gparams * rj.job.num_workers * self.p.ps_update_s_per_gparam * ps_worst
        return worst + comm + ps_update

    def _comm_time(self, rj: RunningJob, prof: JobTypeProfile, nic_users: dict[str, int],
                   crosses_switch: bool) -> float:
        model_gbit = prof.model_size_mb * 8.0 / 1000.0
        per_node = rj.placement.per_node()  # (node, PS tasks, worker tasks)
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
        """Ring all-reduce, 2 (n-1)/n x model over the ring's slowest link (its bus bandwidth)."""
        n_w = rj.job.num_workers
        if n_w == 1:
            return 0.0
        bus = self.p.intra_node_gbps
        if len(per_node) > 1:
            bus = min(bus, min(nic / max(1, nic_users.get(node, 1)) for node, _, _ in per_node))
        return 2.0 * (n_w - 1) / n_w * model_gbit / bus


def _nic_users(running: Sequence[RunningJob], needed: set[str]) -> dict[str, int]:
    """How many jobs send traffic through each NIC of ``needed`` (jobs spanning several nodes)."""
    users: dict[str, int] = {}
    for rj in running:
        per_node = rj.placement.per_node()
        if len(per_node) > 1:
            for n, _, _ in per_node:
                if n in needed:
                    users[n] = users.get(n, 0) + 1
    return users
