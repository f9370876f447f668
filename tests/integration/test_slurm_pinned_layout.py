"""A pinned job gets from a real slurmctld exactly the per-node tasks ``slurm_counts`` predicts.

The daemon pins an advised job (``-w <nodes> -N k -n N`` with the job's uniform per-task
options) and Slurm decides how many tasks each node gets. A seeded sequence of states, built by
unpinned background jobs and by pinned jobs left running, each followed by one random pinned
job: ``slurm_counts`` is asked, for the release the testbed runs (``sinfo --version``), on what
Slurm reports free just before submission. Where
Slurm starts the job, its allocation (``scontrol show job -d``) must hold exactly the predicted
tasks on each pinned node (CPUs, GPUs and memory of whole tasks); where it leaves the job
pending on resources, the prediction must be None.
"""
from __future__ import annotations

import numpy as np
import pytest
from slurmctl import Slurm

from slurm_advisor.domain import ClusterSnapshot, Node, Resources
from slurm_advisor.slurm.cons_tres import usable_slots
from slurm_advisor.slurm.expressible import slurm_counts
from slurm_advisor.slurm.release import DEFAULT, Release

SEED = 20261202
JOBS = 45
TESTBED = tuple(Node(f"n{i}", 8, 4, 32_000) for i in range(1, 5))


def started_or_refused(view) -> bool:
    """RUNNING, or PENDING for a reason other than waiting its turn (Slurm has tried it)."""
    return view.state == "RUNNING" or (view.state == "PENDING" and view.reason not in ("None", "Priority"))


def options(tasks: int, cpus: int, mem_per_cpu: int, gpus: int) -> list[str]:
    opts = [f"--ntasks={tasks}", f"--cpus-per-task={cpus}", f"--mem-per-cpu={mem_per_cpu}"]
    return opts + [f"--gpus-per-task={gpus}"] if gpus else opts


def random_pinned(rng: np.random.Generator, snap: ClusterSnapshot) -> tuple[list[str], Resources, tuple]:
    """Nodes (in a random order) and a request that fits them when the testbed is empty, of about
    as many tasks as they hold now (so that most start and some stay pending)."""
    k = int(rng.integers(1, 5))
    names = [TESTBED[i].name for i in rng.choice(4, size=k, replace=False)]
    cpus = int(rng.choice([1, 1, 2, 2, 3, 4]))
    gpus = int(rng.choice([0, 0, 0, 1, 1, 2]))
    mem_per_cpu = int(rng.choice([500, 1000, 2000, 4000]))
    demand = Resources(cpus, gpus, cpus * mem_per_cpu)
    per_node = min(8 // cpus, 32_000 // demand.mem_mb, 4 // gpus if gpus else 8)
    now = int(usable_slots(snap.free_array()[[snap.index(n) for n in names]], demand).sum())
    tasks = int(rng.integers(k, min(k * per_node, max(now, k)) + 1))
    return names, demand, (tasks, cpus, mem_per_cpu, gpus)


def telling_pinned(rng: np.random.Generator, snap: ClusterSnapshot, release: Release, tries: int = 400,
                   against_default: bool = False):
    """A random pinned request for which Slurm's rule and ``naive_fill`` differ (or, with
    ``against_default``, ``release``'s rule and the default release's), if one of ``tries``
    draws is such (they are rare: several nodes, cpus-per-task > 1, GPUs), else the first."""
    first = None
    for _ in range(tries):
        names, demand, request = drawn = random_pinned(rng, snap)
        first = first or drawn
        nodes = [snap.index(n) for n in names]
        ours = slurm_counts(snap.layout, snap.free_array(), nodes, request[0], demand, release=release)
        other = slurm_counts(snap.layout, snap.free_array(), nodes, request[0], demand) if against_default \
            else naive_fill(snap, names, request[0], demand)
        if ours is not None and ours != other:
            return drawn
    return first


def naive_fill(snap: ClusterSnapshot, names: list[str], tasks: int, demand: Resources) -> list[int]:
    """The rule one might guess: one task per node, the rest filled in node-index order up to
    what each node holds. Only counted, to show which starts tell it from Slurm's."""
    order = sorted(names, key=snap.index)
    slots = usable_slots(snap.free_array()[[snap.index(n) for n in order]], demand).tolist()
    counts, left = dict.fromkeys(order, 1), tasks - len(order)
    for n, s in zip(order, slots):
        more = max(0, min(s - 1, left))
        counts[n], left = counts[n] + more, left - more
    return [counts[n] for n in names]


def random_background(rng: np.random.Generator) -> list[str]:
    tasks, cpus = int(rng.integers(1, 7)), int(rng.choice([1, 1, 2, 3]))
    return options(tasks, cpus, int(rng.choice([500, 1000, 3000])), int(rng.random() < 0.3))


def churn(slurm: Slurm, rng: np.random.Generator, held: dict[str, int]) -> None:
    """Move the state towards a random load: cancel jobs above it (all at once), or start one or
    two unpinned background jobs below it (one that Slurm leaves pending is cancelled)."""
    target = rng.uniform(0.1, 0.7) * sum(n.cpus for n in TESTBED)
    victims = []
    while held and sum(held.values()) > target:
        victim = list(held)[int(rng.integers(len(held)))]
        victims.append(victim)
        del held[victim]
    if victims:
        slurm.cancel(*victims)
        slurm.wait_gone(*victims)
    elif sum(held.values()) < target - 6 and rng.random() < 0.6:
        jobs = [slurm.submit(random_background(rng), sleep_s=600) for _ in range(int(rng.integers(1, 3)))]
        pending = []
        for job_id in jobs:
            view = slurm.wait(job_id, started_or_refused, timeout_s=20)
            if view.state == "RUNNING":
                held[job_id] = sum(r.cpus for r in view.allocation.values())
            else:
                pending.append(job_id)
        slurm.cancel(*pending)
        slurm.wait_gone(*pending)


@pytest.mark.slurm
def test_pinned_jobs_get_the_tasks_per_node_slurm_counts_predicts(slurm: Slurm) -> None:
    assert slurm.nodes() == TESTBED, "the test is written for the 4-node testbed of .ci/slurm-testbed.sh"
    rng = np.random.default_rng(SEED)
    release = slurm.release()
    held: dict[str, int] = {}  # running job -> its CPUs
    rows, disagreements = [], []
    for i in range(JOBS):
        churn(slurm, rng, held)
        free = slurm.free()
        snap = ClusterSnapshot(TESTBED, free)
        # on a newer release every fourth job is one its rule lays out otherwise than 22.05's
        names, demand, request = telling_pinned(rng, snap, release, against_default=release != DEFAULT and i % 4 == 3) \
            if i % 2 else random_pinned(rng, snap)
        tasks, cpus, mem_per_cpu, gpus = request
        ours = slurm_counts(snap.layout, snap.free_array(), [snap.index(n) for n in names], tasks, demand,
                            release=release)

        job_id = slurm.submit([f"--nodelist={','.join(names)}", f"--nodes={len(names)}", *options(*request)],
                              sleep_s=600)
        view = slurm.wait(job_id, started_or_refused, timeout_s=20, what="RUNNING or PENDING on resources")
        theirs = None
        if view.state == "RUNNING":
            assert set(view.allocation) == set(names), (view, names)
            theirs = [view.allocation[n].cpus // cpus for n in names]
            for n, t in zip(names, theirs):  # whole tasks, nothing more
                assert view.allocation[n] == Resources(t * cpus, t * gpus, t * cpus * mem_per_cpu), (view, request)
        if theirs is not None and rng.random() < 0.6:
            held[job_id] = sum(theirs) * cpus  # becomes part of the next states
        else:
            slurm.cancel(job_id)
            slurm.wait_gone(job_id)
        older = slurm_counts(snap.layout, snap.free_array(), [snap.index(n) for n in names], tasks, demand)
        rows.append((i, names, request, theirs, theirs is not None and theirs != naive_fill(snap, names, tasks, demand),
                     release != DEFAULT and theirs != older))
        if theirs != ours:
            disagreements.append(f"job {i} -w {','.join(names)} (tasks, cpus/task, MB/cpu, gpus/task) "
                                 f"{request} on free {dict(free)}:\n    slurm {theirs}\n    ours  {ours}")

    started = [r for r in rows if r[3] is not None]
    print(f"\nSlurm {release}: {JOBS - len(disagreements)} of {JOBS} pinned jobs agree ({len(started)} started, "
          f"{JOBS - len(started)} pending); multi-node starts: {sum(len(r[1]) > 1 for r in started)}, "
          f"with more than one task on some node of several: "
          f"{sum(len(r[1]) > 1 and max(r[3]) > 1 for r in started)}, where one task per node and "
          f"then node-order fill would be wrong: {sum(r[4] for r in rows)}, where the {DEFAULT} rule would be "
          f"wrong: {sum(r[5] for r in rows)}; first ones:")
    for i, names, request, theirs, *_ in rows[:10]:
        print(f"  job {i} -w {','.join(names)} {request}: {theirs or 'pending'}")
    assert not disagreements, f"{len(disagreements)} of {JOBS} pinned jobs laid out otherwise than " \
        "slurm_counts predicts:\n" + "\n".join(disagreements)
