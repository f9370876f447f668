"""One conformance test over every registered policy: valid, within capacity, seeded, honest None."""
from pathlib import Path

import numpy as np
import pytest

from slurm_advisor.domain import ClusterSnapshot, Job, Node, Placement, Resources
from slurm_advisor.policies import FROM_MODEL, POLICIES, PolicyContext, make_policy
from slurm_advisor.policies.base import Hold
from slurm_advisor.speedmodels.contention import ContentionSpeedModel

NAMES = [name for name in POLICIES if name not in FROM_MODEL]  # these load a checkpoint, named "learned"
HOLDING = {"search"}  # may answer Hold: it weighs waiting against starting with a speed model

NODES = (Node("a1", 32, 8, 256_000, "s1"), Node("a2", 32, 8, 256_000, "s1"),
         Node("a3", 16, 4, 128_000, "s1"), Node("b1", 32, 8, 256_000, "s2"),
         Node("b2", 32, 8, 256_000, "s2"))
PS = Resources(4, 0, 16_000)
WORKER = Resources(4, 1, 24_000)
BIG_WORKER = Resources(8, 4, 64_000)


def job(job_id: str, job_type: str, num_ps: int, num_workers: int, worker: Resources = WORKER) -> Job:
    return Job(job_id, job_type, num_ps, num_workers, PS, worker, 1000.0)


def busy_snapshot() -> ClusterSnapshot:
    """Some nodes partly used, one nearly full, through the snapshot's own API."""
    snap = ClusterSnapshot.empty(NODES, time=100.0)
    for j, nodes in ((job("r1", "resnet50", 0, 6), ["a1"] * 6),
                     (job("r2", "vgg16", 1, 3), ["a2", "a2", "a2", "b1"]),
                     (job("r3", "bert", 0, 3), ["a3", "a3", "a3"]),
                     (job("r4", "a3c", 0, 1), ["b2"])):
        snap = snap.with_job(j, Placement.of(j, nodes))
    return snap


SNAPSHOTS = {"empty": ClusterSnapshot.empty(NODES), "busy": busy_snapshot()}
FITTING = [
    job("ar1", "resnet50", 0, 1),
    job("ar4", "transformer", 0, 4),
    job("ar12", "resnet18", 0, 12),           # must span nodes
    job("ps1x2", "vgg16", 1, 2),
    job("ps2x8", "inception3", 2, 8),
    job("ps3x10", "mystery", 3, 10),           # unknown type
    job("big2", "bert", 0, 2, BIG_WORKER),
]


def build(name: str, site_model: Path):
    model_dir = site_model if name == "search" else None  # search weighs with a site speed model
    return make_policy(name, PolicyContext(truth=ContentionSpeedModel(), model_dir=model_dir))


@pytest.mark.parametrize("snapshot_name", SNAPSHOTS)
@pytest.mark.parametrize("name", NAMES)
def test_policy_conformance(name: str, snapshot_name: str, site_model_dir: Path) -> None:
    snap = SNAPSHOTS[snapshot_name]
    policy = build(name, site_model_dir)
    assert policy.name == name
    for j in FITTING:
        placement = policy.place(snap, j, np.random.default_rng(3))
        assert placement is not None, f"{name} could not place {j.id}"
        if isinstance(placement, Hold):  # a deliberate wait, from a policy that judges speed only
            assert name in HOLDING and placement.reason and placement.max_nodes >= 1, (name, j.id)
            assert build(name, site_model_dir).place(snap, j, np.random.default_rng(3)) == placement
            continue
        assert placement.job_id == j.id
        assert tuple(t.role for t in placement.tasks) == j.roles()
        assert all(t.node in {n.name for n in NODES} for t in placement.tasks)
        assert snap.fits(j, placement), f"{name} over-commits for {j.id}: {placement}"
        snap.with_job(j, placement)  # does not raise
        # same seed -> same placement, also from a fresh policy object
        again = build(name, site_model_dir).place(snap, j, np.random.default_rng(3))
        assert again == placement
        assert policy.place(snap, j, np.random.default_rng(3)) == placement
        scores = policy.score_nodes(snap, j)
        assert set(scores) == {n.name for n in NODES}


@pytest.mark.parametrize("name", NAMES)
def test_policy_returns_none_when_the_job_cannot_fit(name: str, site_model_dir: Path) -> None:
    snap = SNAPSHOTS["busy"]  # free GPUs: a1 2, a2 5, a3 1, b1 7, b2 7
    policy = build(name, site_model_dir)
    too_wide = job("wide", "resnet50", 0, 9, BIG_WORKER)          # 36 GPUs > 22 free
    too_tall = job("tall", "resnet50", 0, 1, Resources(4, 9, 1))  # no node has 9 GPUs
    fragmented = job("frag", "resnet50", 0, 4, BIG_WORKER)        # 4 x 4 GPUs: only a2, b1, b2 hold one
    no_ps_room = Job("ps", "vgg16", 1, 1, Resources(64, 0, 1), WORKER, 10.0)  # PS larger than any node
    for j in (too_wide, too_tall, fragmented, no_ps_room):
        for seed in range(3):
            assert policy.place(snap, j, np.random.default_rng(seed)) is None, (name, j.id)


def test_every_policy_but_the_checkpoint_ones_is_covered() -> None:
    assert set(NAMES) == set(POLICIES) - {"learned", "learned-fast"}
    assert len(NAMES) >= 6
