"""The one decision call: check the policy's proposal, fall back, explain."""
import numpy as np
import pytest

from slurm_advisor.advisor import Advisor
from slurm_advisor.domain import ClusterSnapshot, Job, Node, Placement, Resources, Role, TaskAssignment
from slurm_advisor.policies.pack import PackPolicy
from slurm_advisor.policies.slurm_default import SlurmDefaultPolicy

NODES = (Node("n1", 8, 2, 32_000), Node("n2", 8, 2, 32_000))
JOB = Job("j", "resnet50", 1, 2, Resources(2, 0, 4_000), Resources(2, 1, 8_000), 10.0)
RNG = np.random.default_rng(0)


class Fixed:
    """A policy that always proposes ``placement`` (possibly a bad one)."""

    def __init__(self, placement: Placement | None, name: str = "fixed"):
        self.placement, self.name = placement, name
        self.calls = 0

    def place(self, snapshot, job, rng):
        self.calls += 1
        return self.placement

    def score_nodes(self, snapshot, job):
        return {"n1": 0.25, "n2": 0.75}


class Predictor:
    def predict(self, snapshot, job, placement):
        return 3.5


def snap() -> ClusterSnapshot:
    """n1 has one GPU (and 4 CPUs) left, n2 is empty."""
    filler = Job("f", "x", 0, 1, Resources(), Resources(4, 1, 1), 1.0)
    return ClusterSnapshot.empty(NODES).with_job(filler, Placement.of(filler, ["n1"]))


INVALID = {
    "over capacity": Placement.of(JOB, ["n1", "n1", "n1"]),  # two workers, but n1 has one GPU left
    "unknown node": Placement.of(JOB, ["n1", "n9", "n1"]),
    "wrong job id": Placement("other", Placement.of(JOB, ["n1", "n1", "n2"]).tasks),
    "roles out of order": Placement("j", (TaskAssignment(Role.WORKER, "n1"), TaskAssignment(Role.PS, "n1"),
                                          TaskAssignment(Role.WORKER, "n2"))),
    "too few tasks": Placement("j", (TaskAssignment(Role.PS, "n1"), TaskAssignment(Role.WORKER, "n1"))),
}


def test_a_valid_proposal_is_taken() -> None:
    proposal = Placement.of(JOB, ["n1", "n1", "n2"])
    advice = Advisor(Fixed(proposal), fallback=SlurmDefaultPolicy()).advise(snap(), JOB, RNG)
    assert advice.job_id == "j"
    assert advice.placement == proposal
    assert (advice.policy, advice.fallback, advice.reason) == ("fixed", False, "")
    assert advice.node_scores == {} and advice.predicted_speed is None


@pytest.mark.parametrize("what", INVALID)
def test_an_invalid_proposal_is_refused_and_falls_back(what: str) -> None:
    s = snap()
    advice = Advisor(Fixed(INVALID[what]), fallback=SlurmDefaultPolicy()).advise(s, JOB, RNG)
    assert advice.placement is not None and advice.placement != INVALID[what]
    assert s.fits(JOB, advice.placement)
    assert advice.placement == SlurmDefaultPolicy().place(s, JOB) == Placement.of(JOB, ["n2"] * 3)
    assert (advice.policy, advice.fallback) == ("slurm-default", True)
    assert "fixed proposed an invalid placement" in advice.reason


@pytest.mark.parametrize("what", INVALID)
def test_an_invalid_proposal_without_fallback_means_wait(what: str) -> None:
    advice = Advisor(Fixed(INVALID[what])).advise(snap(), JOB, RNG)
    assert advice.placement is None
    assert (advice.policy, advice.fallback) == ("fixed", False)
    assert advice.reason == "fixed proposed an invalid placement"


def test_none_with_fallback_uses_the_fallback() -> None:
    advice = Advisor(Fixed(None), fallback=PackPolicy()).advise(snap(), JOB, RNG)
    assert advice.placement == PackPolicy().place(snap(), JOB)
    assert (advice.policy, advice.fallback) == ("pack", True)
    assert advice.reason == "fixed found no placement"


def test_none_without_fallback_waits() -> None:
    advice = Advisor(Fixed(None)).advise(snap(), JOB, RNG)
    assert advice.placement is None
    assert (advice.policy, advice.fallback, advice.reason) == ("fixed", False, "fixed found no placement")


def test_when_nothing_fits_even_the_fallback_waits() -> None:
    huge = Job("h", "x", 0, 9, Resources(), Resources(1, 1, 1), 1.0)
    advice = Advisor(Fixed(None), fallback=SlurmDefaultPolicy()).advise(snap(), huge, RNG)
    assert advice.placement is None and advice.fallback is False
    assert advice.policy == "fixed"


def test_an_invalid_fallback_answer_is_refused_too() -> None:
    bad_fallback = Fixed(INVALID["unknown node"], name="bad")
    advice = Advisor(Fixed(None), fallback=bad_fallback).advise(snap(), JOB, RNG)
    assert advice.placement is None and advice.fallback is False


def test_explain_fills_node_scores_and_prediction() -> None:
    proposal = Placement.of(JOB, ["n1", "n1", "n2"])
    advice = Advisor(Fixed(proposal), predictor=Predictor(), explain=True).advise(snap(), JOB, RNG)
    assert advice.node_scores == {"n1": 0.25, "n2": 0.75}
    assert advice.predicted_speed == 3.5
    quiet = Advisor(Fixed(proposal), predictor=Predictor()).advise(snap(), JOB, RNG)
    assert quiet.node_scores == {} and quiet.predicted_speed is None


def test_explain_with_a_real_policy_scores_every_node() -> None:
    advice = Advisor(SlurmDefaultPolicy(), explain=True).advise(snap(), JOB, RNG)
    assert advice.placement == Placement.of(JOB, ["n2", "n2", "n2"])
    assert set(advice.node_scores) == {"n1", "n2"}
    assert advice.node_scores["n1"] > advice.node_scores["n2"]


def test_a_hold_is_a_deliberate_wait_that_the_fallback_does_not_overrule() -> None:
    from slurm_advisor.policies.base import Hold
    fallback = Fixed(Placement.of(JOB, ["n2", "n2", "n2"]), name="fallback")
    advice = Advisor(Fixed(Hold("waits for n2")), fallback=fallback).advise(snap(), JOB, RNG)
    assert advice.placement is None and advice.held and not advice.fallback
    assert advice.reason == "waits for n2" and advice.policy == "fixed"
    assert fallback.calls == 0


def test_in_advise_mode_a_hold_is_left_to_slurm_which_places_it_at_once() -> None:
    """The daemon in advise mode cannot delay a job: played by holds=False, a hold becomes the
    fallback's (slurm-default's) placement, which is where Slurm starts the job."""
    from slurm_advisor.policies.base import Hold
    fallback = Fixed(Placement.of(JOB, ["n2", "n2", "n2"]), name="slurm-default")
    advice = Advisor(Fixed(Hold("waits for n2")), fallback=fallback, holds=False).advise(snap(), JOB, RNG)
    assert advice.placement == Placement.of(JOB, ["n2", "n2", "n2"]) and not advice.held
    assert advice.fallback and advice.policy == "slurm-default"


def test_a_warm_up_reaches_the_policy_through_a_gate_and_is_a_no_op_for_others() -> None:
    from slurm_advisor.policies.learned.adapter import GatedPolicy

    warmed = []

    class Warm(Fixed):
        def warm(self, snapshot):
            warmed.append(snapshot)

    snap = ClusterSnapshot.empty(NODES)
    Advisor(GatedPolicy(Warm(None))).warm(snap)
    Advisor(SlurmDefaultPolicy()).warm(snap)  # keeps no caches: nothing to do, nothing raised
    assert warmed == [snap]


class Raising:
    name = "raising"

    def place(self, snapshot, job, rng):
        raise RuntimeError("a model that breaks on this input")


def test_a_policy_that_raises_costs_nothing_the_fallback_places_and_it_is_counted(caplog):
    advisor = Advisor(Raising(), fallback=SlurmDefaultPolicy())
    snapshot = ClusterSnapshot.empty(NODES)
    for _ in range(3):
        advice = advisor.advise(snapshot, JOB, RNG)
        assert advice.placement is not None and advice.fallback and advice.policy == "slurm-default"
        assert advice.reason == "raising failed (RuntimeError)"
    assert advisor.errors == 3
    assert caplog.text.count("policy raising failed") == 2  # the 1st and 2nd; then the 4th, 8th, ...
    assert Advisor(Raising()).advise(snapshot, JOB, RNG).placement is None  # no fallback: no advice, no raise


def test_self_check_refuses_a_policy_that_cannot_decide_and_passes_one_that_can():
    from slurm_advisor.advisor import self_check

    with pytest.raises(ValueError, match="fails on a probe job: RuntimeError"):
        self_check(Raising())
    with pytest.raises(ValueError, match="no valid placement"):
        self_check(Fixed(None))
    self_check(SlurmDefaultPolicy())


def test_in_enforce_mode_a_hold_is_a_cap_slurm_keeps_and_the_policy_is_not_asked_again() -> None:
    """Played by caps=True: a hold with a node cap pends under the cap (as the daemon's 'cap'
    action: -N 1-cap), and Slurm's own rule starts it within the cap once it fits there."""
    from slurm_advisor.policies.base import Hold

    wide = Job("w", "resnet50", 0, 4, Resources(), Resources(2, 1, 4_000), 10.0)  # 4 GPUs: both nodes now
    policy = Fixed(Hold("waits for one node", max_nodes=1))
    advisor = Advisor(policy, fallback=SlurmDefaultPolicy(), caps=True)
    empty = ClusterSnapshot.empty((Node("n1", 8, 4, 32_000), Node("n2", 8, 2, 32_000)))
    busy = empty.with_job(JOB, Placement.of(JOB, ["n1", "n1", "n1"]))  # n1: 2 GPUs left; 4 in all
    first = advisor.advise(busy, wide, RNG)
    assert first.placement is None and first.held and first.max_nodes == 1  # 4 GPUs on 1 node: not now
    later = advisor.advise(empty, wide, RNG)
    assert later.placement is not None and later.placement.nodes() == ("n1",) and later.fallback
    assert policy.calls == 1  # decided once, at submission, as the daemon does
    # a cap no node of the cluster can meet is never sent: the job is Slurm's, uncapped
    never = Advisor(Fixed(Hold("waits", max_nodes=1)), fallback=SlurmDefaultPolicy(), caps=True)
    advice = never.advise(ClusterSnapshot.empty(NODES), wide, RNG)
    assert not advice.held and advice.placement is not None and len(advice.placement.nodes()) == 2


# -- played as the daemon serves it (holds=False: advise mode; caps=True: enforce mode) ----------
WORKERS = Job("w3", "resnet50", 0, 3, Resources(), Resources(2, 1, 4_000), 10.0)  # 3 one-GPU workers


class FirstNone(Fixed):
    """No placement at its first call (no room for its choice), ``placement`` at every later one."""

    def place(self, snapshot, job, rng):
        self.calls += 1
        return None if self.calls == 1 else self.placement


@pytest.mark.parametrize("mode", [{"holds": False}, {"caps": True}])
def test_as_served_a_job_left_to_slurm_stays_slurms_the_policy_is_not_asked_again(mode) -> None:
    """The hook asks once: a job the daemon left to Slurm at its first decision point is started
    later where Slurm's own rule puts it, not where the policy would place it then."""
    two = (Node("n1", 8, 2, 32_000), Node("n2", 8, 2, 32_000))
    empty = ClusterSnapshot.empty(two)
    filler = Job("f", "x", 0, 3, Resources(), Resources(1, 1, 1), 1.0)
    busy = empty.with_job(filler, Placement.of(filler, ["n1", "n1", "n2"]))  # one GPU free: no room
    policy = FirstNone(Placement.of(WORKERS, ["n1", "n2", "n2"]))
    advisor = Advisor(policy, fallback=SlurmDefaultPolicy(), **mode)
    assert advisor.advise(busy, WORKERS, RNG).placement is None
    later = advisor.advise(empty, WORKERS, RNG)
    assert later.placement == SlurmDefaultPolicy().place(empty, WORKERS) and later.fallback
    assert later.reason == "left to Slurm: fixed found no placement"
    assert policy.calls == 1
    plain = Advisor(FirstNone(Placement.of(WORKERS, ["n1", "n2", "n2"])), fallback=SlurmDefaultPolicy())
    plain.advise(busy, WORKERS, RNG)  # the plain simulator asks again at every decision point
    assert plain.advise(empty, WORKERS, RNG).placement == Placement.of(WORKERS, ["n1", "n2", "n2"])


@pytest.mark.parametrize("mode", [{"holds": False}, {"caps": True}])
def test_as_served_a_placement_runs_as_slurm_lays_out_a_pin_on_its_nodes(mode) -> None:
    """The daemon pins the node set and the task count; Slurm decides the tasks per node
    (slurm/expressible.py): one task on n1 and two on n2 pinned to n1,n2 runs as two and one."""
    three = (Node("n1", 8, 2, 32_000), Node("n2", 8, 2, 32_000), Node("n3", 8, 2, 32_000))
    filler = Job("f", "x", 0, 1, Resources(), Resources(1, 1, 1), 1.0)
    snapshot = ClusterSnapshot.empty(three).with_job(filler, Placement.of(filler, ["n3"]))
    proposed = Placement.of(WORKERS, ["n1", "n2", "n2"])
    served = Advisor(Fixed(proposed), fallback=SlurmDefaultPolicy(), **mode).advise(snapshot, WORKERS, RNG)
    assert served.placement == Placement.of(WORKERS, ["n1", "n1", "n2"])
    assert (served.policy, served.fallback) == ("fixed", False)
    plain = Advisor(Fixed(proposed), fallback=SlurmDefaultPolicy()).advise(snapshot, WORKERS, RNG)
    assert plain.placement == proposed
