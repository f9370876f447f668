"""Slurm 22.05's select/cons_tres node choice, transcribed from its source.

`src/plugins/select/cons_tres/job_test.c` (tag slurm-22-05-9-1): ``choose_nodes`` ->
``_eval_nodes`` (no topology) or ``_eval_nodes_topo`` (topology/tree). Everything a job asks
for is counted in *tasks* here: Slurm counts CPUs, and a node's usable CPUs for a job
(``can_job_run_on_node``) are its free CPUs cut down by the job's memory per CPU and rounded to
whole tasks, for a job with GPUs also to its free GPUs' tasks (``gres_select_filter_sock_core``:
max_tasks_this_node <= free GPUs / gpus-per-task), so "CPUs / cpus-per-task" is exactly our
task slots.

- ``_eval_nodes``: the nodes that can take at least one task form runs of consecutive nodes
  of equal weight (our nodes carry none; a job with GPUs weighs them, below). The run to take
  from is the *tightest* run that holds the whole remaining job, else the biggest one (first
  in node order on ties). A job
  that asks for one node (``--nodes`` unset: min_nodes = 1) goes on the best-fitting single
  node of that run (fewest usable slots that still hold it, first on ties); otherwise the
  run's nodes are taken in index order, each giving all it can (``_cpus_to_use`` keeps one
  task back for every further node the job must still span). If the run runs out, the next
  best run is chosen for what remains.
- ``choose_nodes``: at most ``num_tasks`` nodes; if the first evaluation fails under a node
  cap, nodes with few usable resources are dropped one level at a time and it is retried.
- ``_eval_nodes_topo``: under topology/tree, leaf switches are chosen one at a time by the
  tightest fit in *available node count* (fewest usable nodes that still cover the nodes the
  job must span; with min_nodes = 1 that is simply the leaf with the fewest usable nodes, first
  in switch order on ties), and each chosen leaf's nodes are taken in index order. 22.05 has
  no best-fit single node here: a one-node job can be split over a leaf's first nodes.

A job with GPUs (``--gpus-per-task``; Slurm makes it gres_per_job = tasks x GPUs per task) is
placed otherwise in two ways, found in the source and seen on the testbed (GPUs without
``Cores=`` in gres.conf are bound to no socket: ``_build_sock_gres_by_topo`` counts them in
``cnt_any_sock``, so no core is cleared for binding, on the first "picky" pass or later):

- Node weights (``can_job_run_on_node``, "Favor nodes with more co-located GPUs"): the low byte
  of each node's ``sched_weight`` becomes ``0xff - near_gpu_cnt``, its free GPUs capped by
  ``max_node_gres`` = the job's GPUs in all (``gres_select_filter_remove_unusable``). In
  ``_eval_nodes`` a run of consecutive nodes also ends where the weight changes, and the run of
  the lowest weight is taken first whether it holds the job or not; tightest / biggest decide
  only among equal weights. Before 23.11 those bytes stay on the nodes after the job, and a
  job without GPUs that backfill plans finds them (``slurm/left_weights.py``: ``left=``).
  ``_eval_nodes_topo`` adds weights lightest first until they hold
  the job; the lighter ones are taken whole (``req2_nodes_bitmap``, index order), then the rest
  of their leaves, then leaves by tightest fit over the nodes of that last weight only.
- Slots (``_select_cores`` -> ``gres_select_filter_sock_core``): a node's CPUs are cut to
  ``max_tasks_this_node * cpus_per_task``, and max_tasks_this_node is 1 for a one-task job (and
  for one task per node asked for), so every usable node counts one slot and runs compare by
  their number of nodes. A job without GPUs never goes through that filter and keeps all its
  usable CPUs. For any job with ``--nodes=1``, a node that cannot hold every task drops out.

``_cpus_to_use`` (min_gres_cpu is 0 without ``--cpus-per-gpu``) and ``dist_tasks`` then give
each node the tasks counted here; the GPU totals (``gres_sched_sufficient``, ``_test``) hold
whenever the tasks do, as no node has more slots than GPUs for them.

What Slurm cannot express we generalise plainly: a PS job's tasks have two shapes, and a
node's slots are counted in task order (PS first), the way block distribution hands them out.
Slurm 26.05 (``Release.first_fit_single_node``) puts a one-task job on the first node in index
order that holds it, not the best-fitting one: measured on the 26.05.5 testbed, where 4 of 120
random jobs of ``tests/integration/test_slurm_node_choice.py`` (all of them one-task jobs, with and
without a GPU) went there and every other job as 22.05 and 24.11 place it. Under topology/tree the
22.05 rule is kept (not measured).

Everything is numpy over the node arrays plus Python only over the nodes a job takes, so a
decision on 10,000 nodes costs a few vector passes (Slurm itself scans node bitmaps).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from slurm_advisor.domain import ClusterSnapshot, Job, Placement, Resources
from slurm_advisor.slurm.release import DEFAULT, Release

_MANY = np.iinfo(np.int64).max // 4
_CONTIGUOUS_FROM = 256  # nodes


def usable_slots(free: np.ndarray, demand: Resources) -> np.ndarray:
    """Tasks of ``demand`` each node could hold (uncapped by the job's size), shape (nodes,);
    read-only when ``free`` is (it may be the answer to an earlier call, see ``_Memo``)."""
    return _SLOTS.get(free, demand, _usable_slots)


def fits_once(free: np.ndarray, demand: Resources) -> np.ndarray:
    """Per node: room for one task of ``demand`` (``usable_slots(...) >= 1``, by compares);
    read-only when ``free`` is."""
    return _FITS.get(free, demand, _fits_once)


class _Memo:
    """The last answer for a read-only ``free`` array (a snapshot's): the simulator asks whether a
    job could fit before it asks for its placement, and the learned policy asks Slurm's own
    choice as a hint, each on the same array. Writable arrays (backfill's rooms), and views whose
    base another owner could change, are never kept."""

    def __init__(self) -> None:
        self._last: tuple = (None, None, None)

    def get(self, free: np.ndarray, demand: Resources, compute) -> np.ndarray:
        last_free, last_demand, answer = self._last  # one tuple: threads see a whole entry
        if free is last_free and demand == last_demand:
            return answer
        answer = compute(free, demand)
        if not free.flags.writeable and free.base is None:
            answer.flags.writeable = False
            self._last = (free, demand, answer)
        return answer


_SLOTS, _FITS = _Memo(), _Memo()


def _usable_slots(free: np.ndarray, demand: Resources) -> np.ndarray:
    out = None
    for r, need in enumerate((demand.cpus, demand.gpus, demand.mem_mb)):
        if need > 0:
            column = free[:, r]
            if len(column) > _CONTIGUOUS_FROM:
                # numpy divides a contiguous int64 array by a scalar several times faster than a
                # strided column: on a large cluster the copy pays for itself
                column = np.ascontiguousarray(column)
            slots = column // need
            out = slots if out is None else np.minimum(out, slots, out=out)
    if out is None:  # a task that asks for nothing fits anywhere, as often as it likes
        return np.full(len(free), _MANY, dtype=np.int64)
    return np.maximum(out, 0, out=out)


def _fits_once(free: np.ndarray, demand: Resources) -> np.ndarray:
    ok = None
    for r, need in enumerate((demand.cpus, demand.gpus, demand.mem_mb)):
        if need > 0:
            col = free[:, r] >= need
            ok = col if ok is None else np.logical_and(ok, col, out=ok)
    return np.ones(len(free), dtype=bool) if ok is None else ok


def job_slots(free: np.ndarray, job: Job) -> np.ndarray:
    """Usable task slots per node for the whole job: its PS tasks first, then workers."""
    if job.num_ps == 0:
        return usable_slots(free, job.worker_demand)
    ps = np.minimum(usable_slots(free, job.ps_demand), job.num_ps)
    d = job.ps_demand
    left = free - np.outer(ps, (d.cpus, d.gpus, d.mem_mb))
    return ps + usable_slots(left, job.worker_demand)


@dataclass
class _Request:
    """The counters ``_eval_nodes`` keeps while it takes nodes (in tasks)."""

    rem: int          # tasks still to place (rem_cpus)
    rem_max: int      # rem_max_cpus
    rem_nodes: int    # nodes the job must still span (max(min_nodes, req_nodes))
    min_rem_nodes: int
    max_nodes: int

    def done(self) -> bool:
        return self.rem_nodes <= 0 and self.rem <= 0

    def take(self, avail: int) -> int:
        """``_cpus_to_use``: what one more node gives, keeping a task for each node still needed."""
        limit = self.rem_max - max(self.min_rem_nodes - 1, 0)
        give = avail if avail <= limit else max(limit, 1)
        self.rem -= give
        self.rem_max -= give
        self.rem_nodes -= 1
        self.min_rem_nodes -= 1
        self.max_nodes -= 1
        return give


def select(snapshot: ClusterSnapshot, job: Job, *, topology: bool = False, min_nodes: int = 1,
           max_nodes: int | None = None, release: Release = DEFAULT) -> Placement | None:
    """The placement cons_tres of ``release`` gives ``job`` on ``snapshot`` now, or None if it
    cannot start."""
    free = snapshot.free_array()
    taken = choose_nodes(snapshot.layout, free, job, topology=topology, min_nodes=min_nodes,
                         max_nodes=max_nodes, release=release)
    return None if taken is None else _placement(snapshot.nodes, job, taken, free)


def could_fit(free: np.ndarray, job: Job) -> bool:
    """A necessary condition for any placement at all: each role's tasks fit the nodes' room
    on their own. Cheap, exact as a filter (a policy can only place a job that passes it)."""
    for demand, count in ((job.ps_demand, job.num_ps), (job.worker_demand, job.num_workers)):
        if count == 1:
            if not fits_once(free, demand).any():
                return False
        elif count and int(np.minimum(usable_slots(free, demand), count).sum()) < count:
            return False
    return True


def choose_nodes(layout, free: np.ndarray, job: Job, *, topology: bool = False, min_nodes: int = 1,
                 max_nodes: int | None = None, release: Release = DEFAULT,
                 left: np.ndarray | None = None) -> list[tuple[int, int]] | None:
    """``choose_nodes``: (node index, tasks) for every node cons_tres takes, or None. ``left``:
    the node weights a job without GPUs finds (``slurm/left_weights.py``; equal if None)."""
    avail = node_slots(free, job, min_nodes, max_nodes)
    if job.num_tasks == 1 and release.first_fit_single_node and not topology:
        holds = np.flatnonzero(avail > 0)  # a one-task job's usable nodes all weigh the same
        return [(int(holds[0]), 1)] if len(holds) else None
    most = np.minimum(avail, job.num_tasks)
    if int(most.sum()) < job.num_tasks:
        return None  # not enough room anywhere: every evaluation below would fail
    cap = job.num_tasks if max_nodes is None else min(max_nodes, job.num_tasks)
    cap = max(cap, min_nodes)
    if cap < len(avail) and _biggest(most, cap) < job.num_tasks:
        return None  # not even the cap's biggest nodes hold it
    weight = left if left is not None and not job_gpus(job) else sched_weight(free, job)
    evaluate = _eval_nodes_topo if topology else _eval_nodes
    taken = evaluate(layout, avail, weight, job, min_nodes, cap)
    if taken is None and max_nodes is not None:
        taken = _retry_without_small_nodes(layout, free, avail, weight, job, min_nodes, cap, evaluate)
    return taken


def _biggest(most: np.ndarray, cap: int) -> int:
    """The sum of the ``cap`` biggest values."""
    return int(most.max()) if cap == 1 else int(np.partition(most, -cap)[-cap:].sum())


def job_gpus(job: Job) -> int:
    """The job's GPUs in all (Slurm's gres_per_job: ``--gpus-per-task`` times ``--ntasks``)."""
    return job.num_ps * job.ps_demand.gpus + job.num_workers * job.worker_demand.gpus


def node_slots(free: np.ndarray, job: Job, min_nodes: int = 1, max_nodes: int | None = None) -> np.ndarray:
    """Task slots per node as ``_eval_nodes`` counts them (``_select_cores``).

    A job with GPUs goes through ``gres_select_filter_sock_core``, which cuts a node's usable
    CPUs to ``max_tasks_this_node * cpus_per_task``: the node's slots, but one for a one-task
    job (or one task per node asked for). Without GPUs the node keeps all its usable CPUs. With
    ``--nodes=1`` a node that cannot hold every task counts for nothing."""
    gres, n = job_gpus(job) > 0, job.num_tasks
    if gres and max_nodes != 1 and not job.num_ps and (n == 1 or n == min_nodes == max_nodes):
        return fits_once(free, job.worker_demand).astype(np.int64)  # min(job_slots, 1), by compares
    avail = job_slots(free, job)
    if max_nodes == 1:  # min_tasks_this_node = max_tasks_this_node = num_tasks
        room = job_slots(_without_gpus(free), job) if gres else avail  # alloc_tasks: CPUs only
        return np.where(room >= n, np.minimum(avail, n) if gres else avail, 0)
    if gres and (n == 1 or n == min_nodes == max_nodes):  # max_tasks_this_node = 1
        return np.minimum(avail, 1)
    return avail


def sched_weight(free: np.ndarray, job: Job) -> np.ndarray:
    """Node order of preference, lowest first (``can_job_run_on_node``: "Favor nodes with more
    co-located GPUs"): the low byte of a node's ``sched_weight`` is ``0xff - near_gpu_cnt``,
    its free GPUs up to the job's total (``gres_select_filter_remove_unusable``: max_node_gres
    = gres_per_job). Equal for every node when the job asks for no GPU."""
    gpus = job_gpus(job)
    if not gpus:
        return np.zeros(len(free), dtype=np.int64)
    return -np.minimum(free[:, 1], gpus)


def _without_gpus(free: np.ndarray) -> np.ndarray:
    out = free.copy()
    out[:, 1] = _MANY
    return out


def _retry_without_small_nodes(layout, free, avail, weight, job, min_nodes, cap, evaluate):
    """``choose_nodes``: drop nodes whose usable resources are at most 1, 2, ... and retry."""
    # avail_res_cnt: usable CPUs (before any GPU cut) + free GPUs for a job with GPUs
    res = job_slots(_without_gpus(free), job) * max(job.worker_demand.cpus, 1)
    if job_gpus(job):
        res = res + free[:, 1]
    res = np.where(avail > 0, res, 0)
    usable = np.count_nonzero(avail)
    for count in range(1, int(res.max(initial=0))):
        if usable <= min_nodes:
            return None
        drop = (res > 0) & (res <= count)
        if not drop.any():
            continue
        avail = np.where(drop, 0, avail)
        res = np.where(drop, 0, res)
        usable = np.count_nonzero(avail)
        taken = evaluate(layout, avail, weight, job, min_nodes, cap)
        if taken is not None:
            return taken
    return None


def _runs(avail: np.ndarray, weight: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Starts and (exclusive) ends of the runs of consecutive usable nodes of equal weight."""
    usable = avail > 0
    same = np.zeros(len(avail) + 1, dtype=bool)  # same[i]: node i continues node i-1's run
    same[1:-1] = usable[:-1] & usable[1:] & (weight[:-1] == weight[1:])
    starts = np.flatnonzero(usable & ~same[:-1])
    ends = np.flatnonzero(usable & ~same[1:]) + 1
    return starts, ends


def _eval_nodes(layout, avail: np.ndarray, weight: np.ndarray, job: Job, min_nodes: int,
                max_nodes: int) -> list[tuple[int, int]] | None:
    starts, ends = _runs(avail, weight)
    totals = np.add.reduceat(avail, starts) if len(starts) else np.zeros(0, dtype=np.int64)
    counts = ends - starts
    run_weight = weight[starts]
    live = np.ones(len(starts), dtype=bool)
    req = _Request(job.num_tasks, job.num_tasks, min_nodes, min_nodes, max_nodes)
    taken: list[tuple[int, int]] = []
    while live.any() and req.max_nodes > 0:
        # the lowest weight first, whether it holds the job or not; the usual rules among equals
        lightest = live & (run_weight == run_weight[live].min())
        b = _best_run(totals, counts, lightest, req)
        first, last = int(starts[b]), int(ends[b])
        single = _best_fit_single(avail, first, last, req) if req.rem_nodes <= 1 else None
        if single is not None:
            taken.append((single, req.take(int(avail[single]))))
        else:
            _take_in_order(avail, first, last, req, taken)
        if req.done():
            return taken
        live[b] = False
    return taken if req.rem <= 0 and req.rem_nodes <= 0 else None


def _best_run(totals, counts, live, req: _Request) -> int:
    """The tightest live run that holds the rest of the job, else the biggest (first on ties)."""
    sufficient = live & (totals >= req.rem) & (counts >= req.rem_nodes)
    if req.rem_nodes > 1:
        return _best_run_sequential(totals, live, sufficient)
    if sufficient.any():
        return int(np.argmin(np.where(sufficient, totals, _MANY)))
    return int(np.argmax(np.where(live, totals, -1)))


def _best_run_sequential(totals, live, sufficient) -> int:
    # With a node count to meet, "sufficient" is not monotone in the run's size: keep the
    # source's order of comparisons exactly.
    best, best_total, best_sufficient = -1, 0, False
    for i in np.flatnonzero(live):
        s, t = bool(sufficient[i]), int(totals[i])
        if (best < 0 or (s and not best_sufficient) or (s and t < best_total)
                or (not s and t > best_total)):
            best, best_total, best_sufficient = int(i), t, s
    return best


def _best_fit_single(avail, first: int, last: int, req: _Request) -> int | None:
    block = avail[first:last]
    holds = block >= req.rem
    if not holds.any():
        return None
    return first + int(np.argmin(np.where(holds, block, _MANY)))


def _take_in_order(avail, first: int, last: int, req: _Request, taken: list) -> None:
    i = first
    while i < last and req.max_nodes > 0 and not req.done():
        if req.max_nodes == 1 and avail[i] < req.rem:
            # Only one more node allowed: skip straight to the first that holds the rest.
            holds = np.flatnonzero(avail[i:last] >= req.rem)
            if not len(holds):
                return
            i += int(holds[0])
        taken.append((i, req.take(int(avail[i]))))
        i += 1


def _eval_nodes_topo(layout, avail: np.ndarray, weight: np.ndarray, job: Job, min_nodes: int,
                     max_nodes: int) -> list[tuple[int, int]] | None:
    usable = avail > 0
    if int(avail.sum()) < job.num_tasks or np.count_nonzero(usable) < min_nodes:
        return None
    best, lighter = _lightest_sufficient(avail, weight, usable, job.num_tasks, min_nodes)
    if best is None:
        return None
    leaf_of = layout.switch_id
    leaves = layout.switch_order
    req = _Request(job.num_tasks, job.num_tasks, min_nodes, min_nodes, max_nodes)
    taken: list[tuple[int, int]] = []
    if lighter.any():
        # req2_nodes_bitmap: all nodes of the lighter weights, in index order, then the rest
        # of their leaves (switch order) before any other leaf
        for i in np.flatnonzero(lighter):
            if req.max_nodes <= 0:
                break
            taken.append((int(i), req.take(int(avail[i]))))
        if req.done():
            return taken
        if req.max_nodes <= 0:
            return None
        required = np.isin(leaves, leaf_of[lighter])
        for leaf in leaves[required]:
            for i in _best_on(layout, best, leaf):
                taken.append((int(i), req.take(int(avail[i]))))
                if req.done():
                    return taken
    else:
        required = np.zeros(len(leaves), dtype=bool)
    # arrays over the leaves, not Python loops: a 10,000-node cluster has hundreds of leaves
    left = np.bincount(leaf_of[best], minlength=int(leaves.max(initial=-1)) + 1)[leaves]
    left[required] = 0
    previous = req.rem_nodes + 1
    while previous != req.rem_nodes:
        previous = req.rem_nodes
        k = _best_leaf(left, req.rem_nodes)
        if k is None:
            break
        for i in _best_on(layout, best, leaves[k]):
            if req.max_nodes <= 0:
                break
            taken.append((int(i), req.take(int(avail[i]))))
            if req.done():
                return taken
        left[k] = 0
    return taken if req.min_rem_nodes <= 0 and req.rem <= 0 else None


def _best_on(layout, best: np.ndarray, leaf) -> np.ndarray:
    """The ``best`` nodes under one leaf switch, in index order (reads that leaf's nodes only)."""
    members = layout.switch_members[int(leaf)]
    return members[best[members]]


def _lightest_sufficient(avail, weight, usable, tasks: int, min_nodes: int):
    """``_eval_nodes_topo``'s best_nodes_bitmap: node weights are added lightest first until
    they hold the job; the nodes of that last weight, and those of the lighter ones.

    The weights are small integers (minus a node's free GPUs, capped by the job's), so they are
    counted by offset from the lightest (a bincount, no sort); a weight no usable node has adds
    nothing to the running sums, so the first offset where they hold the job is a node's."""
    present = weight[usable]
    if not len(present):
        return usable, np.zeros_like(usable)
    lightest = int(present.min())
    offset = present - lightest
    counts = np.bincount(offset)
    if np.count_nonzero(counts) <= 1:
        return usable, np.zeros_like(usable)
    holds = (np.bincount(offset, weights=avail[usable]).cumsum() >= tasks) & (counts.cumsum() >= min_nodes)
    if not holds.any():
        return None, None
    w = lightest + int(np.argmax(holds))
    return usable & (weight == w), usable & (weight < w)


def _best_leaf(left: np.ndarray, rem_nodes: int) -> int | None:
    """``_topo_choose_best_switch``: the position (in leaf order) of the tightest leaf that
    covers the nodes still needed, else of the biggest; the first of equals, as Slurm's scan in
    leaf order keeps the first. None when no leaf has a node left."""
    open_ = left > 0
    if not open_.any():
        return None
    covers = open_ & (left >= rem_nodes)
    if covers.any():
        return int(np.argmin(np.where(covers, left, np.iinfo(left.dtype).max)))
    return int(np.argmax(np.where(open_, left, -1)))


def _placement(nodes, job: Job, taken: list[tuple[int, int]], free: np.ndarray) -> Placement | None:
    """Tasks in block order over the taken nodes (node order), each node's count as chosen.

    A PS job's node takes the next tasks in task order that fit it (PS first); slots were
    counted as if each node took PS tasks, so what a node cannot hold after all goes first-fit
    in node order (Slurm has no such job: it would be a hetjob there)."""
    if not job.num_ps:
        return Placement.of(job, [nodes[i].name for i, count in sorted(taken) for _ in range(count)])
    room = free.copy()
    ps_nodes: list[str] = []
    w_nodes: list[str] = []
    ps_left, w_left = job.num_ps, job.num_workers
    for i, count in sorted(taken):
        ps, w = _split(room[i], job, ps_left, w_left, count)
        room[i] -= _vector(job.ps_demand) * ps + _vector(job.worker_demand) * w
        ps_left, w_left = ps_left - ps, w_left - w
        ps_nodes += [nodes[i].name] * ps
        w_nodes += [nodes[i].name] * w
    for demand, left, out in ((job.ps_demand, ps_left, ps_nodes), (job.worker_demand, w_left, w_nodes)):
        for _ in range(left):
            fits = np.flatnonzero(usable_slots(room, demand) > 0)
            if not len(fits):
                return None
            room[fits[0]] -= _vector(demand)
            out.append(nodes[fits[0]].name)
    return Placement.of(job, ps_nodes + w_nodes)


def _vector(r: Resources) -> np.ndarray:
    return np.array((r.cpus, r.gpus, r.mem_mb), dtype=np.int64)


def _split(free_row, job: Job, ps_left: int, w_left: int, count: int) -> tuple[int, int]:
    """How many of the next ``count`` tasks (PS first) one node's free capacity holds."""
    room = [int(x) for x in free_row]
    ps = _tasks_in(room, job.ps_demand, min(ps_left, count))
    d = job.ps_demand
    room = [room[0] - ps * d.cpus, room[1] - ps * d.gpus, room[2] - ps * d.mem_mb]
    return ps, _tasks_in(room, job.worker_demand, min(w_left, count - ps))


def _tasks_in(room: list[int], demand: Resources, most: int) -> int:
    """Tasks of ``demand`` that fit in ``room`` one after another, at most ``most`` (a task
    fits while each resource's need is at most what is left: for a need of 0, while it is not
    negative)."""
    fit = most
    for have, need in zip(room, (demand.cpus, demand.gpus, demand.mem_mb)):
        if need > 0:
            fit = min(fit, have // need)
        elif have < 0:
            return 0
    return max(fit, 0)


def slurm_choice(snapshot: ClusterSnapshot, job: Job, *, topology: bool = False,
                 release: Release = DEFAULT) -> Placement | None:
    """Slurm's own placement of the job's unmodified request on ``snapshot`` (the daemon's
    "Slurm's own choice": ``daemon.service.slurms_choice``); None where it cannot start, or the
    model does not know it (a request that names nodes or fixes per-node counts)."""
    request = job.request
    if request is not None and request.narrows():
        return None
    min_nodes, max_nodes = (1, None) if request is None else (request.min_nodes, request.max_nodes)
    return select(snapshot, job, topology=topology, min_nodes=min_nodes, max_nodes=max_nodes, release=release)
