"""The policy's feature vectors: sizes match the schema, unknown job types are handled."""
from __future__ import annotations

import numpy as np
from small_cluster import make_job, make_nodes, snapshot_with

from slurm_advisor.domain import Placement
from slurm_advisor.learned.policy.features import FeatureSchema, job_vector
from slurm_advisor.models import served
from slurm_advisor.policies.learned.agent import _PlacementState

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
    model = served.load().speed_model  # the shipped site ensemble
    speed = model.predict(snap, unknown, _placement(unknown, ["n00", "n01", "n01"]))
    assert np.isfinite(speed) and speed > 0


def _placement(job, nodes) -> Placement:
    return Placement.of(job, nodes)
