"""Jobs submitted with ``-m arbitrary`` get from a real slurmctld exactly the layout the advisor chose.

A seeded sequence of random PS/worker jobs, each submitted as a user would ask for an exact layout
(``sbatch -m arbitrary -w <a fallback list, one node per task> -n N ...`` with ``nodes=any`` in the
marker), through the testbed's job submit hook to a daemon in advise mode running ``random``
(whose layouts are rarely Slurm's own per-node counts), on a cluster kept partly busy by unpinned
background jobs. For every job:

- Slurm accepts it (sbatch gives an id): the hook wrote nothing Slurm refuses;
- where the advisor pinned it (``SLURM_ADVISOR_LAYOUT`` in the job's environment), Slurm starts it
  and ``scontrol show job -d`` holds exactly the advised tasks on each node (whole tasks' CPUs,
  GPUs and memory), and ``slurm-advisor layout --format hostfile``, run inside the job, names the
  advised node of each task;
- on a release without arbitrary allocation (22.05) no job is pinned: each is left to Slurm,
  stamped ``:observed``, and runs on its own ``-w`` nodes; on 24.11+ a job left to Slurm runs its
  own list task by task, and the layout command's hostfile names it.
"""
from __future__ import annotations

import os
import re
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from differential import AdvisorDaemon
from slurmctl import Slurm, job_fields, run, until
from test_slurm_pinned_layout import TESTBED, churn, started_or_refused

from slurm_advisor.daemon.layout import expand_hostlist
from slurm_advisor.domain import Resources

pytestmark = pytest.mark.slurm

ROOT = Path(os.environ.get("SLURM_ADVISOR_TESTBED_DIR", "/tmp/slurm-advisor-testbed"))
SOCKET = Path(os.environ.get("SLURM_ADVISOR_TESTBED_SOCKET", ROOT / "advisor.sock"))
SEED = 20261207
JOBS = 20
REPO = Path(__file__).resolve().parents[2]
# what the job writes: the advisor's variables, and the hostfile the layout command gives it
SCRIPT = ('{ env | grep -E "^SLURM_(ADVISOR_LAYOUT|ADVISOR_DECISION|ARBITRARY_NODELIST)="; '
          'echo "hostfile=$(' + sys.executable + ' -m slurm_advisor.cli layout --format hostfile | paste -sd,)"; '
          '} > {out}.tmp 2>&1; mv {out}.tmp {out}; exec sleep 600')


@pytest.fixture
def daemon(slurm_reachable: None, tmp_path: Path):
    if not re.search(r"^JobSubmitPlugins\s*=\s*\S*lua", run(["scontrol", "show", "config"]), re.MULTILINE):
        pytest.skip("the testbed runs without the job submit hook: start it with "
                    "SLURM_ADVISOR_TESTBED_HOOK=hooks/job_submit.lua (tests/run.sh does)")
    advisor = AdvisorDaemon(SOCKET, tmp_path / "advisor.db", policy="random", mode="advise",
                            log=tmp_path / "daemon.log")
    yield advisor
    advisor.stop()


def random_job(rng: np.random.Generator) -> tuple[int, int, int, int, int]:
    """(PS, workers, CPUs per task, GPUs per task, MB per CPU) of a job that fits the empty testbed."""
    ps, workers = int(rng.integers(0, 3)), int(rng.integers(1, 7))
    return ps, workers, int(rng.choice([1, 1, 2])), int(rng.choice([0, 0, 1])), int(rng.choice([500, 1000, 2000]))


def submit(slurm: Slurm, rng: np.random.Generator, job: tuple, out: Path) -> str:
    """sbatch the job as a user asks for an exact layout; its fallback list round-robin over the nodes."""
    ps, workers, cpus, gpus, mem = job
    tasks = ps + workers
    first = int(rng.integers(4))
    fallback = ",".join(TESTBED[(first + i) % 4].name for i in range(tasks))
    options = ["--parsable", f"--output={out}.log", f"--chdir={REPO}", "-m", "arbitrary", f"-w{fallback}",
               f"--ntasks={tasks}", f"--cpus-per-task={cpus}", f"--mem-per-cpu={mem}",
               f"--comment=slurm-advisor: type=resnet50 ps={ps} workers={workers} nodes=any"]
    options += [f"--gpus-per-task={gpus}"] if gpus else []
    job_id = run(["sbatch", *options, f"--wrap={SCRIPT.replace('{out}', str(out))}"]).strip().split(";")[0]
    slurm.submitted.append(job_id)
    return job_id


def written(out: Path) -> dict[str, str]:
    until(out.exists, 30, f"the job's {out.name}")
    return dict(line.split("=", 1) for line in out.read_text().splitlines() if "=" in line)


def advised_counts(layout: str) -> Counter:
    return Counter(node for part in layout.split(";") for node in part.split("=", 1)[1].split(",") if node)


@pytest.mark.slurm
def test_arbitrary_jobs_get_exactly_the_advised_tasks_per_node(slurm: Slurm, daemon: AdvisorDaemon,
                                                                tmp_path: Path) -> None:
    assert slurm.nodes() == TESTBED, "the test is written for the 4-node testbed of .ci/slurm-testbed.sh"
    release = slurm.release()
    rng = np.random.default_rng(SEED)
    held: dict[str, int] = {}
    pinned = differs = 0
    for i in range(JOBS):
        churn(slurm, rng, held)
        daemon.fresh(time.monotonic())
        _, _, cpus, gpus, mem = job = random_job(rng)
        out = tmp_path / f"job{i}.env"
        job_id = submit(slurm, rng, job, out)  # run() raises if sbatch refuses it
        view = slurm.wait(job_id, started_or_refused, timeout_s=20, what="RUNNING or PENDING on resources")
        stamp = job_fields(run(["scontrol", "show", "job", "-o", job_id])).get("AdminComment", "")
        if view.state != "RUNNING":
            assert stamp.endswith(":observed"), f"job {i} {job}: pinned but not started: {view}, {stamp!r}"
            slurm.cancel(job_id)
            slurm.wait_gone(job_id)
            continue
        env = written(out)
        if "SLURM_ADVISOR_LAYOUT" not in env:  # left to Slurm: it runs on its own list
            assert stamp.endswith(":observed"), (i, job, stamp)
            assert set(view.allocation) == set(expand_hostlist(env["SLURM_ARBITRARY_NODELIST"])), (i, view, env)
            if release.allocates_arbitrary:  # its own list, task by task: no SLURM_TASKS_PER_NODE there
                assert env["hostfile"] == ",".join(expand_hostlist(env["SLURM_ARBITRARY_NODELIST"])), (i, env)
        else:
            assert release.allocates_arbitrary, f"job {i}: pinned on Slurm {release}: {env}"
            counts = advised_counts(env["SLURM_ADVISOR_LAYOUT"])
            assert set(view.allocation) == set(counts), (i, job, view, env)
            for node, t in counts.items():
                assert view.allocation[node] == Resources(t * cpus, t * gpus, t * cpus * mem), (i, job, view, env)
            tasks = env["SLURM_ADVISOR_LAYOUT"].replace("ps=", "").replace(";worker=", ",").replace("worker=", "")
            assert env["hostfile"] == tasks.strip(","), (i, env)
            assert env["SLURM_ARBITRARY_NODELIST"] == env["hostfile"], (i, env)
            pinned += 1
            differs += _not_slurms_counts(counts)
        if rng.random() < 0.5:
            held[job_id] = sum(r.cpus for r in view.allocation.values())
        else:
            slurm.cancel(job_id)
            slurm.wait_gone(job_id)
    print(f"\nSlurm {release}: {pinned} of {JOBS} arbitrary jobs pinned to an exact layout, all allocated "
          f"as advised; {differs} of them laid out otherwise than one task per node then node-order fill")
    if release.allocates_arbitrary:
        assert pinned >= JOBS // 2, f"only {pinned} of {JOBS} pinned: the test tells little"
    else:
        assert pinned == 0
        daemon.stop()  # its decisions are then all written
        reasons = [d["reason"] for d in daemon.decisions().values()]
        assert len(reasons) == JOBS and sum("exact layouts from 23.11" in r for r in reasons) >= JOBS // 2, reasons


def _not_slurms_counts(counts: Counter) -> bool:
    """Whether the counts are not what pinning the nodes alone gives on an empty testbed with one
    CPU per task (one task per node, the rest in node-index order): a rough 'telling' count."""
    order = sorted(counts, key=lambda n: int(n[1:]))
    total, fill = sum(counts.values()), {}
    left = total - len(order)
    for node in order:
        more = min(7, left)
        fill[node], left = 1 + more, left - more
    return fill != dict(counts)

