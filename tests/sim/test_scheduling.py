"""The simulated Slurm schedules as Slurm does: time limits, per-node backfill, no shortcut.

The cases are the ones a review reproduced on the earlier simulator (each fails there).
"""
import numpy as np
import pytest
from test_engine import HalvesWhenShared, times

from slurm_advisor.advisor import Advisor
from slurm_advisor.domain import Job, Node, Placement, Resources
from slurm_advisor.policies import make_policy
from slurm_advisor.policies.base import Hold
from slurm_advisor.policies.slurm_default import SlurmDefaultPolicy
from slurm_advisor.sim.engine import Simulation
from slurm_advisor.sim.scheduler import SchedulerConfig
from slurm_advisor.speedmodels.constant import ConstantSpeed

TWO = [Node("n1", 8, 2, 32_000), Node("n2", 8, 2, 32_000)]
ONE_GPU = Resources(2, 1, 8_000)
INSTANT = SchedulerConfig(bf_interval_s=0)


def job(job_id, submit, workers, seconds, limit=None, worker=ONE_GPU, type_="resnet50") -> Job:
    return Job(job_id, type_, 0, workers, Resources(), worker, seconds, submit_time=submit,
               time_limit_s=limit)


def run(nodes, jobs, truth=None, config=INSTANT, policy=None):
    sim = Simulation(nodes, jobs, Advisor(policy or SlurmDefaultPolicy()), truth or ConstantSpeed(),
                     scheduler=config)
    return sim, sim.run()


def test_a_job_that_reaches_its_limit_is_ended_as_timeout() -> None:
    # two 1-GPU jobs share n1 and halve each other: "slow" needs 100 s alone, 200 s shared,
    # but its limit is 150 s
    jobs = [job("slow", 0, 1, 100, limit=150), job("other", 0, 1, 1000, limit=3000)]
    _, result = run([Node("n1", 8, 2, 32_000)], jobs, HalvesWhenShared())
    by_id = {r.job_id: r for r in result.records}
    assert by_id["slow"].state == "TIMEOUT" and by_id["slow"].end == 150
    assert by_id["other"].state == "COMPLETED"
    assert result.summary()["timeouts"] == 1


def test_the_default_limit_is_a_multiple_of_the_run_alone_in_whole_minutes() -> None:
    config = SchedulerConfig(limit_factor=3.0)
    assert config.time_limit(None, 100.0) == 300.0
    assert config.time_limit(None, 101.0) == 360.0
    assert config.time_limit(45.0, 100.0) == 45.0
    assert SchedulerConfig().time_limit(None, 100.0) == 1020.0  # 10x, whole minutes
    assert SchedulerConfig(max_time_s=200).time_limit(None, 100.0) == 200.0
    with pytest.raises(ValueError, match="limit_factor"):
        SchedulerConfig(limit_factor=0.5)


class Pinned:
    """Places the listed jobs where told, every other job as slurm-default would."""
    name = "pinned"

    def __init__(self, where: dict[str, list[str]]):
        self.where = where

    def place(self, snapshot, job, rng):
        if job.id in self.where:
            return Placement.of(job, self.where[job.id])
        return SlurmDefaultPolicy().place(snapshot, job)

    def score_nodes(self, snapshot, job):
        return {}


def test_backfill_checks_room_per_node_not_cluster_wide() -> None:
    # "a" holds one GPU of n1, "b" one of n2. "head" needs both GPUs of one node. At t=2 one GPU
    # is free on each node, so a cluster-wide check let "side" (long) take n1's and the head
    # waited until 300. Per node, the head is reserved on n1 at 100 and "side" goes to n2.
    jobs = [job("a", 0, 1, 100, limit=100), job("b", 0, 1, 300, limit=300),
            job("head", 1, 1, 10, limit=10, worker=Resources(4, 2, 8_000)),
            job("side", 2, 1, 500, limit=500)]
    _, result = run(TWO, jobs, policy=Pinned({"a": ["n1"], "b": ["n2"]}))
    t = times(result)
    assert t["head"] == (100, 110)
    assert t["side"] == (2, 502)


def test_a_backfilled_job_that_overruns_is_ended_at_its_limit_and_does_not_delay_the_head() -> None:
    # Under HalvesWhenShared a backfilled job slows its neighbour. With run times standing in
    # for limits, "a" overran and the head started at 190 instead of 100. With limits, the plan
    # is made with the limits, and Slurm's promise holds.
    one = [Node("n1", 8, 4, 32_000)]
    jobs = [job("a", 0, 2, 50, limit=100), job("head", 1, 4, 10, limit=20),
            job("fill", 2, 2, 40, limit=60)]
    sim, result = run(one, jobs, HalvesWhenShared())
    t = times(result)
    assert sim.planned_as_head["head"] == 100
    assert t["head"][0] <= 100


def test_a_hold_blocks_only_the_held_job() -> None:
    class HoldsVgg:
        name = "holds-vgg"

        def place(self, snapshot, job, rng):
            if job.type == "vgg16":
                return Hold("waits", max_nodes=1)
            return SlurmDefaultPolicy().place(snapshot, job)

        def score_nodes(self, snapshot, job):
            return {}

    jobs = [job("busy", 0, 1, 100, limit=100), job("vgg", 2, 1, 10, limit=60, type_="vgg16"),
            job("bert", 2, 1, 10, limit=60, type_="bert")]
    _, result = run(TWO, jobs, policy=HoldsVgg())
    # bert has vgg's shape and used to wait behind the held job until a finish (t=100)
    assert times(result)["bert"] == (2, 12)
    assert result.holds >= 1


def _random_trace(seed: int, n: int = 40, early: bool = False):
    rng = np.random.default_rng(seed)
    nodes = [Node(f"n{i}", 8, 4, 32_000) for i in range(1, 5)]
    jobs = []
    t = 0.0
    for i in range(n):
        t += float(rng.exponential(20.0))
        limit = float(rng.integers(1, 8)) * 30.0
        seconds = limit * (float(rng.uniform(0.3, 1.0)) if early else 1.0)
        workers = int(rng.choice([1, 2, 3, 4, 6, 8, 12]))
        jobs.append(job(f"j{i:02d}", t, workers, seconds, limit=limit,
                        worker=Resources(int(rng.integers(1, 3)), int(rng.integers(0, 2)), 2_000)))
    return nodes, jobs


@pytest.mark.parametrize("seed", range(8))
def test_the_head_job_never_starts_after_its_reservation(seed: int) -> None:
    # Slurm's promise for the job at the head of the queue: running jobs end by their limits,
    # nothing ahead of it is pending, so no later plan can be worse. Jobs end early here.
    # Only the head's plan is such a bound: a planned job blocks its nodes whole during its
    # window while running jobs share nodes (backfill.c's node-space map), so plans behind the
    # head are pessimistic; a job ahead that starts earlier than planned can then push a later
    # job's plan back. Slurm behaves the same.
    nodes, jobs = _random_trace(seed, early=True)
    sim, result = run(nodes, jobs, config=SchedulerConfig(bf_interval_s=1.0, eager_plans=True))
    starts = {r.job_id: r.start for r in result.records}
    assert sim.planned_as_head, "the trace must make jobs wait"
    for job_id, planned in sim.planned_as_head.items():
        assert starts[job_id] <= planned + 1e-9, job_id


def _same_records(seed: int, n: int, interval: float, policies: tuple[str, ...], **variant) -> None:
    """The default schedule and ``variant`` give identical records for every policy."""
    nodes, jobs = _random_trace(seed, n=n, early=True)
    for policy in policies:
        _, default = run(nodes, jobs, config=SchedulerConfig(bf_interval_s=interval), policy=make_policy(policy))
        _, other = run(nodes, jobs, config=SchedulerConfig(bf_interval_s=interval, **variant),
                       policy=make_policy(policy))
        assert default.records == other.records, policy


@pytest.mark.parametrize("seed", range(6))
def test_skipping_unchanged_passes_changes_nothing(seed: int) -> None:
    # the plain schedule: a backfill pass at every tick while jobs wait
    _same_records(seed, 50, 5.0, ("slurm-default", "pack", "spread"), every_tick=True)


@pytest.mark.parametrize("seed", range(6))
def test_planning_only_when_a_job_behind_could_start_changes_nothing(seed: int) -> None:
    _same_records(seed, 60, 2.0, ("slurm-default", "pack", "random"), eager_plans=True)


def test_backfill_runs_on_its_interval() -> None:
    # the head blocks; "small" could backfill at 3 but waits for the next 30-s tick
    jobs = [job("a", 0, 4, 100, limit=100), job("head", 1, 4, 10, limit=10),
            job("small", 3, 1, 10, limit=20)]
    three = TWO + [Node("n3", 8, 2, 32_000)]
    _, result = run(three, jobs, config=SchedulerConfig(bf_interval_s=30.0))
    assert times(result)["small"] == (30, 40)
    _, instant = run(three, jobs)
    assert times(instant)["small"] == (3, 13)
