"""Holding a job for a better placement: by the fitted speed model, never on an idle cluster."""
from __future__ import annotations

import numpy as np

from slurm_advisor.advisor import Advisor
from slurm_advisor.domain import ClusterSnapshot, Job, Node, Placement, Resources
from slurm_advisor.policies.base import Hold
from slurm_advisor.policies.patience import PatientPolicy
from slurm_advisor.policies.slurm_default import SlurmDefaultPolicy

NODES = tuple(Node(f"n{i}", 32, 8, 256000) for i in range(3))
JOB = Job("j", "vgg16", 0, 8, Resources(), Resources(2, 1, 1000), 100.0)
RNG = np.random.default_rng(0)


class NodesSpeed:
    """A stand-in speed model: 10 it/s divided by the number of nodes the job spans."""

    def __init__(self):
        self.calls = 0

    def predict(self, snapshot, job, placement):
        self.calls += 1
        return 10.0 / len(placement.nodes())


def busy(filler_iterations: tuple[float, float, float] = (10.0, 10.0, 10.0)) -> ClusterSnapshot:
    """Four GPUs taken on each node by jobs that run 1 s alone (by default): no node holds 8 GPUs."""
    snap = ClusterSnapshot.empty(NODES)
    for name, iterations in zip(("n0", "n1", "n2"), filler_iterations):
        filler = Job(f"f{name}", "resnet50", 0, 4, Resources(), Resources(1, 1, 1000), iterations)
        snap = snap.with_job(filler, Placement.of(filler, [name] * 4))
    return snap


def test_holds_a_job_whose_predicted_speed_is_below_patience_of_alone() -> None:
    policy = PatientPolicy(SlurmDefaultPolicy(), NodesSpeed(), patience=0.7)
    # spans 2 nodes: predicted 5 it/s (20 s), alone 10; n0 is expected free after 1 s: 1 + 10 s
    decision = policy.place(busy(), JOB, RNG)
    assert isinstance(decision, Hold) and "50%" in decision.reason and "1 node(s)" in decision.reason


def test_starts_the_job_when_waiting_would_not_pay_even_for_it() -> None:
    policy = PatientPolicy(SlurmDefaultPolicy(), NodesSpeed(), patience=0.7)
    # The fillers run 12 s alone: waiting 12 + running 10 s loses to 20 s on two nodes now.
    assert isinstance(policy.place(busy((120.0, 120.0, 120.0)), JOB, RNG), Placement)
    # The first node to free up decides: one filler ends after 5 s, 5 + 10 < 20.
    assert isinstance(policy.place(busy((120.0, 50.0, 120.0)), JOB, RNG), Hold)


def test_starts_the_job_when_the_placement_is_good_enough() -> None:
    policy = PatientPolicy(SlurmDefaultPolicy(), NodesSpeed(), patience=0.5)
    assert policy.place(busy(), JOB, RNG) == SlurmDefaultPolicy().place(busy(), JOB)


def test_never_holds_on_an_idle_cluster_nor_at_patience_zero() -> None:
    # Nothing runs: nothing would free up, so holding would wait forever.
    three_nodes = Job("big", "vgg16", 0, 20, Resources(), Resources(2, 1, 1000), 10.0)
    idle = ClusterSnapshot.empty(NODES)
    speed = NodesSpeed()
    assert isinstance(PatientPolicy(SlurmDefaultPolicy(), speed, 0.99).place(idle, three_nodes, RNG), Placement)
    assert speed.calls == 0
    assert isinstance(PatientPolicy(SlurmDefaultPolicy(), speed, 0.0).place(busy(), JOB, RNG), Placement)


def test_the_speed_alone_is_predicted_once_per_job_shape() -> None:
    speed = NodesSpeed()
    policy = PatientPolicy(SlurmDefaultPolicy(), speed, patience=0.3)
    for i in range(3):
        policy.place(busy(), Job(f"j{i}", "vgg16", 0, 8, Resources(), Resources(2, 1, 1000), 10.0), RNG)
    assert speed.calls == 3 + 1  # one prediction per placement, one for the shape alone


def test_never_holds_a_job_already_on_as_few_nodes_as_it_can_be() -> None:
    # A hold must be expressible as a node-count cap on Slurm: waiting could not consolidate
    # a job that already spans its minimum, however slow its neighbours make it.
    class Slow:
        def predict(self, snapshot, job, placement):
            return 1.0 if snapshot.running else 10.0

    small = Job("s", "vgg16", 0, 4, Resources(), Resources(2, 1, 1000), 10.0)
    placement = PatientPolicy(SlurmDefaultPolicy(), Slow(), patience=0.85).place(busy(), small, RNG)
    assert isinstance(placement, Placement) and len(placement.nodes()) == 1


def test_a_placement_on_as_few_nodes_as_any_could_have_costs_no_prediction() -> None:
    # 8 GPUs on 8-GPU nodes: no placement has fewer than one node, so the check needs neither
    # Slurm's choice on the empty cluster nor a speed prediction. 12 GPUs need two nodes at least.
    speed = NodesSpeed()
    policy = PatientPolicy(SlurmDefaultPolicy(), speed, patience=0.99)
    on_one = Job("one", "vgg16", 0, 8, Resources(), Resources(2, 1, 1000), 100.0)
    assert policy.hold(busy(), on_one, Placement.of(on_one, ["n0"] * 8)) is None
    on_two = Job("two", "vgg16", 0, 12, Resources(), Resources(2, 1, 1000), 10.0)
    assert policy.hold(busy(), on_two, Placement.of(on_two, ["n0"] * 6 + ["n1"] * 6)) is None
    assert speed.calls == 0
    # One node more than the bound: the check runs (and holds, as the test above): the job alone,
    # the proposal, the fillers' shape alone (their expected ends), the consolidated placement.
    assert isinstance(policy.hold(busy(), on_one, Placement.of(on_one, ["n0"] * 4 + ["n1"] * 4)), Hold)
    assert speed.calls == 4


def test_a_placement_as_consolidated_as_slurms_on_the_empty_cluster_costs_no_prediction() -> None:
    # Five 12-CPU workers: 60 CPUs could fit on two 32-CPU nodes, but two workers fill a node, so
    # Slurm needs three even on the empty cluster. On three nodes the job is never held, and
    # neither its speed there nor alone is predicted.
    speed = NodesSpeed()
    policy = PatientPolicy(SlurmDefaultPolicy(), speed, patience=0.99)
    wide = Job("w", "vgg16", 0, 5, Resources(), Resources(12, 1, 1000), 100.0)
    assert policy.fewest(busy(), wide) == 3
    assert policy.hold(busy(), wide, Placement.of(wide, ["n0", "n0", "n1", "n1", "n2"])) is None
    assert speed.calls == 0
    assert policy.alone(busy(), wide) == (10.0 / 3, 3)  # when asked, from the same choice


def test_a_warm_up_leaves_the_hold_check_only_the_jobs_own_predictions() -> None:
    speed = NodesSpeed()
    policy = PatientPolicy(SlurmDefaultPolicy(), speed, patience=0.7)
    policy.warm(busy())
    assert speed.calls == 1  # the fillers' shape alone: their expected ends
    assert isinstance(policy.place(busy(), JOB, RNG), Hold)
    assert speed.calls == 1 + 3  # the job alone, on the proposal, on the consolidated placement later
    idle, never = PatientPolicy(SlurmDefaultPolicy(), speed, 0.7), PatientPolicy(SlurmDefaultPolicy(), speed, 0.0)
    idle.warm(ClusterSnapshot.empty(NODES))
    never.warm(busy())  # a policy that never holds reads no ends
    assert speed.calls == 4


class FindsNothing:
    """A proposer that never finds a placement (the network stuck half-way through a job)."""

    name = "stuck"

    def place(self, snapshot, job, rng):
        return None


def test_a_job_left_to_the_fallback_gets_the_same_check() -> None:
    # The advisor's fallback would start it where Slurm does (two nodes, half speed): hold it.
    assert isinstance(PatientPolicy(FindsNothing(), NodesSpeed(), 0.7).place(busy(), JOB, RNG), Hold)
    # Good enough there: None, so that the fallback places it as before.
    assert PatientPolicy(FindsNothing(), NodesSpeed(), 0.3).place(busy(), JOB, RNG) is None


def test_the_advisor_does_not_let_its_fallback_undo_that_hold() -> None:
    advisor = Advisor(PatientPolicy(FindsNothing(), NodesSpeed(), 0.7), fallback=SlurmDefaultPolicy())
    advice = advisor.advise(busy(), JOB, RNG)
    assert advice.held and advice.placement is None and not advice.fallback
    relaxed = Advisor(PatientPolicy(FindsNothing(), NodesSpeed(), 0.3), fallback=SlurmDefaultPolicy())
    advice = relaxed.advise(busy(), JOB, RNG)
    assert advice.fallback and advice.placement == SlurmDefaultPolicy().place(busy(), JOB)
