"""The simulator against a real slurmctld, start by start (issue 42). Pure: no Slurm here.

A :class:`Workload` is a seeded list of ``sleep`` jobs as ``sbatch`` takes them (tasks, CPUs and
GPUs per task, ``--time`` in whole minutes, the sleep, the submission offset); a :class:`Case`
is one workload as a slurmctld ran it: the submissions as Slurm recorded them (whole seconds
since the first), Slurm's starts and ends, the release and its SchedulerParameters. A case is
JSON, so a run on the testbed (``benchmarks/backfill_agreement.py``) becomes a test fixture that
:func:`replay` runs through the simulator without Slurm; :func:`agreement` scores the two.

Agreement, as issue 42 states it: the mean |start difference| over the mean run time (Slurm's
end minus start), and the share of job pairs the simulator starts in Slurm's order; a pair
whose Slurm starts lie within ``SIMULTANEOUS_S`` of each other is simultaneous and left out.
"""
from __future__ import annotations

import itertools
import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from slurm_advisor.advisor import Advisor
from slurm_advisor.domain import Job, Node, Resources
from slurm_advisor.policies import PolicyContext, make_policy
from slurm_advisor.sim.engine import Simulation
from slurm_advisor.sim.scheduler import SchedulerConfig
from slurm_advisor.slurm.release import DEFAULT, Release
from slurm_advisor.speedmodels.constant import ConstantSpeed

#: .ci/slurm-testbed.sh: 4 nodes, 8 CPUs, 4 (fake) GPUs and 32000 MB each; DefMemPerCPU=1000.
TESTBED = tuple(Node(f"n{i}", 8, 4, 32_000) for i in range(1, 5))
MEM_PER_CPU = 1000
TESTBED_KILL_WAIT_S = 2.0  # its slurm.conf's KillWait
SIMULTANEOUS_S = 3.0
MODELLED_PARAMETERS = frozenset({"bf_interval", "bf_resolution", "bf_window", "bf_max_job_test"})
#: Options that move Slurm's passes by fractions of a second or only under load (lock yields,
#: RPC throttling) on a queue this small: ignored.
TIMING_PARAMETERS = frozenset({"batch_sched_delay", "sched_min_interval", "bf_yield_interval", "bf_yield_sleep",
                               "max_rpc_cnt", "bf_continue"})
#: Seconds a job holds its CPUs beyond its sleep (launch and teardown; see
#: tests/integration/test_slurm_backfill.py): half a second keeps off Slurm's whole seconds.
PICKUP_S = 0.5


@dataclass(frozen=True)
class Submission:
    """One ``sbatch``: ``tasks`` x (``cpus`` CPUs, ``gpus`` GPUs, ``cpus`` x 1000 MB), ``--time``
    ``minutes``, ``sleep_s`` of work, submitted ``submit_s`` after the first."""

    tasks: int
    cpus: int
    gpus: int
    sleep_s: int
    minutes: int
    submit_s: float = 0.0

    def sbatch_options(self) -> list[str]:
        gpus = [f"--gpus-per-task={self.gpus}"] if self.gpus else []
        return [f"--ntasks={self.tasks}", f"--cpus-per-task={self.cpus}", *gpus,
                f"--mem-per-cpu={MEM_PER_CPU}", f"--time={self.minutes}"]


def workload(seed: int) -> list[Submission]:
    """A seeded mix, about 4 minutes on the testbed: 16-22 jobs, one in four wide (10-20
    one-CPU tasks, or 5-10 one-GPU tasks), one in four using GPUs; sleeps 20-120 s (wide jobs
    up to 80 s); limits 1.05-5x the sleep (log-uniform) rounded up to whole minutes; one job in
    ten sleeps past a 1-2 minute limit (Slurm ends it: TIMEOUT); all submitted at once, or (every other
    seed) arriving 0-12 s apart."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(16, 23))
    spread = seed % 2 == 1
    out, t = [], 0.0
    for _ in range(n):
        wide, gpu = rng.random() < 0.25, rng.random() < 0.25
        if gpu:
            tasks, cpus, gpus = (int(rng.integers(5, 11)), 1, 1) if wide else (int(rng.integers(1, 4)),
                                                                             int(rng.integers(1, 3)), 1)
        else:
            tasks, cpus, gpus = (int(rng.integers(10, 21)), 1, 0) if wide else (int(rng.integers(1, 5)), 1, 0)
        sleep = int(rng.integers(20, 81 if wide else 121))
        factor = float(np.exp(rng.uniform(math.log(1.05), math.log(5.0))))
        minutes = math.ceil(factor * sleep / 60)
        if rng.random() < 0.1:  # runs past a short limit
            minutes = int(rng.integers(1, 3))
            sleep = 60 * minutes + int(rng.integers(20, 60))
        out.append(Submission(tasks, cpus, gpus, sleep, minutes, round(t, 1)))
        if spread:
            t += float(rng.uniform(0, 12))
    return out


@dataclass(frozen=True)
class Case:
    """A workload as a slurmctld ran it. Times in seconds since the first submission, as Slurm
    records them (whole seconds); ``epoch_s``: that submission's Unix time."""

    release: str
    scheduler_parameters: str
    epoch_s: float
    submissions: tuple[Submission, ...]
    starts: tuple[float, ...]
    ends: tuple[float, ...]
    states: tuple[str, ...]
    seed: int | None = None
    notes: dict = field(default_factory=dict)

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1)

    @classmethod
    def from_dict(cls, d: dict) -> Case:
        return cls(d["release"], d["scheduler_parameters"], d["epoch_s"],
                   tuple(Submission(**s) for s in d["submissions"]), tuple(d["starts"]), tuple(d["ends"]),
                   tuple(d["states"]), d.get("seed"), d.get("notes", {}))

    @classmethod
    def load(cls, path: str | Path) -> Case:
        return cls.from_dict(json.loads(Path(path).read_text()))


def scheduler_config(parameters: str, epoch_s: float, boot_s: float = 0.0,
                     kill_wait_s: float = TESTBED_KILL_WAIT_S, release: Release = DEFAULT) -> SchedulerConfig:
    """The simulator's settings for a SchedulerParameters string (the bf_* options it models),
    the first submission's and slurmctld's start's wall-clock times, KillWait and the release."""
    opts = dict(p.partition("=")[::2] for p in parameters.split(",") if p)
    unknown = sorted(set(opts) - MODELLED_PARAMETERS - TIMING_PARAMETERS)
    if unknown:
        raise ValueError(f"SchedulerParameters {', '.join(unknown)} not modelled; the simulator models "
                         f"{', '.join(sorted(MODELLED_PARAMETERS))} (and ignores {', '.join(sorted(TIMING_PARAMETERS))})")
    kw = {"epoch_s": epoch_s, "timelimit_phase_s": boot_s, "kill_wait_s": kill_wait_s, "release": release}
    for name, key, scale in (("bf_interval", "bf_interval_s", 1.0), ("bf_resolution", "bf_resolution_s", 1.0),
                             ("bf_window", "bf_window_s", 60.0)):
        if opts.get(name):
            kw[key] = float(opts[name]) * scale
    if opts.get("bf_max_job_test"):
        kw["bf_max_job_test"] = int(opts["bf_max_job_test"])
    return SchedulerConfig(**kw)


def case_config(case: Case) -> SchedulerConfig:
    """The settings the case's slurmctld ran with."""
    return scheduler_config(case.scheduler_parameters, case.epoch_s, case.notes.get("slurmctld_boot_s", 0.0),
                            case.notes.get("kill_wait_s", TESTBED_KILL_WAIT_S), Release.parse(case.release))


def replay(case: Case, nodes: tuple[Node, ...] = TESTBED, config: SchedulerConfig | None = None) -> list[float]:
    """The simulator's start of each submission, in seconds since the first (with the case's
    settings and release unless ``config``)."""
    config = config or case_config(case)
    jobs = [Job(f"j{i}", "sleep", 0, s.tasks, Resources(), Resources(s.cpus, s.gpus, s.cpus * MEM_PER_CPU),
                iterations=s.sleep_s + PICKUP_S, submit_time=sub, time_limit_s=60.0 * s.minutes)
            for i, (s, sub) in enumerate(zip(case.submissions, _submits(case)))]
    policy = make_policy("slurm-default", PolicyContext(release=config.release))
    result = Simulation(nodes, jobs, Advisor(policy), ConstantSpeed(), scheduler=config).run()
    starts = {r.job_id: r.start for r in result.records}
    return [starts[f"j{i}"] for i in range(len(jobs))]


def _submits(case: Case) -> list[float]:
    return [s.submit_s for s in case.submissions]


@dataclass(frozen=True)
class Agreement:
    mean_abs_diff_s: float
    mean_runtime_s: float
    pairs: int          # pairs whose Slurm starts lie more than SIMULTANEOUS_S apart
    pairs_in_order: int

    @property
    def ratio(self) -> float:
        return self.mean_abs_diff_s / self.mean_runtime_s

    @property
    def in_order(self) -> float:
        return self.pairs_in_order / self.pairs if self.pairs else 1.0


def agreement(case: Case, simulated: list[float]) -> Agreement:
    slurm = case.starts
    diff = float(np.mean([abs(a - b) for a, b in zip(slurm, simulated)]))
    runtime = float(np.mean([e - s for s, e in zip(case.starts, case.ends)]))
    pairs = in_order = 0
    for i, k in itertools.combinations(range(len(slurm)), 2):
        if abs(slurm[i] - slurm[k]) <= SIMULTANEOUS_S:
            continue
        pairs += 1
        in_order += (slurm[i] - slurm[k]) * (simulated[i] - simulated[k]) > 0
    return Agreement(diff, runtime, pairs, in_order)
