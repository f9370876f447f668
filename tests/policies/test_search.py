"""The search over candidate placements: scored by every member of the fitted ensemble, a
candidate replaces Slurm's own choice only when every member expects it to cost less, its
neighbours' slowdown counted; holding is one candidate among the others."""
from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
from small_cluster import Fixed, make_job, make_nodes, snapshot_with

from slurm_advisor.domain import ClusterSnapshot, Placement
from slurm_advisor.errors import InputError
from slurm_advisor.learned.speed import features as F
from slurm_advisor.learned.speed.fit import SiteSpeedModel
from slurm_advisor.learned.speed.vocab import TypeVocab
from slurm_advisor.policies import make_policy
from slurm_advisor.policies.base import Hold
from slurm_advisor.policies.search import SearchPolicy
from slurm_advisor.policies.slurm_default import SlurmDefaultPolicy
from slurm_advisor.traces.synthetic import synthetic_jobs

RNG = np.random.default_rng(0)


class Ensemble(SiteSpeedModel):
    """A fitted ensemble stand-in: member m's speed of a job is workers / (1 + spread_m * (nodes
    - 1) + share * other tasks on its nodes); ``spread`` per member says how much it thinks
    spanning nodes costs."""

    def __init__(self, spread: tuple[float, ...], share: float | tuple[float, ...] = 0.0):
        self.vocab, self.spread, self.share = TypeVocab(), np.array(spread), np.array(share)
        self.racks = F.RackLoads()

    def log_speeds_all(self, contexts):
        out = []
        for c in contexts:
            k = len(c.nodes)
            others = float(c.counts.sum())
            workers = math.exp(c.scalars[F.LOG_W])
            out.append(np.log(workers / (1.0 + self.spread * (k - 1) + self.share * others)))
        return np.array(out).T


NODES = make_nodes(4)


def test_a_candidate_every_member_prefers_replaces_slurms_choice() -> None:
    job = make_job("j", num_workers=4)
    spread, packed = Placement.of(job, ["n00", "n01", "n02", "n03"]), Placement.of(job, ["n00"] * 4)
    snap = ClusterSnapshot.empty(NODES, time=0.0)
    search = SearchPolicy(Fixed("base", spread), [Fixed("pack", packed)], Ensemble((0.5, 0.3, 0.8)), hold=False)
    assert search.place(snap, job, RNG) == packed
    assert search.last["pack"] > 0.2  # every member: at least 1 - (1 + 0) / (1 + 3 * 0.3) of the base's time


def test_a_candidate_only_one_member_likes_is_not_taken() -> None:
    """Beside a running job or on two idle nodes: the members disagree on what sharing costs."""
    busy = replace(make_job("busy", num_workers=2), iterations=1e6)
    snap = snapshot_with(NODES, (busy, ["n00", "n01"]), time=0.0)
    job = make_job("j", num_workers=2)
    beside, apart = Placement.of(job, ["n00", "n01"]), Placement.of(job, ["n02", "n03"])
    doubtful = SearchPolicy(Fixed("base", beside), [Fixed("apart", apart)], Ensemble((0.1, 0.1, 0.1), (-0.1, 0.3, 0.5)),
                            hold=False)
    assert doubtful.place(snap, job, RNG) == beside
    assert doubtful.last["apart"] < 0
    convinced = SearchPolicy(Fixed("base", beside), [Fixed("apart", apart)], Ensemble((0.1, 0.1, 0.1), (0.2, 0.3, 0.5)),
                             hold=False)
    assert convinced.place(snap, job, RNG) == apart


def test_a_candidate_on_more_nodes_than_slurms_choice_is_not_weighed() -> None:
    """Spreading a job out leaves fragments the queue waits for, which one step does not see:
    even when every member prefers it, the search does not take a wider placement."""
    job = make_job("j", num_workers=4)
    packed, spread = Placement.of(job, ["n00"] * 4), Placement.of(job, ["n00", "n01", "n02", "n03"])
    snap = ClusterSnapshot.empty(NODES, time=0.0)
    search = SearchPolicy(Fixed("base", packed), [Fixed("spread", spread)], Ensemble((-0.2, -0.1, -0.15)), hold=False)
    assert search.place(snap, job, RNG) == packed
    assert "spread" not in search.last


def test_the_neighbours_slowdown_counts_against_a_candidate() -> None:
    """Both candidates are as fast for the job itself; one puts it beside a long running job that
    it would slow down: the other wins."""
    other = replace(make_job("busy", num_workers=2), iterations=1e6)
    snap = snapshot_with(NODES, (other, ["n01", "n01"]), time=0.0).at(10.0)
    job = make_job("j", num_workers=2)
    beside, alone = Placement.of(job, ["n01", "n01"]), Placement.of(job, ["n02", "n02"])
    ensemble = Ensemble((0.0, 0.0), share=0.0)
    costs, own = SearchPolicy(Fixed("base", beside), [], ensemble).costs(snap, job, [beside, alone])
    assert np.allclose(costs, own)  # share 0: the neighbour is not slowed, the costs are the job's own
    ensemble = Ensemble((0.0, 0.0), share=0.5)
    search = SearchPolicy(Fixed("base", beside), [Fixed("alone", alone)], ensemble, hold=False)
    costs, own = search.costs(snap, job, [beside, alone])
    # beside: the job runs at 2/(1 + 0.5*2) = 1 it/s (2 tasks of `busy`), busy at 2/2 = 1 instead of 2
    assert own[0] == pytest.approx([1000.0, 1000.0]) and own[1] == pytest.approx([500.0, 500.0])
    remaining = 1e6 - 10.0 * 2.0
    assert costs[0] == pytest.approx(1000.0 + remaining * (1 / 1.0 - 1 / 2.0))
    assert search.place(snap, job, RNG) == alone


def test_search_is_never_worse_than_its_base_under_its_model() -> None:
    """On random loaded clusters, whenever the search leaves Slurm's choice, every member of the
    ensemble it uses expects the job-time to drop by more than the margin."""
    nodes = make_nodes(8)
    jobs = synthetic_jobs(60, seed=3, mix="philly")
    ensemble = Ensemble((0.05, 0.02, 0.1), share=0.5)  # sharing a node costs more than spanning
    proposers = [make_policy(n) for n in ("slurm-topo", "tetris", "pack", "spread")]
    search = SearchPolicy(SlurmDefaultPolicy(), proposers, ensemble, hold=False)
    snap, moved = ClusterSnapshot.empty(nodes, time=0.0), 0
    for i, job in enumerate(jobs):
        base = SlurmDefaultPolicy().place(snap, job)
        if base is None:
            continue
        chosen = search.place(snap, job, RNG)
        if chosen != base:
            moved += 1
            costs, own = search.costs(snap, job, [base, chosen])
            assert ((costs[0] - costs[1]) / own[0]).min() > search.margin
        snap = snap.with_job(job, chosen, float(i))
        while len(snap.running) > 10:
            snap = snap.without_job(snap.running[0].job.id)
    assert moved > 10  # the property was exercised


def test_hold_is_a_candidate_chosen_when_waiting_pays_under_every_member() -> None:
    """A 4-worker job that fits now only across 4 nodes, and on one node once a short job there
    ends: when every member says spanning nodes is ruinous the search holds it, capped to one
    node; when they say it costs nothing, it starts now."""
    short = replace(make_job("short", num_workers=7), iterations=10.0)  # 7 of each node's 8 GPUs taken
    filler = [replace(make_job(f"f{i}", num_workers=7), iterations=1e6) for i in range(3)]
    snap = snapshot_with(NODES, (short, ["n00"] * 7), *[(f, [f"n0{i + 1}"] * 7) for i, f in enumerate(filler)],
                         time=0.0)
    job = make_job("j", num_workers=4)
    base = SlurmDefaultPolicy().place(snap, job)
    assert base is not None and len(base.nodes()) == 4
    held = SearchPolicy(SlurmDefaultPolicy(), [], Ensemble((5.0, 8.0))).place(snap, job, RNG)
    assert isinstance(held, Hold) and held.max_nodes == 1
    started = SearchPolicy(SlurmDefaultPolicy(), [], Ensemble((0.0, 0.0))).place(snap, job, RNG)
    assert started == base


def test_a_warm_up_fills_the_hold_candidates_wait_estimate_and_the_jobs_by_node() -> None:
    short = replace(make_job("short", num_workers=7), iterations=10.0)
    snap = snapshot_with(NODES, (short, ["n00"] * 7), time=0.0)
    search = SearchPolicy(SlurmDefaultPolicy(), [], Ensemble((0.0, 0.0)))
    search.warm(snap)
    assert [id(rj) for rj in snap.running] == list(search.patience._end_of)
    # and the running jobs by node: a request's snapshot (a claim on top) patches that index
    assert snap.layout.jobs_by_node._entries[0][0] is snap.running_jobs
    SearchPolicy(SlurmDefaultPolicy(), [], Ensemble((0.0, 0.0)), hold=False).warm(snap)  # nothing to warm


def test_the_search_serves_over_the_shipped_model() -> None:
    """`--policy search` with no model directory: the shipped model's site ensemble weighs it."""
    search = make_policy("search")
    job = make_job("j", "resnet50", 0, 4)
    placement = search.place(snapshot_with(make_nodes(4)), job, np.random.default_rng(0))
    assert isinstance(placement, Placement) and len(placement.tasks) == 4


def test_a_model_that_deploys_the_search_loads_as_learned(site_model_dir, tmp_path) -> None:
    """Training's gate may deploy the search (meta.json ``deploy: search``): the registry's
    `learned` is then the search over that model, under the learned name, holding by itself."""
    import json
    import shutil

    from slurm_advisor.policies import PolicyContext
    from slurm_advisor.policies.learned.adapter import GatedPolicy

    model = tmp_path / "model"
    shutil.copytree(site_model_dir, model)
    meta = json.loads((model / "meta.json").read_text())
    (model / "meta.json").write_text(json.dumps({**meta, "deploy": "search", "patience": 0.0}))
    policy = make_policy("learned", PolicyContext(model_dir=model))
    assert isinstance(policy, GatedPolicy) and isinstance(policy.teacher, SearchPolicy) and policy.name == "learned"
    snap = ClusterSnapshot.empty(make_nodes(4))
    job = make_job("j", num_workers=3)
    assert policy.place(snap, job, RNG) == SlurmDefaultPolicy().place(snap, job)  # an idle cluster: Slurm's choice
    (model / "meta.json").write_text(json.dumps({**meta, "deploy": "seach"}))
    with pytest.raises(InputError, match="'deploy' must be one of network, search,"):
        make_policy("learned", PolicyContext(model_dir=model))
