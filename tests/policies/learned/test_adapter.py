"""The learned policy as deployed: the network, or its teacher when training did not promote it."""
from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch

from slurm_advisor.domain import ClusterSnapshot, Job, Node, Resources
from slurm_advisor.learned.policy.features import FeatureSchema
from slurm_advisor.learned.policy.net import PolicyNet
from slurm_advisor.policies import PolicyContext, make_policy
from slurm_advisor.policies.learned.agent import LearnedPolicy
from slurm_advisor.training import checkpoint

SCHEMA = FeatureSchema()
SHIPPED = checkpoint.load()  # its site speed ensemble serves in every model saved here
HP = replace(SHIPPED.hyper, hidden=16)


def _save(directory: Path, deploy: str, patience: float = 0.0) -> Path:
    torch.manual_seed(0)
    policy = PolicyNet(SCHEMA.node_dim, SCHEMA.global_dim, HP.hidden)
    return checkpoint.save(directory, policy, SHIPPED.speed_model, SCHEMA, HP, {"deploy": deploy, "patience": patience})


def _busy_snapshot() -> ClusterSnapshot:
    nodes = [Node(f"n{i}", 32, 8, 256000) for i in range(4)]
    snap = ClusterSnapshot.empty(nodes)
    filler = Job("f", "resnet50", 0, 6, Resources(), Resources(4, 1, 1000), 10.0)
    from slurm_advisor.domain import Placement
    return snap.with_job(filler, Placement.of(filler, ["n2"] * 6))


def test_a_promoted_network_is_deployed(tmp_path: Path) -> None:
    policy = make_policy("learned", PolicyContext(model_dir=_save(tmp_path / "m", "network")))
    assert isinstance(policy, LearnedPolicy)


def test_an_unpromoted_model_deploys_its_teacher(tmp_path: Path) -> None:
    policy = make_policy("learned", PolicyContext(model_dir=_save(tmp_path / "m", "pack")))
    assert policy.name == "learned"
    job = Job("j", "vgg16", 1, 2, Resources(2, 0, 1000), Resources(2, 1, 1000), 10.0)
    snap = _busy_snapshot()
    rng = np.random.default_rng(0)
    assert policy.place(snap, job, rng) == make_policy("pack").place(snap, job, rng)
    assert policy.place(snap, job, rng).nodes() == ("n2",)  # pack: the fullest node that fits


def test_the_shipped_default_model_loads_and_places() -> None:
    policy = make_policy("learned")  # no model_dir: the model shipped in slurm_advisor/data/model
    job = Job("j", "resnet50", 0, 4, Resources(), Resources(4, 1, 24000), 10.0)
    placement = policy.place(_busy_snapshot(), job, np.random.default_rng(0))
    assert placement is not None and len(placement.tasks) == 4


def test_a_model_trained_to_hold_jobs_loads_with_its_patience_and_fitted_speed_model(tmp_path: Path) -> None:
    from slurm_advisor.learned.speed.ensemble import SiteEnsemble
    from slurm_advisor.policies.patience import PatientPolicy
    teacher = make_policy("learned", PolicyContext(model_dir=_save(tmp_path / "t", "pack", 0.7)))
    network = make_policy("learned", PolicyContext(model_dir=_save(tmp_path / "n", "network", 0.5)))
    assert teacher.name == network.name == "learned"
    holding = teacher.teacher
    assert isinstance(holding, PatientPolicy) and holding.patience == 0.7
    assert holding.inner.name == "pack" and isinstance(holding.speed, SiteEnsemble)
    assert isinstance(network, PatientPolicy) and isinstance(network.inner, LearnedPolicy)


def _save_meta(directory: Path, meta: dict) -> Path:
    torch.manual_seed(0)
    policy = PolicyNet(SCHEMA.node_dim, SCHEMA.global_dim, HP.hidden)
    return checkpoint.save(directory, policy, SHIPPED.speed_model, SCHEMA, HP, meta)


def test_learned_fast_deploys_the_gates_pick_without_the_search(tmp_path: Path) -> None:
    """Where the gate deployed the search (too slow for the daemon's 2 ms budget), learned-fast
    deploys ``fast_deploy``, the same gate's pick among the other candidates, and never builds the
    search; a model trained before ``fast_deploy`` deploys its plain teacher; any other model
    deploys as `learned`."""
    from slurm_advisor.policies.patience import PatientPolicy

    job = Job("j", "vgg16", 1, 2, Resources(2, 0, 1000), Resources(2, 1, 1000), 10.0)
    snap, rng = _busy_snapshot(), np.random.default_rng(0)
    searched = _save_meta(tmp_path / "s", {"deploy": "search", "patience": 0.0, "teacher": "tetris",
                                           "fast_deploy": {"deploy": "pack", "patience": 0.0}})
    fast = make_policy("learned-fast", PolicyContext(model_dir=searched))
    assert fast.place(snap, job, rng) == make_policy("pack").place(snap, job, rng)
    assert make_policy("learned", PolicyContext(model_dir=searched)).place(snap, job, rng) is not None
    holding = _save_meta(tmp_path / "h", {"deploy": "search", "patience": 0.0,
                                          "fast_deploy": {"deploy": "slurm-default", "patience": 0.5}})
    assert isinstance(make_policy("learned-fast", PolicyContext(model_dir=holding)).teacher, PatientPolicy)
    older = _save_meta(tmp_path / "o", {"deploy": "search", "patience": 0.0, "teacher": "tetris"})
    fast = make_policy("learned-fast", PolicyContext(model_dir=older))
    assert fast.place(snap, job, rng) == make_policy("tetris").place(snap, job, rng)
    network = make_policy("learned-fast", PolicyContext(model_dir=_save(tmp_path / "n", "network")))
    assert isinstance(network, LearnedPolicy)


def test_a_fast_deploy_that_is_the_search_or_unknown_is_refused(tmp_path: Path) -> None:
    from slurm_advisor.errors import InputError

    for bad in ({"deploy": "search"}, {"deploy": "magic"}, "pack", {"deploy": "pack", "patience": 2}):
        directory = _save_meta(tmp_path / f"b{abs(hash(str(bad)))}", {"deploy": "search"})
        meta = json.loads((directory / "meta.json").read_text())
        (directory / "meta.json").write_text(json.dumps({**meta, "fast_deploy": bad}))
        with pytest.raises(InputError, match=r"meta\.json: field 'fast_deploy"):
            checkpoint.load(directory)
        with pytest.raises(InputError, match=r"meta\.json: field 'fast_deploy"):
            make_policy("learned-fast", PolicyContext(model_dir=directory))


def test_meta_json_is_never_written_in_a_form_it_cannot_be_read_in(tmp_path: Path) -> None:
    from slurm_advisor.errors import InputError

    with pytest.raises(InputError, match=r"meta\.json: field 'fast_deploy"):
        _save_meta(tmp_path / "m", {"deploy": "search", "fast_deploy": {"deploy": "search"}})
