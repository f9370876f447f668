"""The simulator on golden tiny traces with hand-computed outcomes."""

import numpy as np
import pytest

from slurm_advisor.advisor import Advisor
from slurm_advisor.domain import ClusterSnapshot, Job, Node, Placement, Resources, SpeedSample
from slurm_advisor.policies import PolicyContext, make_policy
from slurm_advisor.policies.slurm_default import SlurmDefaultPolicy
from slurm_advisor.sim.engine import Simulation
from slurm_advisor.sim.scheduler import SchedulerConfig
from slurm_advisor.speedmodels.constant import ConstantSpeed
from slurm_advisor.speedmodels.contention import ContentionSpeedModel

TWO_NODES = [Node("n1", 8, 2, 32_000), Node("n2", 8, 2, 32_000)]
GPU_WORKER = Resources(2, 1, 8_000)


class HalvesWhenShared:
    """1 iteration/s alone on its nodes, 0.5 when any other job shares one of them."""
    name = "halves"
    local = True

    def __init__(self) -> None:
        self.calls: list[set[str] | None] = []

    def speeds(self, nodes, running, only=None):
        self.calls.append(None if only is None else set(only))
        out = {}
        for rj in running:
            if only is not None and rj.job.id not in only:
                continue
            mine = set(rj.placement.nodes())
            shared = any(set(o.placement.nodes()) & mine for o in running if o.job.id != rj.job.id)
            out[rj.job.id] = 0.5 if shared else 1.0
        return out


class SlowerWithMoreJobs:
    """A global (non-local) model: every job runs at 1 / (number of running jobs)."""
    name = "global"
    local = False

    def speeds(self, nodes, running, only=None):
        return {rj.job.id: 1.0 / len(running) for rj in running if only is None or rj.job.id in only}


def job(job_id: str, submit: float, workers: int, iterations: float, worker: Resources = GPU_WORKER,
        limit: float | None = None) -> Job:
    return Job(job_id, "resnet50", 0, workers, Resources(), worker, iterations, submit_time=submit,
               time_limit_s=limit)


def exact(job_id: str, submit: float, workers: int, seconds: float) -> Job:
    """A job whose time limit is exactly its run time at 1 it/s: Slurm's plan is then exact."""
    return job(job_id, submit, workers, seconds, limit=seconds)


def simulate(nodes, jobs, truth, policy: str = "slurm-default", **kw):
    # a backfill pass at every change; reservations on 1-s slots (Slurm's default is 60 s, below)
    kw.setdefault("scheduler", SchedulerConfig(bf_interval_s=0, bf_resolution_s=1))
    return Simulation(nodes, jobs, Advisor(make_policy(policy)), truth, **kw).run()


def times(result) -> dict[str, tuple[float, float]]:
    return {r.job_id: (r.start, r.end) for r in result.records}


def test_golden_fifo_with_backfill() -> None:
    # n1, n2: 2 GPUs each; every worker takes one GPU; speed 1 it/s, so iterations = seconds,
    # and every time limit is the run time: Slurm's plan is exact.
    jobs = [exact("j1", 0, 2, 100), exact("j2", 0, 2, 50),
            exact("j3", 10, 4, 30),   # needs both nodes: reserved at 100, when j1 ends
            exact("j4", 20, 2, 40),   # fits at 50, its limit ends at 90 <= 100: backfills ahead of j3
            exact("j5", 30, 2, 60)]   # its limit would overlap j3's reservation: must wait
    result = simulate(TWO_NODES, jobs, ConstantSpeed())
    assert times(result) == {"j1": (0, 100), "j2": (0, 50), "j4": (50, 90), "j3": (100, 130),
                             "j5": (130, 190)}
    assert [r.job_id for r in result.records] == ["j2", "j4", "j1", "j3", "j5"]  # in order of finishing
    assert result.policy == "slurm-default"
    assert result.total_gpus == 4
    assert result.skipped == () and result.fallbacks == 0
    by_id = {r.job_id: r for r in result.records}
    assert by_id["j1"].num_nodes == 1 and by_id["j3"].num_nodes == 2 and by_id["j3"].gpus == 4
    assert all(r.isolated_runtime == pytest.approx(r.end - r.start) for r in result.records)
    assert all(r.slowdown == pytest.approx(1.0) for r in result.records)
    summary = result.summary()
    assert summary["makespan"] == 190
    assert summary["avg_jct"] == pytest.approx((100 + 50 + 70 + 120 + 160) / 5)
    assert summary["avg_queueing"] == pytest.approx((0 + 0 + 30 + 90 + 100) / 5)
    assert summary["utilization"] == pytest.approx((2 * 100 + 2 * 50 + 2 * 40 + 4 * 30 + 2 * 60) / (4 * 190))


def test_at_the_default_bf_resolution_a_reservation_holds_its_nodes_from_the_slot_it_starts_in() -> None:
    # the golden case above with bf_resolution=60 (Slurm's default): j3's reservation at 100 is
    # entered in the map from 60, so j4 (50 to 90) may not backfill ahead of it
    jobs = [exact("j1", 0, 2, 100), exact("j2", 0, 2, 50), exact("j3", 10, 4, 30),
            exact("j4", 20, 2, 40), exact("j5", 30, 2, 60)]
    result = simulate(TWO_NODES, jobs, ConstantSpeed(), scheduler=SchedulerConfig(bf_interval_s=0))
    assert times(result)["j3"] == (100, 130) and times(result)["j4"][0] >= 130


def test_without_a_blocked_head_the_queue_is_plain_fifo() -> None:
    jobs = [exact("a", 0, 4, 10), exact("b", 1, 4, 10), exact("c", 2, 1, 5)]
    result = simulate(TWO_NODES, jobs, ConstantSpeed())
    # at t=2 nothing is free (a holds all 4 GPUs), so c waits; at 10 b (the head) goes first,
    # and c may not backfill: it would need a GPU that b's reservation holds.
    assert times(result) == {"a": (0, 10), "b": (10, 20), "c": (20, 25)}


def test_backfill_into_extra_resources_that_the_head_does_not_need() -> None:
    three = TWO_NODES + [Node("n3", 8, 2, 32_000)]
    jobs = [exact("long", 0, 4, 100),       # n1 + n2
            exact("head", 1, 4, 10),        # needs 4: reserved at 100 on n1 + n2, leaves n3 over
            exact("side", 2, 2, 500)]       # ends long after 100, but fits on n3, which head leaves
    result = simulate(three, jobs, ConstantSpeed())
    assert times(result) == {"long": (0, 100), "side": (2, 502), "head": (100, 110)}


def test_speeds_are_recomputed_when_a_neighbour_arrives_and_leaves() -> None:
    one = [Node("n1", 8, 4, 32_000)]
    samples: list[list[SpeedSample]] = []
    truth = HalvesWhenShared()
    jobs = [job("j1", 0, 1, 100), job("j2", 20, 1, 20)]
    result = simulate(one, jobs, truth, recorder=samples.append)
    # 0-20: j1 alone at 1 it/s (20 done); 20-60: both at 0.5 (j2 done, j1 at 40); 60-120: j1 alone.
    assert times(result) == {"j2": (20, 60), "j1": (0, 120)}
    assert {r.job_id: r.slowdown for r in result.records} == {"j1": pytest.approx(1.2),
                                                              "j2": pytest.approx(2.0)}
    # a local model is asked only about the jobs an event touched (None: isolated-speed look-ups)
    assert [c for c in truth.calls if c is not None] == [{"j1"}, {"j1", "j2"}, {"j1"}]

    flat = [(s.time, s.subject.job.id, s.speed, tuple(n.job.id for n in s.neighbours)) for b in samples
            for s in b]
    assert flat == [(0, "j1", 1.0, ()), (20, "j1", 0.5, ("j2",)), (20, "j2", 0.5, ("j1",)),
                    (60, "j1", 1.0, ())]
    assert all(isinstance(s, SpeedSample) and s.source == "sim" for b in samples for s in b)
    j2_sample = samples[1][1]
    assert j2_sample.subject.placement == Placement.of(jobs[1], ["n1"])
    assert j2_sample.subject.start_time == 20
    assert j2_sample.neighbours[0].job == jobs[0]
    assert j2_sample.nodes == (one[0],)


def test_jobs_on_other_nodes_are_not_neighbours() -> None:
    samples: list[list[SpeedSample]] = []
    jobs = [job("a", 0, 1, 10), job("b", 0, 2, 10)]  # a on n1 (1 GPU), b fills... n1 has 1 left, so n2
    result = simulate(TWO_NODES, jobs, HalvesWhenShared(), recorder=samples.append)
    assert times(result) == {"a": (0, 10), "b": (0, 10)}
    assert all(s.neighbours == () and len(s.nodes) == 1 for b in samples for s in b)


def test_a_global_model_updates_every_running_job() -> None:
    jobs = [job("j1", 0, 1, 100), job("j2", 20, 2, 20)]  # on different nodes, yet the model couples them
    result = simulate(TWO_NODES, jobs, SlowerWithMoreJobs())
    # 0-20: j1 at 1 (20 done); 20-60: both at 0.5 (j2 done, j1 at 40); 60-120: j1 at 1.
    assert times(result) == {"j2": (20, 60), "j1": (0, 120)}


def test_jobs_that_never_fit_are_skipped() -> None:
    jobs = [job("ok", 0, 1, 10), job("wide", 0, 5, 10), job("tall", 1, 1, 10, Resources(2, 3, 1)),
            job("later", 2, 2, 5)]
    result = simulate(TWO_NODES, jobs, ConstantSpeed())
    assert result.skipped == ("wide", "tall")
    assert times(result) == {"ok": (0, 10), "later": (2, 7)}
    assert result.summary()["skipped"] == 2


def _mixed_trace(n: int = 40) -> tuple[list[Node], list[Job]]:
    rng = np.random.default_rng(11)
    nodes = [Node(f"g{i:02d}", 48, 8, 384_000, "s1" if i < 4 else "s2") for i in range(8)]
    types = ["resnet50", "vgg16", "bert", "a3c", "transformer", "mystery"]
    jobs = []
    for i in range(n):
        workers = int(rng.choice([1, 2, 4, 8, 12]))
        num_ps = int(rng.integers(0, 3)) if workers > 1 else 0
        jobs.append(Job(f"j{i:03d}", types[i % len(types)], num_ps, workers, Resources(4, 0, 16_000),
                        Resources(4, 1, 24_000), float(rng.integers(200, 4000)), submit_time=float(i * 30)))
    return nodes, jobs


@pytest.mark.parametrize("policy", ["random", "oracle"])
def test_same_seed_gives_identical_records(policy: str) -> None:
    nodes, jobs = _mixed_trace(25 if policy == "oracle" else 40)
    truth = ContentionSpeedModel()

    def once(seed: int):
        samples: list = []
        advisor = Advisor(make_policy(policy, PolicyContext(truth=truth)))
        result = Simulation(nodes, jobs, advisor, truth, seed=seed, recorder=samples.extend,
                            sample_noise=0.05).run()
        return result, samples

    (first, s1), (second, s2) = once(5), once(5)
    assert first.records == second.records and len(first.records) == len(jobs)
    assert s1 == s2
    if policy == "random":
        assert once(6)[0].records != first.records


def test_sample_noise_changes_recorded_speeds_not_the_simulation() -> None:
    nodes, jobs = _mixed_trace(15)
    truth = ContentionSpeedModel()

    def once(noise: float):
        samples: list = []
        result = Simulation(nodes, jobs, Advisor(SlurmDefaultPolicy()), truth, recorder=samples.extend,
                            sample_noise=noise).run()
        return result, samples

    (clean, clean_samples), (noisy, noisy_samples) = once(0.0), once(0.1)
    assert clean.records == noisy.records
    assert [s.subject.job.id for s in clean_samples] == [s.subject.job.id for s in noisy_samples]
    assert any(a.speed != b.speed for a, b in zip(clean_samples, noisy_samples))


def test_fallback_decisions_are_counted() -> None:
    class Never:
        name = "never"

        def place(self, snapshot, job, rng):
            return None

        def score_nodes(self, snapshot, job):
            return {}

    jobs = [job("a", 0, 1, 10), job("b", 0, 1, 10)]
    result = Simulation(TWO_NODES, jobs, Advisor(Never(), fallback=SlurmDefaultPolicy()), ConstantSpeed()).run()
    assert result.fallbacks == 2
    assert times(result) == {"a": (0, 10), "b": (0, 10)}
    assert result.policy == "never"


def test_a_held_job_waits_for_a_finish_and_is_not_placed_by_the_fallback() -> None:
    from slurm_advisor.policies.base import Hold

    class WholeNodeOrWait:
        """Holds a 2-GPU job unless one node has both GPUs free."""
        name = "patient"

        def place(self, snapshot, job, rng):
            placement = SlurmDefaultPolicy().place(snapshot, job)
            if placement is not None and len(placement.nodes()) > 1:
                return Hold("waits for a whole node")
            return placement

        def score_nodes(self, snapshot, job):
            return {}

    # "a" takes n1's CPUs but one GPU, so "b" lands on n2: "c" (2 GPUs) could start split over
    # both nodes at t=0 but is held until "a" frees n1 at t=10. A fallback is configured and
    # must not overrule the hold.
    small = Resources(1, 1, 1_000)
    jobs = [job("a", 0, 1, 10, Resources(7, 1, 8_000)), job("b", 0, 1, 30), job("c", 0, 2, 5, small)]
    advisor = Advisor(WholeNodeOrWait(), fallback=SlurmDefaultPolicy())
    result = Simulation(TWO_NODES, jobs, advisor, ConstantSpeed(), scheduler=SchedulerConfig(bf_interval_s=0)).run()
    assert times(result)["b"] == (0, 30)
    assert times(result)["c"] == (10, 15)
    assert result.holds >= 1 and result.fallbacks == 0
    assert result.summary()["holds"] == result.holds


def test_simulations_may_share_the_isolated_speeds_of_their_truth_and_cluster_only() -> None:
    from slurm_advisor.policies.isolated import IsolatedSpeeds

    truth = ConstantSpeed()
    jobs = [exact("a", 0, 2, 100), exact("b", 10, 4, 50)]
    shared = IsolatedSpeeds(truth, TWO_NODES)
    first = simulate(TWO_NODES, jobs, truth, isolated=shared)
    again = simulate(TWO_NODES, jobs, truth, isolated=shared)  # answered from the first one's asks
    assert times(first) == times(again) == times(simulate(TWO_NODES, jobs, truth))
    with pytest.raises(ValueError, match="another truth"):
        simulate(TWO_NODES, jobs, ConstantSpeed(), isolated=shared)
    with pytest.raises(ValueError, match="another truth or cluster"):
        simulate(TWO_NODES[:1] + [Node("n3", 8, 2, 32_000)], jobs, truth, isolated=shared)


def test_a_simulation_continued_from_a_mid_run_state_ends_every_job_as_the_whole_run_does() -> None:
    # a and b share n1 (each at half speed), c arrives later and runs alone on n2
    jobs = [job("a", 0, 1, 100, limit=1_000), job("b", 0, 1, 60, limit=1_000), job("c", 50, 1, 40, limit=1_000)]
    config = SchedulerConfig(bf_interval_s=0, bf_resolution_s=1)
    whole = simulate(TWO_NODES, jobs, HalvesWhenShared(), scheduler=config)

    state = ClusterSnapshot.empty(tuple(TWO_NODES))
    for j in jobs[:2]:
        state = state.with_job(j, SlurmDefaultPolicy().place(state, j), 0.0)
    assert {n for rj in state.running for n in rj.placement.nodes()} == {"n1"}
    at_30 = state.at(30.0)
    left = {"a": 100 - 0.5 * 30, "b": 60 - 0.5 * 30}
    continued = Simulation.continuing(at_30, left, jobs[2:], Advisor(make_policy("slurm-default")),
                                      HalvesWhenShared(), scheduler=config).run()
    assert times(continued) == times(whole) and times(whole)["b"] == (0.0, 120.0)  # halves: exact in floats
    assert {r.job_id: r.state for r in continued.records} == dict.fromkeys("abc", "COMPLETED")


def test_a_continued_simulation_refuses_jobs_before_its_state_and_running_jobs_without_progress() -> None:
    state = ClusterSnapshot.empty(tuple(TWO_NODES), time=100.0)
    with pytest.raises(ValueError, match="before the snapshot's time"):
        Simulation.continuing(state, {}, [job("late", 50, 1, 10)], Advisor(make_policy("slurm-default")),
                              ConstantSpeed())
    running = job("a", 0, 1, 10)
    state = state.with_job(running, SlurmDefaultPolicy().place(state, running), 0.0)
    with pytest.raises(ValueError, match="running job.*a$"):
        Simulation.continuing(state, {}, [], Advisor(make_policy("slurm-default")), ConstantSpeed())


@pytest.mark.parametrize(("check_s", "end"), [(0.0, 100.0), (30.0, 120.0), (45.0, 135.0)])
def test_a_running_job_past_its_limit_ends_at_the_next_limit_check_when_the_simulation_goes_on(
        check_s: float, end: float) -> None:
    # at once with no periodic check; else at slurmctld's next check (every check_s from time 0)
    over = job("over", 0, 1, 100, limit=10)
    state = ClusterSnapshot.empty(tuple(TWO_NODES))
    state = state.with_job(over, SlurmDefaultPolicy().place(state, over), 0.0).at(100.0)
    result = Simulation.continuing(state, {"over": 90.0}, [], Advisor(make_policy("slurm-default")),
                                   ConstantSpeed(), scheduler=SchedulerConfig(timelimit_check_s=check_s)).run()
    (record,) = result.records
    assert (record.end, record.state) == (end, "TIMEOUT")
