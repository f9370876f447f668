"""Each baseline's defining behaviour, on literal snapshots."""
import numpy as np
import pytest

from slurm_advisor.domain import ClusterSnapshot, Job, Node, Placement, Resources
from slurm_advisor.errors import InputError
from slurm_advisor.policies import BASELINES, POLICIES, PolicyContext, make_policy

CAP = (32, 8, 256_000)
WORKER = Resources(2, 1, 8_000)


def nodes(*names: str) -> tuple[Node, ...]:
    return tuple(Node(n, *CAP) for n in names)


def snapshot(free_gpus: dict[str, int], order: tuple[str, ...] | None = None) -> ClusterSnapshot:
    """Nodes in the given (Slurm) order, each with only ``free_gpus`` GPUs left (CPUs/memory in step)."""
    names = order or tuple(free_gpus)
    snap = ClusterSnapshot.empty(nodes(*names))
    for name, free in free_gpus.items():
        used = 8 - free
        if used:
            filler = Job(f"fill-{name}", "resnet50", 0, used, Resources(), WORKER, 10.0)
            snap = snap.with_job(filler, Placement.of(filler, [name] * used))
    return snap


def workers(job_id: str, n: int, per_worker: Resources = WORKER, num_ps: int = 0) -> Job:
    return Job(job_id, "resnet50", num_ps, n, Resources(4, 0, 8_000), per_worker, 100.0)


def place(name: str, snap: ClusterSnapshot, job: Job) -> list[str] | None:
    p = make_policy(name).place(snap, job, np.random.default_rng(0))
    return None if p is None else [t.node for t in p.tasks]


# -- slurm-default (its node choice: tests/policies/test_cons_tres.py) -------------------
def test_slurm_default_scores_earlier_nodes_higher() -> None:
    snap = snapshot({"n1": 8, "n2": 8, "n3": 8})
    scores = make_policy("slurm-default").score_nodes(snap, workers("j", 1))
    assert scores["n1"] > scores["n2"] > scores["n3"]


# -- pack ----------------------------------------------------------------------------------
def test_pack_chooses_the_fullest_node_that_fits() -> None:
    snap = snapshot({"n1": 8, "n2": 2, "n3": 4})
    assert place("pack", snap, workers("j", 1)) == ["n2"]
    assert place("pack", snap, workers("j", 2)) == ["n2", "n2"]
    assert place("pack", snap, workers("j", 3)) == ["n3"] * 3
    assert place("pack", snap, workers("j", 5)) == ["n1"] * 5


def test_pack_fills_the_fullest_nodes_first_when_the_job_must_span() -> None:
    snap = snapshot({"n1": 8, "n2": 2, "n3": 4})
    assert place("pack", snap, workers("j", 11)) == ["n2"] * 2 + ["n3"] * 4 + ["n1"] * 5


def test_pack_scores_fuller_nodes_higher() -> None:
    scores = make_policy("pack").score_nodes(snapshot({"n1": 8, "n2": 2, "n3": 4}), workers("j", 1))
    assert scores["n2"] > scores["n3"] > scores["n1"]


# -- spread --------------------------------------------------------------------------------
def test_spread_puts_each_task_on_the_emptiest_node() -> None:
    snap = snapshot({"n1": 6, "n2": 8, "n3": 2, "n4": 7})
    assert place("spread", snap, workers("j", 1)) == ["n2"]
    # after one task n2 is as empty as n4: ties go to the earlier node in Slurm's order
    assert place("spread", snap, workers("j", 4)) == ["n2", "n2", "n4", "n1"]
    reordered = snapshot({"n1": 6, "n2": 8, "n3": 2, "n4": 7}, order=("n1", "n4", "n2", "n3"))
    assert place("spread", reordered, workers("j", 4)) == ["n2", "n4", "n2", "n1"]


def test_spread_scores_emptier_nodes_higher() -> None:
    scores = make_policy("spread").score_nodes(snapshot({"n1": 6, "n2": 8, "n3": 2}), workers("j", 1))
    assert scores["n2"] > scores["n1"] > scores["n3"]


# -- tetris --------------------------------------------------------------------------------
def _tetris_snapshot() -> ClusterSnapshot:
    """c-rich has CPUs but few GPUs free; g-rich has GPUs but few CPUs free."""
    snap = ClusterSnapshot.empty(nodes("c-rich", "g-rich"))
    gpu_hog = Job("hog", "x", 0, 1, Resources(), Resources(2, 4, 56_000), 1.0)
    cpu_hog = Job("cpu", "x", 0, 1, Resources(), Resources(12, 0, 56_000), 1.0)
    snap = snap.with_job(gpu_hog, Placement.of(gpu_hog, ["c-rich"]))
    return snap.with_job(cpu_hog, Placement.of(cpu_hog, ["g-rich"]))


def test_tetris_picks_the_best_aligned_node() -> None:
    snap = _tetris_snapshot()
    gpu_task = workers("gpu", 1, Resources(2, 4, 8_000))
    cpu_ps = Job("ps", "x", 1, 1, Resources(16, 0, 8_000), Resources(2, 4, 8_000), 1.0)
    assert place("tetris", snap, gpu_task) == ["g-rich"]
    assert place("tetris", snap, cpu_ps) == ["c-rich", "g-rich"]
    scores = make_policy("tetris").score_nodes(snap, gpu_task)
    assert scores["g-rich"] > scores["c-rich"]
    # not what a node-order rule picks: slurm-default takes the first node that fits
    assert place("slurm-default", snap, gpu_task) == ["c-rich"]


# -- random --------------------------------------------------------------------------------
def test_random_only_uses_nodes_that_fit_and_varies_with_the_seed() -> None:
    snap = snapshot({"n1": 8, "n2": 0, "n3": 8, "n4": 8})
    policy = make_policy("random")
    seen = set()
    for seed in range(20):
        p = policy.place(snap, workers("j", 2), np.random.default_rng(seed))
        assert p is not None and "n2" not in p.nodes()
        seen.add(p)
    assert len(seen) > 1


# -- registry ------------------------------------------------------------------------------
def test_unknown_policy_lists_the_valid_names() -> None:
    with pytest.raises(InputError) as err:
        make_policy("best-fit")
    message = str(err.value)
    assert "best-fit" in message
    for name in POLICIES:
        assert name in message


def test_oracle_needs_the_ground_truth() -> None:
    with pytest.raises(InputError, match="oracle"):
        make_policy("oracle")
    with pytest.raises(InputError, match="oracle"):
        make_policy("oracle", PolicyContext())


def test_baselines_are_registered_under_their_own_names() -> None:
    for name in BASELINES:
        assert make_policy(name).name == name


# -- the numpy placement loop against the per-node rule each baseline states ---------------
def _per_node_rule(snap: ClusterSnapshot, job: Job, score, highest: bool = True) -> list[str] | None:
    """Each task (PS first) on the node with room whose score(free, capacity, demand) is highest
    (lowest), the earlier in Slurm's order on a tie: the rule, one node at a time."""
    free = dict(snap.free)
    out = []
    for role in job.roles():
        demand = job.demand(role)
        fitting = [n for n in snap.nodes if demand.fits_in(free[n.name])]
        if not fitting:
            return None
        sign = 1.0 if highest else -1.0
        best = max(fitting, key=lambda n: sign * score(free[n.name], n.capacity, demand))
        free[best.name] = free[best.name] - demand
        out.append(best.name)
    return out


@pytest.mark.parametrize("seed", range(6))
def test_spread_tetris_and_pack_place_as_their_per_node_rules(seed: int) -> None:
    """The baselines score every node in one numpy pass per task (the search asks them in each
    decision on clusters of thousands of nodes); ties and float rounding must stay the rule's."""
    from slurm_advisor.policies.base import free_share
    from slurm_advisor.policies.tetris import alignment

    rng = np.random.default_rng(seed)
    caps = [(32, 8, 256_000), (48, 8, 384_000), (64, 0, 512_000), (16, 4, 128_000)]
    cluster = tuple(Node(f"n{i}", *caps[int(rng.integers(len(caps)))]) for i in range(40))
    snap = ClusterSnapshot.empty(cluster)
    for k in range(60):  # fragments of every size, equal free vectors included (ties)
        node = cluster[int(rng.integers(len(cluster)))]
        demand = Resources(int(rng.integers(1, 5)), int(rng.integers(0, 2)) if node.gpus else 0, 8_000)
        filler = Job(f"fill{k}", "resnet50", 0, 1, Resources(), demand, 10.0)
        placement = Placement.of(filler, [node.name])
        if snap.fits(filler, placement):
            snap = snap.with_job(filler, placement)
    rules = {"spread": (lambda f, c, d: free_share(f, c), True),
             "tetris": (lambda f, c, d: alignment(d, f, c), True),
             "pack": (lambda f, c, d: free_share(f - d, c), False)}
    for j in range(30):
        job = workers(f"j{j}", int(rng.integers(1, 24)), Resources(int(rng.integers(1, 8)), int(rng.integers(0, 3)),
                                                                   int(rng.integers(1, 40)) * 1_000),
                      num_ps=int(rng.integers(0, 4)))
        for name, (score, highest) in rules.items():
            expected = _per_node_rule(snap, job, score, highest)
            if name == "pack":  # first the whole job on the fullest node that holds it
                whole = [n for n in sorted(snap.nodes, key=lambda n: -(1.0 - free_share(snap.free[n.name], n.capacity)))
                         if job.total_demand().fits_in(snap.free[n.name])]
                expected = [whole[0].name] * job.num_tasks if whole else expected
            assert place(name, snap, job) == expected, (name, job)
