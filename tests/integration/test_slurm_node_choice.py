"""slurm-default places worker-only jobs on the nodes where a real select/cons_tres puts them.

The policy models the release the testbed runs (``sinfo --version``): on 26.05 a one-task job
goes on the first node that holds it.

A seeded sequence of jobs goes to the testbed one at a time, with random cancellations between
them so that free capacity fragments. Before each submission the policy is asked on a snapshot
of what Slurm reports free; then Slurm decides. Where Slurm starts the job, the tasks per node
must agree (Slurm's CPUs on a node / cpus-per-task); where Slurm leaves it pending, the policy
must have found no placement either. What Slurm reports free (``sinfo --json``: CPUs, GPUs from
``gres_used``, memory) must be the testbed's capacity less what ``scontrol show job -d`` says
the running jobs hold, GPUs included, so the snapshot the policy sees is the one Slurm decides on.
"""
from __future__ import annotations

import numpy as np
import pytest
from slurmctl import Slurm

from slurm_advisor.domain import ClusterSnapshot, Job, Node, Resources
from slurm_advisor.policies.slurm_default import SlurmDefaultPolicy

SEED = 20261201
JOBS = 120
TESTBED = (Node("n1", 8, 4, 32_000), Node("n2", 8, 4, 32_000), Node("n3", 8, 4, 32_000),
           Node("n4", 8, 4, 32_000))


def random_request(rng: np.random.Generator) -> tuple[int, int, int, int]:
    """(tasks, cpus per task, MB per CPU, GPUs per task) of one worker-only job that fits the
    empty testbed (Slurm rejects at submission a job that never could run)."""
    gpus = int(rng.random() < 0.35)
    cpus = int(rng.choice([1, 1, 2, 2, 3, 4]))
    mem_per_cpu = int(rng.choice([500, 1000, 2000, 4000]))
    node = TESTBED[0]
    per_node = min(node.cpus // cpus, node.mem_mb // (cpus * mem_per_cpu), node.gpus if gpus else node.cpus)
    tasks = int(rng.integers(1, min(7 if gpus else 13, per_node * len(TESTBED)) + 1))
    return tasks, cpus, mem_per_cpu, gpus


def sbatch_options(tasks: int, cpus: int, mem_per_cpu: int, gpus: int) -> list[str]:
    options = [f"--ntasks={tasks}", f"--cpus-per-task={cpus}", f"--mem-per-cpu={mem_per_cpu}"]
    return options + ["--gpus-per-task=1"] if gpus else options


def left_over(held: dict[str, dict[str, Resources]]) -> dict[str, Resources]:
    """The testbed's capacity less the allocations of the jobs in ``held``."""
    free = {n.name: n.capacity for n in TESTBED}
    for allocation in held.values():
        for node, alloc in allocation.items():
            free[node] = free[node] - alloc
    return free


def decided(view) -> bool:
    """Slurm has started the job, or has tried and left it pending for want of resources."""
    return view.state == "RUNNING" or (view.state == "PENDING" and view.reason not in ("None", "Priority"))


@pytest.mark.slurm
def test_cons_tres_node_choice_matches_slurm(slurm: Slurm) -> None:
    assert slurm.nodes() == TESTBED, "the test is written for the 4-node testbed of .ci/slurm-testbed.sh"
    rng = np.random.default_rng(SEED)
    policy = SlurmDefaultPolicy(slurm.release())  # the rule of the release the testbed runs
    running: list[str] = []
    held: dict[str, dict[str, Resources]] = {}  # running job -> what Slurm allocated, per node
    disagreements, outcomes = [], []
    for i in range(JOBS):
        free = slurm.free()
        if running and (rng.random() < 0.3 or sum(r.cpus for r in free.values()) < 6):
            victim = running.pop(int(rng.integers(len(running))))
            slurm.cancel(victim)
            slurm.wait_gone(victim)
            del held[victim]
            free = slurm.free()
        assert free == left_over(held), f"job {i}: sinfo's free capacity is not the testbed less its jobs"
        tasks, cpus, mem_per_cpu, gpus = request = random_request(rng)
        job = Job(f"j{i}", "test", 0, tasks, Resources(), Resources(cpus, gpus, cpus * mem_per_cpu),
                  iterations=1.0)
        placement = policy.place(ClusterSnapshot(TESTBED, free), job)
        ours = None if placement is None else {node: ps + w for node, ps, w in placement.per_node()}

        job_id = slurm.submit(sbatch_options(*request), sleep_s=3600)
        # Only a job Slurm has tried counts as pending: it starts through backfill about 1 s after
        # submission (bf_interval=1; the main scheduler defers batch jobs), so wait out a pass.
        view = slurm.wait(job_id, decided, timeout_s=20, what="RUNNING or PENDING on resources")
        if view.state == "RUNNING":
            running.append(job_id)
            held[job_id] = view.allocation
            theirs = {node: alloc.cpus // cpus for node, alloc in view.allocation.items()}
            for node, alloc in view.allocation.items():  # Slurm allocates whole tasks, nothing more
                n = theirs[node]
                assert alloc == Resources(n * cpus, n * gpus, n * cpus * mem_per_cpu), (view, request)
        else:
            slurm.cancel(job_id)
            slurm.wait_gone(job_id)
            theirs = None
        outcomes.append((i, request, theirs))
        if theirs != ours:
            disagreements.append(f"job {i} (-n {tasks} -c {cpus} --mem-per-cpu={mem_per_cpu} "
                                 f"gpus/task {gpus}) on free {dict(free)}:\n"
                                 f"    slurm {theirs}\n    policy {ours}")

    started = [o for o in outcomes if o[2] is not None]
    print(f"\nslurm started {len(started)} of {JOBS} jobs; multi-node: "
          f"{sum(len(o[2]) > 1 for o in started)}; first allocations:")
    for i, request, theirs in outcomes[:12]:
        print(f"  job {i} (tasks, cpus/task, MB/cpu, gpus/task) {request}: {theirs or 'pending'}")
    print(f"Slurm {policy.release}: {len(disagreements)} disagreements" + "".join(f"\n  {d}" for d in disagreements))
    assert not disagreements, f"{len(disagreements)} of {JOBS} jobs placed otherwise than Slurm:\n" + \
        "\n".join(disagreements)
