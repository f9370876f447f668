"""Feature vectors: sizes match the schema, unknown types are handled, training = inference."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import make_job, make_nodes, snapshot_with

from slurm_advisor.domain import Placement, SpeedSample
from slurm_advisor.learned.agent import _PlacementState
from slurm_advisor.learned.features import FeatureSchema, NodeLoad, job_vector
from slurm_advisor.learned.mlp_speed import LearnedSpeedModel, sample_features
from slurm_advisor.learned.speed_model import SpeedNet

SCHEMA = FeatureSchema()
NODES = make_nodes(4)


def test_vector_sizes_match_the_schema() -> None:
    job = make_job("j", "vgg16", num_ps=1, num_workers=3)
    snap = snapshot_with(NODES, (make_job("other", "bert", 0, 2), ["n00", "n02"]))
    assert job_vector(job, SCHEMA).shape == (SCHEMA.job_dim,)
    state = _PlacementState(snap, job, SCHEMA)
    for k, role in enumerate(job.roles()):
        nodes, glob, mask = state.features(role, k)
        assert nodes.shape == (len(NODES), SCHEMA.node_dim) and nodes.dtype == np.float32
        assert glob.shape == (SCHEMA.global_dim,) and glob.dtype == np.float32
        assert mask.shape == (len(NODES),) and mask.dtype == bool
        state.take(int(np.flatnonzero(mask)[0]), role)
    running = snap.with_job(job, _placement(job, ["n00", "n00", "n01", "n01"])).running[-1]
    sample = SpeedSample(0.0, running, snap.running, NODES, 1.0)
    assert sample_features(sample, SCHEMA).shape == (SCHEMA.sample_dim,)


def test_unknown_type_uses_the_unknown_slot() -> None:
    assert SCHEMA.type_slot("no-such-model") == len(SCHEMA.types) == SCHEMA.n_types - 1
    assert SCHEMA.type_slot("ResNet50") == SCHEMA.types.index("resnet50")
    v = job_vector(make_job("u", "no-such-model"), SCHEMA)
    onehot = v[16:]
    assert onehot[-1] == 1.0 and onehot.sum() == 1.0
    assert np.isfinite(v).all()


def test_unknown_type_through_every_feature_path() -> None:
    unknown = make_job("u", "mystery-net", num_ps=1, num_workers=2)
    snap = snapshot_with(NODES, (make_job("k", "bert"), ["n00", "n00"]))
    nodes, glob, _ = _PlacementState(snap, unknown, SCHEMA).features(unknown.roles()[0], 0)
    assert np.isfinite(nodes).all() and np.isfinite(glob).all()
    model = LearnedSpeedModel(SpeedNet(SCHEMA.sample_dim, 8), SCHEMA)
    speed = model.predict(snap, unknown, _placement(unknown, ["n00", "n01", "n01"]))
    assert np.isfinite(speed) and speed > 0


def test_sample_features_equal_what_the_speed_model_sees() -> None:
    """The features a logged sample trains on are those the model computes live for the same
    situation, although the sample keeps only the subject's neighbours and their nodes.

    Compared through the outputs of a random network (any difference in the inputs shows), so
    that the test holds however the model evaluates the network."""
    subject = make_job("s", "vgg16", num_ps=1, num_workers=3)
    near = make_job("near", "bert", 0, 3)
    far = make_job("far", "resnet18", 0, 4)  # shares no node with the subject
    snap = snapshot_with(NODES, (near, ["n01", "n01", "n02"]), (far, ["n03"] * 4),
                         (subject, ["n00", "n00", "n01", "n02"]))
    by_id = {rj.job.id: rj for rj in snap.running}
    used = {"n00", "n01", "n02"}
    sample = SpeedSample(snap.time, by_id["s"], (by_id["near"],),
                         tuple(n for n in NODES if n.name in used), speed=1.0)
    torch.manual_seed(0)
    net = SpeedNet(SCHEMA.sample_dim, 32)
    live = LearnedSpeedModel(net, SCHEMA).speeds(snap.nodes, snap.running, {"s"})["s"]

    def trained_on(s: SpeedSample) -> float:
        with torch.no_grad():
            return float(torch.exp(net(torch.from_numpy(sample_features(s, SCHEMA))[None]))[0])

    assert live == pytest.approx(trained_on(sample), rel=1e-5)
    lonely = SpeedSample(snap.time, by_id["s"], (), sample.nodes, speed=1.0)
    assert trained_on(lonely) != pytest.approx(live, rel=1e-5)  # the comparison can tell


def test_node_load_leaves_out_the_excluded_job() -> None:
    a, b = make_job("a", "bert", 0, 2), make_job("b", "vgg16", 0, 1)
    snap = snapshot_with(NODES, (a, ["n00", "n01"]), (b, ["n00"]))
    load = NodeLoad(snap.nodes, snap.running)
    alone_b = NodeLoad(snap.nodes, [rj for rj in snap.running if rj.job.id == "b"])
    rj_a = next(rj for rj in snap.running if rj.job.id == "a")
    mine = load.others("n00", exclude=rj_a)
    np.testing.assert_allclose(mine, alone_b.others("n00"), atol=1e-6)


def _placement(job, nodes) -> Placement:
    return Placement.of(job, nodes)
