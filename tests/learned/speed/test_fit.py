"""The site speed model: a job-type vocabulary from the samples, types told apart by what was
logged of them, an error on another trace's jobs that means something, an ensemble's spread,
and checkpoints that load."""
from __future__ import annotations

import copy
import json
import math
from dataclasses import replace

import numpy as np
import pytest
import torch
from small_cluster import make_job, make_nodes, snapshot_with

from slurm_advisor.domain import Placement, RunningJob, SwitchLoad, running_switch_loads
from slurm_advisor.experiments.experiment import record
from slurm_advisor.learned.hyper import Hyper
from slurm_advisor.learned.policy.features import FeatureSchema
from slurm_advisor.learned.policy.net import PolicyNet
from slurm_advisor.learned.speed import features as F
from slurm_advisor.learned.speed.features import RACK_BUSY, RACK_UP, RackLoads, job_context, rack_loads
from slurm_advisor.learned.speed.fit import SiteSpeedModel, fit_site_model, to_tensors
from slurm_advisor.learned.speed.net import KAPPA
from slurm_advisor.learned.speed.vocab import TypeVocab
from slurm_advisor.speedmodels.base import select
from slurm_advisor.traces.synthetic import synthetic_jobs
from slurm_advisor.training import checkpoint

HP = replace(Hyper(seed=2), speed_epochs=40, speed_hidden=32, speed_members=3)
WIDE, NARROW = "ctr-wide-v2", "ctr-narrow-v7"  # no declared size: alike for jobtypes


class TwoSiteTypes:
    """A site's two types, the same compute, traffic 100x apart: a ring over the job's nodes,
    each NIC shared equally by the jobs that span nodes."""

    name, local = "two-site-types", True
    COMPUTE_S, COMM_S = 0.1, {WIDE: 2.0, NARROW: 0.02}

    def speeds(self, nodes, running, only=None):
        spanning: dict[str, int] = {}
        for rj in running:
            if len(rj.placement.nodes()) > 1:
                for n in rj.placement.nodes():
                    spanning[n] = spanning.get(n, 0) + 1
        out = {}
        for rj in select(running, only):
            g = len(rj.placement.nodes())
            share = max(spanning.get(n, 1) for n in rj.placement.nodes())
            comm = self.COMM_S[rj.job.type] * 2 * (g - 1) / g * share
            out[rj.job.id] = rj.job.num_workers / (self.COMPUTE_S + comm)
        return out


class OneSlowNode:
    """``TwoSiteTypes`` on hardware that is not alike: node ``n01`` computes at half the pace,
    and a job runs at the pace of its slowest node (synchronous training)."""

    name, local = "one-slow-node", True
    SLOW, PACE = "n01", 0.5

    def speeds(self, nodes, running, only=None):
        fast = TwoSiteTypes().speeds(nodes, running, only)
        return {rj.job.id: fast[rj.job.id] * (self.PACE if self.SLOW in rj.placement.nodes() else 1.0)
                for rj in select(running, only)}


def _site_jobs(n: int, seed: int):
    return synthetic_jobs(n, seed=seed, mix="large", arrival_rate_per_h=1.0, types=[WIDE, NARROW], ps_fraction=0.0)


@pytest.fixture(scope="module")
def slow_node_samples(small_nodes):
    return record(small_nodes, _site_jobs(60, 5), OneSlowNode(), ("slurm-default", "random", "spread"), seed=0)


@pytest.fixture(scope="module")
def site_samples(small_nodes):
    jobs = synthetic_jobs(60, seed=5, mix="large", arrival_rate_per_h=1.0, types=[WIDE, NARROW], ps_fraction=0.0)
    return record(small_nodes, jobs, TwoSiteTypes(), ("slurm-default", "random", "spread"), seed=0)


@pytest.fixture(scope="module")
def site_fit(site_samples):
    return fit_site_model(site_samples, HP)


@pytest.fixture(scope="module")
def contention_fit(samples):
    return fit_site_model(samples, HP)


def test_vocabulary_gives_frequent_types_a_slot_and_rare_ones_the_unknown_slot(site_samples) -> None:
    rare = [s for s in site_samples if s.subject.job.type == NARROW][:10]
    frequent = [s for s in site_samples if s.subject.job.type == WIDE]
    assert len({s.subject.job.id for s in frequent}) >= 3 and len(frequent) >= 50
    vocab = TypeVocab.from_samples(frequent + rare, min_samples=50, min_jobs=3)
    assert vocab.types == (WIDE,)
    assert vocab.slot(WIDE) == 0 and vocab.slot(NARROW) == vocab.slot("never-logged") == 1 == vocab.n_slots - 1
    assert vocab.slot(WIDE.upper()) == 0  # type names are case-insensitive, as in jobtypes
    # many samples of one job only: no slot of its own (a slot fitted to one job is that job)
    one_job = [s for s in frequent if s.subject.job.id == frequent[0].subject.job.id]
    assert TypeVocab.from_samples(one_job * 60, min_samples=50, min_jobs=3).types == ()
    again = TypeVocab.from_dict(json.loads(json.dumps(vocab.to_dict())))
    assert again.types == vocab.types and again.slot(NARROW) == 1
    assert np.allclose(again.solo_log_speed, vocab.solo_log_speed, equal_nan=True)


def test_vocabulary_gives_nodes_that_ran_workers_often_a_pace_slot(slow_node_samples) -> None:
    runs: dict[str, int] = {}
    for s in slow_node_samples:
        for name, _, n_w in s.subject.placement.per_node():
            runs[name] = runs.get(name, 0) + (n_w > 0)
    threshold = sorted(runs.values())[1]  # the least used node falls below it
    vocab = TypeVocab.from_samples(slow_node_samples, min_node_samples=threshold)
    assert vocab.nodes == tuple(sorted(n for n, c in runs.items() if c >= threshold)) and len(vocab.nodes) == 3
    least = min(runs, key=runs.get)
    assert vocab.node_slot(least) == vocab.node_slot("n99-added-later") == 0
    assert [vocab.node_slot(n) for n in vocab.nodes] == [1, 2, 3] and vocab.n_node_slots == 4
    again = TypeVocab.from_dict(json.loads(json.dumps(vocab.to_dict())))
    assert again.nodes == vocab.nodes and again.node_slot(vocab.nodes[1]) == 2
    with pytest.raises(ValueError, match="nodes"):
        TypeVocab.from_dict({**vocab.to_dict(), "nodes": "n00"})


@pytest.mark.slow
def test_a_slow_node_is_learned_from_the_samples(slow_node_samples, small_nodes) -> None:
    """Per-node pace: the model finds the half-speed node and predicts another trace's jobs well;
    without node slots (every node typical) the same fit cannot tell where a job is slow."""
    model, _ = fit_site_model(slow_node_samples, HP)
    blind, _ = fit_site_model(slow_node_samples, replace(HP, speed_min_node_samples=10 ** 9))
    assert model.vocab.nodes == ("n00", "n01", "n02", "n03") and blind.vocab.nodes == ()
    empty = snapshot_with(small_nodes)
    job = make_job("w", WIDE, 0, 4)
    on_slow, on_fast = Placement.of(job, ["n01"] * 4), Placement.of(job, ["n02"] * 4)
    assert model.predict(empty, job, on_slow) / model.predict(empty, job, on_fast) == pytest.approx(0.5, rel=0.15)
    unseen = record(small_nodes, _site_jobs(30, 6), OneSlowNode(), ("slurm-default", "random"), seed=100)
    assert model.mape(unseen) < 0.10 and blind.mape(unseen) > 1.5 * model.mape(unseen)


@pytest.mark.slow  # fits a site model (two fits, shared by the module: about 40 s)
def test_vocabulary_of_the_fit_holds_the_logged_types(site_fit, contention_fit, samples) -> None:
    model, metrics = site_fit
    assert model.vocab.types == tuple(sorted((NARROW, WIDE))) and metrics["vocabulary"] == list(model.vocab.types)
    # solo speed logged per type: workers / compute time alone on one node (no traffic)
    assert math.exp(model.vocab.solo_log_speed[model.vocab.slot(WIDE)]) == pytest.approx(10.0, rel=0.1)
    # published types are learned like any other, where logged often enough
    types = contention_fit[0].vocab.types
    counts = {t: sum(s.subject.job.type == t for s in samples) for t in {s.subject.job.type for s in samples}}
    assert types and set(types) == {t for t, n in counts.items() if n >= HP.speed_min_type_samples and len(
        {s.subject.job.id for s in samples if s.subject.job.type == t}) >= HP.speed_min_type_jobs}


@pytest.mark.slow  # fits a site model (two fits, shared by the module: about 40 s)
def test_two_site_types_with_100_fold_traffic_are_told_apart(site_fit, small_nodes) -> None:
    model, _ = site_fit
    empty = snapshot_with(small_nodes)
    truth = TwoSiteTypes()
    for t in (WIDE, NARROW):
        job = make_job(f"j-{t}", t, 0, 8)
        packed, spread = Placement.of(job, ["n00"] * 8), Placement.of(job, ["n00"] * 4 + ["n01"] * 4)
        want = (truth.speeds(small_nodes, [RunningJob(job, packed)])[job.id]
                / truth.speeds(small_nodes, [RunningJob(job, spread)])[job.id])
        got = model.predict(empty, job, packed) / model.predict(empty, job, spread)
        assert got == pytest.approx(want, rel=0.15), t  # 21x for the wide type, 1.2x for the narrow one


@pytest.mark.slow  # fits a site model (two fits, shared by the module: about 40 s)
def test_error_on_another_traces_jobs_is_small(site_fit, contention_fit, small_nodes, truth) -> None:
    """Samples of other jobs (another trace) placed by slurm-default and random: under 10 % on
    the two-type site, under 15 % on contention's 13 types from 40 logged jobs (a mean error of
    a few percent is what the logged noise of 2 % allows at best)."""
    other = synthetic_jobs(30, seed=6, mix="large", arrival_rate_per_h=1.0, types=[WIDE, NARROW], ps_fraction=0.0)
    unseen = record(small_nodes, other, TwoSiteTypes(), ("slurm-default", "random"), seed=100)
    assert site_fit[0].mape(unseen) < 0.10
    other = synthetic_jobs(30, seed=6, mix="large", arrival_rate_per_h=1.0)
    unseen = record(small_nodes, other, truth, ("slurm-default", "random"), seed=100)
    assert contention_fit[0].mape(unseen) < 0.15


@pytest.mark.slow  # fits a site model (two fits, shared by the module: about 40 s)
def test_ensemble_members_differ_and_predict_is_their_geometric_mean(contention_fit, small_nodes) -> None:
    model, _ = contention_fit
    snap = snapshot_with(small_nodes, (make_job("busy", "bert", 0, 6), ["n00"] * 4 + ["n01"] * 2))
    job = make_job("ps", "vgg16", 2, 6)
    placement = Placement.of(job, ["n01", "n02"] + ["n01"] * 3 + ["n03"] * 3)
    each = model.predict_all(snap, job, placement)
    assert each.shape == (HP.speed_members,) and np.all(each > 0) and np.ptp(np.log(each)) > 0
    assert model.predict(snap, job, placement) == pytest.approx(float(np.exp(np.log(each).mean())), rel=1e-6)


@pytest.mark.slow  # fits a site model (two fits, shared by the module: about 40 s)
def test_live_speeds_equal_predict_and_sample_features(contention_fit, samples) -> None:
    """The simulator's ``speeds``, the advisor's ``predict`` and the fit's sample features agree."""
    model, _ = contention_fit
    s = next(x for x in samples if x.neighbours and len(x.subject.placement.nodes()) > 1)
    assert s.switches and s.switches[0].switch == "s1"  # the simulator logs the racks' load
    nodes, running = make_nodes(4), (s.subject, *s.neighbours)
    live = model.speeds(nodes, running, {s.subject.job.id})[s.subject.job.id]
    snap = snapshot_with(nodes, *((rj.job, [t.node for t in rj.placement.tasks]) for rj in s.neighbours))
    assert model.predict(snap, s.subject.job, s.subject.placement) == pytest.approx(live, rel=1e-5)
    # the logged racks saw every job running then; here only these run
    racks = running_switch_loads(nodes, running)
    here = replace(s, speed=live, switches=tuple(racks[w.switch] for w in s.switches))
    assert model.mape([here]) == pytest.approx(0.0, abs=1e-5)
    gone = snap.running[:1]
    after = model.predict_after(snap, s.subject.job, s.subject.placement, gone)
    alone = model.speeds(nodes, (s.subject, *s.neighbours[1:]), {s.subject.job.id})[s.subject.job.id]
    assert after == pytest.approx(alone, rel=1e-5)


@pytest.mark.slow  # fits a site model (two fits, shared by the module: about 40 s)
def test_same_seed_same_model(site_samples, site_fit) -> None:
    assert fit_site_model(site_samples, HP)[1]["curve"] == site_fit[1]["curve"]


@pytest.mark.slow  # fits a site model (two fits, shared by the module: about 40 s)
def test_site_checkpoint_round_trip(site_fit, tmp_path, small_nodes) -> None:
    model, _ = site_fit
    schema = FeatureSchema()
    checkpoint.save(tmp_path, PolicyNet(schema.node_dim, schema.global_dim, 8), model, schema,
                    replace(HP, hidden=8), {})
    meta = json.loads((tmp_path / "meta.json").read_text())
    assert meta["speed_kind"] == "site" and meta["speed_vocab"]["types"] == list(model.vocab.types)
    loaded = checkpoint.load(tmp_path)
    assert isinstance(loaded.speed_model, SiteSpeedModel) and loaded.speed_vocab.types == model.vocab.types
    snap = snapshot_with(small_nodes)
    job = make_job("w", WIDE, 0, 8)
    placement = Placement.of(job, ["n00"] * 4 + ["n01"] * 4)
    assert loaded.speed_model.predict(snap, job, placement) == pytest.approx(model.predict(snap, job, placement),
                                                                             rel=1e-6)


def test_site_checkpoints_saved_before_nodes_had_a_pace_load(site_samples, tmp_path, small_nodes) -> None:
    model, _ = fit_site_model(site_samples, replace(HP, speed_min_node_samples=10 ** 9, speed_epochs=2))
    schema = FeatureSchema()
    checkpoint.save(tmp_path, PolicyNet(schema.node_dim, schema.global_dim, 8), model, schema,
                    replace(HP, hidden=8), {})
    meta = json.loads((tmp_path / "meta.json").read_text())
    for key in ("nodes", "min_node_samples"):
        del meta["speed_vocab"][key]
    (tmp_path / "meta.json").write_text(json.dumps(meta))
    state = torch.load(tmp_path / "speed.pt", weights_only=True)
    del state["node_pace"]
    torch.save(state, tmp_path / "speed.pt")
    loaded = checkpoint.load(tmp_path)
    assert loaded.speed_vocab.nodes == ()
    snap, job = snapshot_with(small_nodes), make_job("w", WIDE, 0, 8)
    placement = Placement.of(job, ["n00"] * 4 + ["n01"] * 4)
    assert loaded.speed_model.predict(snap, job, placement) == pytest.approx(model.predict(snap, job, placement),
                                                                             rel=1e-6)


def test_site_checkpoints_saved_before_the_rack_inputs_load_and_ignore_them(site_samples, tmp_path, small_nodes) -> None:
    """A model fitted before the rack terms (12 globals, 24 residual inputs, no ``speed_resid``)
    predicts as the current model with those terms off, whatever the racks carry."""
    model, _ = fit_site_model(site_samples, replace(HP, speed_epochs=2))
    schema = FeatureSchema()
    checkpoint.save(tmp_path, PolicyNet(schema.node_dim, schema.global_dim, 8), model, schema,
                    replace(HP, hidden=8), {})
    meta = json.loads((tmp_path / "meta.json").read_text())
    assert meta.pop("speed_resid") == 28
    (tmp_path / "meta.json").write_text(json.dumps(meta))
    state = torch.load(tmp_path / "speed.pt", weights_only=True)
    rack_rows = slice(24, 28)  # the residual's first layer: 28 inputs, then the slots, solo, terms
    state["w1"] = torch.cat([state["w1"][:, :rack_rows.start], state["w1"][:, rack_rows.stop:]], 1)
    state["global_params"] = state["global_params"][..., :12]
    torch.save(state, tmp_path / "speed.pt")
    old = checkpoint.load(tmp_path).speed_model
    with torch.no_grad():  # the same model, the rack terms off
        model.net.w1[:, rack_rows] = 0.0
        model.net.global_params[..., 12:] = -20.0
    job, other = make_job("w", NARROW, 0, 2), make_job("o", NARROW, 0, 8)
    on = Placement.of(job, ["n00"] * 2)
    for snap in (snapshot_with(small_nodes), snapshot_with(small_nodes, (other, ["n01"] * 8))):
        assert old.predict(snap, job, on) == pytest.approx(model.predict(snap, job, on), rel=1e-6)


@pytest.mark.parametrize("change, field", [
    ({"speed_kind": "forest"}, "'speed_kind'"),
    ({"speed_members": 0}, "'speed_members'"),
    ({"speed_vocab": {"types": "abc"}}, "'speed_vocab'"),
    ({"speed_vocab": {"types": ["a"], "solo_log_speed": [1.0]}}, "'speed_vocab'"),
    ({"speed_vocab": {"types": [], "solo_log_speed": [None], "nodes": [1, 2]}}, "'speed_vocab'"),
    ({"speed_resid": 7}, "'speed_resid'"),
    ({"speed_resid": 24.0}, "'speed_resid'"),
])
@pytest.mark.slow  # fits a site model (two fits, shared by the module: about 40 s)
def test_a_malformed_site_speed_field_is_named(site_fit, tmp_path, change, field) -> None:
    from slurm_advisor.errors import InputError

    schema = FeatureSchema()
    checkpoint.save(tmp_path, PolicyNet(schema.node_dim, schema.global_dim, 8), site_fit[0], schema,
                    replace(HP, hidden=8), {})
    meta = json.loads((tmp_path / "meta.json").read_text())
    (tmp_path / "meta.json").write_text(json.dumps({**meta, **change}))
    with pytest.raises(InputError, match=field):
        checkpoint.load(tmp_path)


@pytest.mark.slow  # fits a site model (two fits, shared by the module: about 40 s)
def test_rack_inputs_say_how_busy_the_jobs_racks_are_and_who_crosses_their_uplinks(site_fit) -> None:
    """The busiest rack holding a worker, the mean over the job's racks, the jobs crossing its
    uplinks (the job counted in): in the residual's inputs and the parametric part's scalars;
    unknown (a sample logged without loads) is all zeros."""
    nodes = make_nodes(8)  # racks s1: n00-n03, s2: n04-n07
    vocab = site_fit[0].vocab
    crossing = make_job("x", NARROW, 0, 2)
    busy = snapshot_with(nodes, (crossing, ["n03", "n04"]), (make_job("o", NARROW, 0, 8), ["n01"] * 8))
    job = make_job("w", NARROW, 1, 2)
    subject = RunningJob(job, Placement.of(job, ["n05", "n00", "n06"]), 50.0)  # PS on s2, workers on s1 and s2
    racks = rack_loads(busy, add=(subject,))
    assert racks["s1"] == SwitchLoad("s1", (1 + 8 + 1) / 32, 2) and racks["s2"] == SwitchLoad("s2", 2 / 32, 2)
    node_of = {n.name: n for n in nodes}
    ctx = job_context(subject, (), node_of, vocab, racks)
    np.testing.assert_allclose(ctx.resid[24:], [1.0, 10 / 32, (10 / 32 + 2 / 32) / 2, 2 / 4], rtol=1e-6)
    assert ctx.scalars[RACK_BUSY] == pytest.approx(10 / 32) and ctx.scalars[RACK_UP] == pytest.approx(1.0)
    blind = job_context(subject, (), node_of, vocab, None)
    assert not blind.resid[24:].any() and blind.scalars[RACK_BUSY] == blind.scalars[RACK_UP] == 0.0
    # the structured part slows the job with its rack (every coefficient is positive; the
    # residual, which may go either way, is turned off here)
    net = copy.deepcopy(site_fit[0].net)
    with torch.no_grad():
        net.w3.zero_()
    model = SiteSpeedModel(net, vocab)
    one = RunningJob(job, Placement.of(job, ["n00"] * 3), 50.0)
    quiet, full = rack_loads(snapshot_with(nodes), add=(one,)), rack_loads(busy, add=(one,))
    assert model.log_speeds_all([job_context(one, (), node_of, vocab, full)]).mean() < \
        model.log_speeds_all([job_context(one, (), node_of, vocab, quiet)]).mean()


def test_rack_loads_follow_started_and_ended_jobs_as_a_fresh_count_does() -> None:
    """The jobs crossing each uplink are patched from the last snapshot's by the jobs that
    started or ended (an event, a claim), also from an older snapshot: always what a count over
    every running job gives."""
    import random

    rnd = random.Random(5)
    nodes = make_nodes(8)
    snaps, kept = [snapshot_with(nodes)], RackLoads()  # one instance: its kept loads in play
    for step in range(120):
        snap = snaps[-4] if step % 9 == 8 else snaps[-1]
        if snap.running and rnd.random() < 0.4:
            snap = snap.without_job(rnd.choice(snap.running).job.id)
        else:
            j = make_job(f"j{step}", NARROW, rnd.randint(0, 1), rnd.randint(1, 3))
            placement = Placement.of(j, [rnd.choice(nodes).name for _ in range(j.num_tasks)])
            if snap.fits(j, placement):
                snap = snap.with_job(j, placement)
        snaps.append(snap)
        assert kept(snap) == rack_loads(snap) == running_switch_loads(nodes, snap.running), step


def test_predictions_reuse_the_parameter_terms_to_the_bit_and_follow_a_change(site_samples) -> None:
    """Inference computes the parameter-only terms once: the same bits as computing them per call,
    and computed again after a parameter changes in place."""
    model, _ = fit_site_model(site_samples, replace(HP, speed_epochs=2, speed_min_node_samples=10))
    assert model.net.node_pace.numel() > 0  # the node paces' term is exercised
    contexts = [F.sample_context(s, model.vocab) for s in site_samples[:60]]

    def fresh():  # every term computed in the call, as in fitting
        with torch.no_grad():
            return model.net(to_tensors(F.Batch.of(contexts, model.vocab.n_slots))).numpy()

    for _ in range(2):  # the second call reuses the first's terms
        assert model.log_speeds_all(contexts).tobytes() == fresh().tobytes()
    before = model.log_speeds_all(contexts)
    with torch.no_grad():
        model.net.global_params[:, KAPPA] += 1.0
    after = model.log_speeds_all(contexts)
    assert after.tobytes() == fresh().tobytes() and not np.array_equal(after, before)


def test_a_fit_on_zero_speeds_is_a_clear_error_not_a_traceback(samples):
    """Three zero speeds (what a report of 1e-300 iterations over 1e300 s was stored as) made the
    fit's every loss NaN; keeping no epoch, it ended in load_state_dict(None)'s TypeError."""
    from slurm_advisor.errors import InputError
    poisoned = [replace(s, speed=0.0) if i % 40 == 1 else s for i, s in enumerate(samples)]
    with pytest.raises(InputError, match=r"cannot fit the speed model: \d+ samples? training cannot use: "
                                         r"\d+ non-positive speed"):
        fit_site_model(poisoned, HP)


def test_an_epoch_keeper_that_kept_nothing_says_so():
    from slurm_advisor.errors import InputError
    from slurm_advisor.learned.speed.fit import BestEpoch
    net = torch.nn.Linear(2, 1)
    best = BestEpoch()
    for epoch in range(3):
        best.offer(net, epoch, float("nan"))
    with pytest.raises(InputError, match="no finite held-out error in 3 epochs: not enough usable samples"):
        best.restore(net)


def test_rack_loads_of_clusters_that_share_a_running_map_are_their_own():
    """Two clusters with no job running share one (empty) running-job map: the uplink counts
    kept for the first (2 switches) once came back for the second (3), an IndexError that made
    tests fail by the order they ran in."""
    from slurm_advisor.domain import ClusterSnapshot, Node
    from slurm_advisor.learned.speed.features import rack_loads

    two = ClusterSnapshot.empty(tuple(Node(f"a{i}", 8, 4, 32000, switch=f"s{i % 2}") for i in range(4)))
    three = ClusterSnapshot.empty(tuple(Node(f"b{i}", 8, 4, 32000, switch=f"t{i % 3}") for i in range(6)))
    assert two.running_jobs is three.running_jobs  # the premise: one empty map for both
    assert set(rack_loads(two)) == {"s0", "s1"}
    loads = rack_loads(three)
    assert set(loads) == {"t0", "t1", "t2"} and all(w.gpu_busy == 0 and w.crossing == 0 for w in loads.values())
