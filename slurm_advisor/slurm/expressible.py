"""The layout Slurm really allocates for a job the advisor pins to a node set. Pure.

The daemon pins an advised job through the job_submit hook: ``req_nodes`` = the advisor's
nodes, ``min_nodes = max_nodes`` = their count k, ``num_tasks`` = N, and the job's own uniform
per-task options (``--cpus-per-task`` c, ``--mem-per-cpu``, ``--gpus-per-task`` g). Slurm 22.05
gives every task of a (non-het) job the same demand and decides itself how many tasks each
pinned node gets. Transcribed from tag slurm-22-05-9-1 (threads per core 1, as our nodes):

1. ``cons_tres/job_test.c:can_job_run_on_node``: a node's usable CPUs for the job are its free
   CPUs cut by its free memory (per CPU) and rounded down to whole tasks (a multiple of c).
2. GPU jobs only, ``cons_tres/job_test.c:_select_cores`` ->
   ``cons_common/gres_select_filter.c:gres_select_filter_sock_core``: the CPUs are cut to
   ``max_tasks_this_node * c``, max_tasks_this_node = min(CPU tasks, free GPUs / g), and 1 when
   the job has one task or as many tasks as nodes (``num_tasks == min_nodes == max_nodes``);
   ``cons_common/job_test.c:choose_nodes`` (``fini``) makes the allocation's CPUs follow.
3. ``cons_tres/job_test.c:_eval_nodes`` takes the required nodes first, in node-index order
   (not the order ``-w`` names them), each through ``_cpus_to_use``: a node gives its usable
   CPUs, but at most the CPUs still wanted less **one CPU** (``resv_cpus = (rem_nodes - 1) *
   cpus_per_core``, CPUs, not tasks) for each required node still to come, and never fewer
   than ``pn_min_cpus`` (= c). A required node with no usable CPUs fails the job; so do nodes
   that give fewer than N*c CPUs in all (or fewer than N*g GPUs, ``gres_sched_test``): max_nodes
   is then spent, ``_eval_nodes`` fails and so do ``choose_nodes``' retries (a required node is
   never dropped). The job stays pending (Reason=Resources); Slurm neither moves nor shrinks it.
4. ``cons_common/dist_tasks.c:dist_tasks`` calls ``cons_tres/dist_tasks.c:dist_tasks_compute_c_b``
   for every distribution but plane (block, cyclic and the unset default alike): one task on
   every node, then rounds over the nodes in index order, one task per node per round
   (``vpus / cpus_per_task``, at least 1), while a node has c of the CPUs step 3 gave it left
   (and, with GPUs, ``gres_task_limit`` = its free GPUs / g). The allocation then holds exactly
   tasks * c CPUs per node (``_cyclic_sync_core_bitmap`` clears the rest).

From 24.05 (``Release.spreads_job_gpus``; read at slurm-24-11-5-1) steps 2 and 3 count a GPU job's
GPUs out node by node, in node-index order, k - i - 1 required nodes still to come after node i:

2'. ``topology/common/eval_nodes.c:eval_nodes_select_cores`` -> ``topology/common/gres_filter.c:
   gres_filter_sock_core``: the node may take at most ``_set_max_gres`` GPUs: its free GPUs, cut
   to what the job still wants (G = N*g less the GPUs counted on earlier nodes) less one GPU per
   node to come (when that leaves a positive number; once G is counted, g); its tasks are cut to
   those GPUs / g (and to 1 as in step 2).
3'. ``eval_nodes_cpus_to_use`` as step 3, then ``eval_nodes_gres``: the node's tasks are cut to
   the job's tasks still to place less one per node to come (at least 1), and the GPUs of those
   tasks are counted (``gres_sched_add``). The job fails if the nodes count fewer than G GPUs.

Step 4 then limits each node to the tasks counted there (``gres_task_limit``): ``-n 8 -c 2
--gpus-per-task=1 -w n[1-4]`` is 4,2,1,1 on 24.11 (GPUs 4, 8-4-2 = 2, 8-6-1 = 1, 1), 3,3,1,1 on 22.05.

So with c = 1 step 3 hands out exactly N (every node at least one task, the rest in node order
up to what each holds); with c > 1 it keeps back only one CPU per later node, several nodes can
be given more than their share, and step 4's rounds split the surplus: ``-n 8 -c 2 -N 4 -w
n[1-4]`` on the empty testbed is 3,3,1,1 (CPU_IDs 0-5, 0-5, 0-1, 0-1), not 4,2,1,1, and ``-n 7
-c 2 -N 4`` is 3,2,1,1. ``tests/integration/test_slurm_pinned_layout.py`` holds this against the
testbed: 45 of 45 random pinned jobs agree (30 started, 15 pending; 8 of the starts are ones
where "one task per node, then fill in node order" would be wrong).

``SLURM_TASKS_PER_NODE`` in the batch job (``common/env.c:env_array_for_batch_job``) is
``common/slurm_step_layout.c:_task_layout_block`` over the allocated CPUs per node / c: as the
allocation holds exactly tasks * c CPUs per node, it repeats these counts (testbed: ``3(x2),
1(x2)`` for the 3,3,1,1 job). srun's block and cyclic layouts do too, *if srun is told c*: 22.05's
srun does not read SLURM_CPUS_PER_TASK, so a plain ``srun`` in that job lays its 8 tasks out
2,2,2,2 over the 6,6,2,2 CPUs; ``srun -c $SLURM_CPUS_PER_TASK`` gives 3,3,1,1, and
``--distribution=arbitrary`` follows the hostfile with or without ``-c`` (there: ranks 0-7 on
n4,n1,n2,n3,n1,n2,n1,n2 as the hostfile named them).

Checked by hand on the testbed (22.05.8) in a ``-n 5 -N 2 -w n2,n1`` allocation (4 tasks on
n1, 1 on n2): ``srun --distribution=arbitrary`` with ``SLURM_HOSTFILE`` naming n2,n1,n1,n1,n1
(the allocation's per-node counts, another order) starts rank 0 on n2 and ranks 1-4 on n1
(``SLURMD_NODENAME`` per task; ``hostname`` is ``vm`` for all, the testbed's slurmds share one
host); SLURM_TASKS_PER_NODE and SLURM_STEP_TASKS_PER_NODE are ``4,1``; plain ``srun -n 5`` puts
ranks 0-3 on n1. Beware: a hostfile with *other* counts (n2,n2,n1,n1,n1) is not refused there
either: n2 silently runs 2 tasks on its 1 allocated CPU (no cgroups, task/none), so the
hostfile must be written from these counts.

Not modelled: threads per core > 1 (``dist_tasks_compute_c_b``'s "fill allocated cores" pass and
``resv_cpus`` in cores), ``--mem`` per node, ``--ntasks-per-node``, ``--overcommit``, plane
distribution, whole-node or exclusive jobs, core specialisation, ``--cpus-per-gpu`` /
DefCpuPerGPU, GPUs bound to cores (``Cores=`` in gres.conf), CR_Socket, CR_ONE_TASK_PER_CORE,
and node states, partitions, reservations and limits.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from slurm_advisor.domain import ClusterSnapshot, Job, Placement, Resources
from slurm_advisor.slurm.cons_tres import usable_slots
from slurm_advisor.slurm.release import DEFAULT, Release


def slurm_counts(layout, free: np.ndarray, node_indices: Sequence[int], num_tasks: int,
                 task_demand: Resources, tasks_per_node: int | None = None,
                 release: Release = DEFAULT) -> list[int] | None:
    """Tasks per node Slurm allocates to a job of ``num_tasks`` tasks of ``task_demand`` pinned
    to exactly ``node_indices`` (``-w`` those nodes, ``-N`` their count), aligned with
    ``node_indices`` as given; None if Slurm would not start it now.

    ``free`` is (cpus, gpus, mem_mb) per node in ``layout``'s order; ``task_demand.mem_mb`` is
    one task's memory (``--mem-per-cpu`` times c). Steps 1-4 of the module docstring.

    ``tasks_per_node``: the job's ``--ntasks-per-node`` t. Pinned (``min_nodes = max_nodes`` = k),
    Slurm allocates t tasks' CPUs on *every* node, whatever ``-n`` says (the differential test on
    the testbed: ``-n 4 --ntasks-per-node=2`` pinned to three nodes ran 2, 2, 2): so a pin keeps
    the job's own tasks only where k x t is its task count, each node holding t of them.

    ``release``: the Slurm whose rule applies (steps 2' and 3' from 24.05)."""
    nodes = [int(i) for i in node_indices]
    if not nodes or len(set(nodes)) != len(nodes) or not all(0 <= i < len(layout.nodes) for i in nodes):
        raise ValueError(f"node indices must be distinct indices of the layout, not {list(node_indices)}")
    if task_demand.cpus < 1 or num_tasks < 1:
        raise ValueError("Slurm gives a job at least one task and every task at least one CPU")
    if len(nodes) > num_tasks:
        return None  # more nodes than tasks: Slurm refuses the request
    order = sorted(nodes)
    rows = np.asarray(free, dtype=np.int64)[order]
    usable = usable_cpus(rows, num_tasks, task_demand)
    if tasks_per_node is not None:
        if len(nodes) * tasks_per_node != num_tasks or (usable < tasks_per_node * task_demand.cpus).any():
            return None
        if task_demand.gpus and (rows[:, 1] < tasks_per_node * task_demand.gpus).any():
            return None
        return [tasks_per_node] * len(nodes)
    if task_demand.gpus and release.spreads_job_gpus:
        spread = spread_job_gpus(rows, num_tasks, task_demand)
        if spread is None:
            return None
        given, gpu_limit = spread
    else:
        given = required_node_cpus(usable, num_tasks, task_demand.cpus)
        if given is None:
            return None
        if task_demand.gpus and int(rows[:, 1].sum()) < num_tasks * task_demand.gpus:
            return None  # gres_sched_test
        gpu_limit = rows[:, 1] // task_demand.gpus if task_demand.gpus else None
    counts = compute_c_b(given, num_tasks, task_demand.cpus, gpu_limit)
    by_node = dict(zip(order, counts))
    return [by_node[i] for i in nodes]


def usable_cpus(rows: np.ndarray, num_tasks: int, task_demand: Resources) -> np.ndarray:
    """CPUs each pinned node can give the job (steps 1-2): ``cons_tres/job_test.c:
    can_job_run_on_node`` (free CPUs cut by memory, whole tasks), and for a GPU job
    ``cons_common/gres_select_filter.c:gres_select_filter_sock_core`` via ``_select_cores``."""
    c = task_demand.cpus
    tasks = usable_slots(rows, Resources(c, 0, task_demand.mem_mb))
    if task_demand.gpus:
        tasks = np.minimum(tasks, rows[:, 1] // task_demand.gpus)
        if num_tasks == len(rows):  # num_tasks == 1, or == min_nodes == max_nodes
            tasks = np.minimum(tasks, 1)
    return tasks * c


def required_node_cpus(usable: np.ndarray, num_tasks: int, cpus_per_task: int) -> list[int] | None:
    """CPUs each required node gives, in node-index order (step 3): the required-node loop of
    ``cons_tres/job_test.c:_eval_nodes`` with ``_cpus_to_use``; None where it fails."""
    rem_max_cpus = rem_cpus = num_tasks * cpus_per_task  # _get_rem_max_cpus: min_cpus
    min_rem_nodes = len(usable)
    given = []
    for avail in usable.tolist():
        if avail == 0:
            return None  # "required node lacks available resources"
        limit = rem_max_cpus - max(min_rem_nodes - 1, 0)
        if avail > limit:
            avail = max(limit, cpus_per_task)  # pn_min_cpus = cpus_per_task
        given.append(avail)
        rem_cpus -= avail
        rem_max_cpus -= avail
        min_rem_nodes -= 1
    return given if rem_cpus <= 0 else None


def spread_job_gpus(rows: np.ndarray, num_tasks: int, task_demand: Resources) -> tuple[list[int], list[int]] | None:
    """CPUs each required node gives and the tasks its counted GPUs allow, in node-index order,
    for a GPU job on 24.05+ (steps 2' and 3'); None where Slurm fails the job."""
    c, g = task_demand.cpus, task_demand.gpus
    cpu_tasks = usable_slots(rows, Resources(c, 0, task_demand.mem_mb)).tolist()
    wanted, counted = num_tasks * g, 0
    rem_max_cpus, rem_tasks, nodes = num_tasks * c, num_tasks, len(rows)
    given, gpu_tasks = [], []
    for i, (tasks, free_gpus) in enumerate(zip(cpu_tasks, rows[:, 1].tolist())):
        later = nodes - i - 1
        cap = min(free_gpus, wanted)  # max_node_gres
        rem_gres = wanted - counted - later if counted < wanted else g
        tasks = min(tasks, (rem_gres if 0 < rem_gres < cap else cap) // g)
        if num_tasks == nodes:
            tasks = min(tasks, 1)
        if tasks == 0:
            return None  # "required node lacks available resources"
        cpus = tasks * c
        if cpus > rem_max_cpus - later:
            cpus = max(rem_max_cpus - later, c)
        used = min(max(min(rem_tasks - later, cpus // c), 1), tasks)
        given.append(cpus)
        gpu_tasks.append(used)
        counted += used * g
        rem_tasks -= used
        rem_max_cpus -= cpus
    if rem_max_cpus > 0 or counted < wanted:
        return None
    return given, gpu_tasks


def compute_c_b(given: list[int], num_tasks: int, cpus_per_task: int,
                gpu_limit: np.ndarray | None = None) -> list[int]:
    """Tasks per node (step 4), ``cons_tres/dist_tasks.c:dist_tasks_compute_c_b`` with one
    thread per core: one task per node, then one per node per round while CPUs (and GPUs) last."""
    caps = [cpus // cpus_per_task for cpus in given]
    if gpu_limit is not None:
        caps = [min(cap, int(g)) for cap, g in zip(caps, gpu_limit)]
    tasks = [1] * len(given)
    placed = len(given)
    while placed < num_tasks:
        before = placed
        for n, cap in enumerate(caps):
            if placed < num_tasks and tasks[n] < cap:
                tasks[n] += 1
                placed += 1
        if placed == before:
            # Slurm's over_subscribe relief valve; unreachable once required_node_cpus passed.
            raise RuntimeError(f"no room for {num_tasks} tasks in {given} CPUs")
    return tasks


def express(snapshot: ClusterSnapshot, job: Job, placement: Placement, release: Release = DEFAULT) -> Placement | None:
    """The placement Slurm produces when ``job`` is pinned to ``placement``'s nodes: the same
    node set, Slurm's tasks per node (:func:`slurm_counts`), PS tasks kept on the nodes where
    ``placement`` put them as far as those counts allow, the remaining tasks (PS first) on the
    remaining slots in node-index order. None when Slurm would not start the job there now.
    ``release``: the Slurm whose rule applies (the daemon passes the one it read at start).

    Slurm gives all tasks one shape: a PS job's ``ps_demand`` must equal its ``worker_demand``."""
    if job.num_ps and job.ps_demand != job.worker_demand:
        raise ValueError(f"job {job.id}: Slurm gives every task the same demand, but PS tasks ask "
                         f"{job.ps_demand} and workers {job.worker_demand}")
    if len(placement.tasks) != job.num_tasks:
        raise ValueError(f"job {job.id}: {job.num_tasks} tasks but the placement has {len(placement.tasks)}")
    names = placement.nodes()
    unknown = [n for n in names if n not in snapshot.layout.index]
    if unknown:
        raise ValueError(f"job {job.id}: placement names nodes not in the cluster: {unknown}")
    order = sorted(names, key=snapshot.index)
    request = job.request
    counts = slurm_counts(snapshot.layout, snapshot.free_array(), [snapshot.index(n) for n in order],
                          job.num_tasks, job.worker_demand,
                          None if request is None else request.max_tasks_per_node, release)
    if counts is None:
        return None
    ps_wanted = {node: ps for node, ps, _ in placement.per_node()}
    slots = dict(zip(order, counts))
    ps_nodes = []
    for node in order:
        keep = min(ps_wanted[node], slots[node])
        ps_nodes += [node] * keep
        slots[node] -= keep
    rest = [node for node in order for _ in range(slots[node])]
    moved = job.num_ps - len(ps_nodes)
    ps_nodes = sorted(ps_nodes + rest[:moved], key=snapshot.index)
    return Placement.of(job, ps_nodes + rest[moved:])


def exact(snapshot: ClusterSnapshot, job: Job, placement: Placement, release: Release = DEFAULT) -> Placement | None:
    """``placement`` itself when a job submitted with ``-m arbitrary`` and pinned to it task by task
    (``req_nodes`` one entry per task, :func:`arbitrary_nodes`) starts there now on ``release``;
    None when it would not, or when the release does not allocate arbitrary layouts (22.05: see
    ``Release.allocates_arbitrary``).

    From slurm-24-11-5-1: ``common/job_record.c:job_record_calc_arbitrary_tpn`` counts each
    node's entries into ``arbitrary_tpn``; ``topology/common/eval_nodes.c`` then asks each
    required node for exactly ``tpn * c`` CPUs (a node with fewer usable CPUs fails the job, which
    stays pending) and caps its tasks there (``_set_max_tasks``: GPUs for those tasks only); the
    GPUs a node may count (``gres_filter.c:_set_max_gres``, one kept back per later node) never
    bind, since every later node holds a task of its own. ``cons_tres/dist_tasks.c`` lays out no
    more than ``tpn`` tasks per node. So a node needs room for its tasks: CPUs cut by memory in
    whole tasks (``can_job_run_on_node``) and g GPUs each. Checked on the 24.11 and 26.05 testbeds
    (``tests/integration/test_slurm_arbitrary.py``)."""
    if not release.allocates_arbitrary:
        return None
    if job.num_ps and job.ps_demand != job.worker_demand:
        raise ValueError(f"job {job.id}: Slurm gives every task the same demand, but PS tasks ask "
                         f"{job.ps_demand} and workers {job.worker_demand}")
    per_node = placement.per_node()
    index = snapshot.layout.index
    if any(node not in index for node, _, _ in per_node):
        raise ValueError(f"job {job.id}: placement names nodes not in the cluster: {list(placement.nodes())}")
    rows = snapshot.free_array()[[index[node] for node, _, _ in per_node]]
    demand = job.worker_demand
    room = usable_slots(rows, Resources(demand.cpus, 0, demand.mem_mb))
    if demand.gpus:
        room = np.minimum(room, rows[:, 1] // demand.gpus)
    wanted = np.array([ps + workers for _, ps, workers in per_node])
    return placement if (room >= wanted).all() else None


def arbitrary_nodes(placement: Placement) -> str:
    """``req_nodes`` (and ``SLURM_ARBITRARY_NODELIST``) for an exact pin: each task's node, in task
    order (PS first), so the batch step's ranks follow the advised layout."""
    return ",".join(task.node for task in placement.tasks)
