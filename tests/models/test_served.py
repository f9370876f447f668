"""The model as served (numpy, ``models.served``) against the torch checkpoint of the same directory:
the same weights to the bit, the same placements on whole simulations, and clear errors for a
``weights.npz`` that is missing or flawed."""
from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from slurm_advisor.advisor import Advisor
from slurm_advisor.errors import InputError
from slurm_advisor.models import served, weights
from slurm_advisor.models.meta import DEFAULT_MODEL_DIR
from slurm_advisor.models.meta import read as read_meta
from slurm_advisor.policies.learned.adapter import policy_of
from slurm_advisor.policies.search import search_over
from slurm_advisor.policies.slurm_default import SlurmDefaultPolicy
from slurm_advisor.sim.clusterfile import read_cluster
from slurm_advisor.sim.engine import Simulation
from slurm_advisor.sim.workload import at_offered_load
from slurm_advisor.speedmodels import load_speed_model
from slurm_advisor.traces.synthetic import synthetic_jobs
from slurm_advisor.training import checkpoint

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(params=["default", "site"])
def model_dir(request, site_model_dir) -> Path:
    return DEFAULT_MODEL_DIR if request.param == "default" else site_model_dir


def test_the_declared_shapes_are_the_torch_networks(model_dir) -> None:
    ckpt, meta = checkpoint.load(model_dir), read_meta(model_dir)
    assert weights.policy_shapes(meta) == {k: tuple(v.shape) for k, v in ckpt.policy.state_dict().items()}
    assert weights.speed_shapes(meta) == {k: tuple(v.shape) for k, v in ckpt.speed.state_dict().items()}


def test_the_served_weights_are_the_checkpoints_to_the_bit(model_dir) -> None:
    ckpt, model = checkpoint.load(model_dir), served.load(model_dir)
    torch_policy = {k: v.numpy() for k, v in ckpt.policy.state_dict().items()}
    assert model.policy.keys() == torch_policy.keys()
    assert all(np.array_equal(model.policy[k], v) and model.policy[k].dtype == np.float32
               for k, v in torch_policy.items())
    assert (model.schema, model.hyper, model.meta, model.speed_vocab) == \
        (ckpt.schema, ckpt.hyper, ckpt.meta, ckpt.speed_vocab)


def _records(nodes, jobs, truth, policy) -> list:
    result = Simulation(nodes, jobs, Advisor(policy, fallback=SlurmDefaultPolicy()), truth, seed=0).run()
    return [[r.job_id, r.start, r.end, r.state, r.num_nodes] for r in result.records], result.holds


def test_the_shipped_model_places_as_with_torch_on_a_congested_trace() -> None:
    """tests/sim/test_golden_schedules.py pins the served model's schedules as torch made them; here
    one more trace, with holds, side by side."""
    nodes = read_cluster(REPO / "examples" / "clusters" / "16x8.toml")[:8]
    truth = load_speed_model("contention")
    jobs = at_offered_load(synthetic_jobs(120, seed=11, mix="philly"), nodes, truth, 1.4)
    with_numpy = _records(nodes, jobs, truth, policy_of(served.load(None), None))
    with_torch = _records(nodes, jobs, truth, policy_of(checkpoint.load(None), None))
    assert with_numpy == with_torch and with_numpy[1] > 0  # it held some jobs: the speed model was asked


def test_the_search_over_a_site_model_places_as_with_torch(site_model_dir) -> None:
    """The search weighs every candidate with the ensemble: numpy's log speeds must not reorder them."""
    nodes = read_cluster(REPO / "examples" / "clusters" / "16x8.toml")[:4]
    truth = load_speed_model("contention")
    jobs = at_offered_load(synthetic_jobs(60, seed=12, mix="large"), nodes, truth, 1.0)

    def search(model):
        return search_over(policy_of(model, site_model_dir), model.speed_model)

    with_numpy = _records(nodes, jobs, truth, search(served.load(site_model_dir)))
    with_torch = _records(nodes, jobs, truth, search(checkpoint.load(site_model_dir)))
    assert with_numpy == with_torch and with_numpy[1] > 0  # it held jobs: the weighing decided


def _copy(tmp_path: Path) -> Path:
    return Path(shutil.copytree(DEFAULT_MODEL_DIR, tmp_path / "model"))


def test_a_model_without_weights_npz_is_converted_in_memory_where_torch_is(tmp_path) -> None:
    model = _copy(tmp_path)
    (model / weights.WEIGHTS_FILE).unlink()
    converted = served.load(model)
    assert not (model / weights.WEIGHTS_FILE).exists()  # a published version is never changed
    assert all(np.array_equal(converted.policy[k], v) for k, v in served.load(None).policy.items())


def _rewrite(path: Path, change) -> None:
    with np.load(path) as npz:
        arrays = change({k: npz[k] for k in npz.files})
    with open(path, "wb") as f:
        np.savez(f, **arrays)


@pytest.mark.parametrize(("change", "says"), [
    (lambda a: {**a, "format": np.array(99)}, "format 1"),
    (lambda a: {k: v for k, v in a.items() if k != "speed/b2"}, "missing ['b2']"),
    (lambda a: {**a, "policy/score.2.weight": np.zeros((2, 64), np.float16)}, "policy/score.2.weight must be"),
    (lambda a: {**a, "policy/encode.0.bias": np.zeros(64, np.int64)}, "policy/encode.0.bias must be a float"),
    (lambda a: {**a, "speed/log_hi": np.array(np.inf, np.float32)}, "speed/log_hi holds NaN or infinite"),
])
def test_a_flawed_weights_file_is_one_error_naming_it(tmp_path, change, says) -> None:
    model = _copy(tmp_path)
    _rewrite(model / weights.WEIGHTS_FILE, change)
    with pytest.raises(InputError, match="weights.npz") as err:
        served.load(model)
    assert says in str(err.value)


def test_a_file_that_is_no_npz_is_one_error(tmp_path) -> None:
    model = _copy(tmp_path)
    (model / weights.WEIGHTS_FILE).write_bytes(b"PK\x03\x04 not really")
    with pytest.raises(InputError, match="weights.npz: cannot load weights"):
        served.load(model)


def test_export_writes_the_weights_of_the_pt_files(tmp_path) -> None:
    model = _copy(tmp_path)
    (model / weights.WEIGHTS_FILE).unlink()
    checkpoint.export(model)
    with np.load(model / weights.WEIGHTS_FILE) as got, np.load(DEFAULT_MODEL_DIR / weights.WEIGHTS_FILE) as shipped:
        assert got.files == shipped.files
        assert all(np.array_equal(got[k], shipped[k]) and got[k].dtype == shipped[k].dtype for k in got.files)
        assert got["policy/encode.0.weight"].dtype == np.float16  # as policy.pt holds it


def test_an_older_site_model_exported_serves_as_torch_loads_it(site_model_dir, tmp_path) -> None:
    """A site model saved before the rack inputs (12 globals, 24 residual inputs, no
    ``speed_resid``) and before weights.npz: exported, numpy serves it as torch's upgrade loads it."""
    import json

    import torch

    from slurm_advisor.domain import ClusterSnapshot, Node, Placement
    from slurm_advisor.traces.synthetic import synthetic_jobs

    model = Path(shutil.copytree(site_model_dir, tmp_path / "old"))
    meta = json.loads((model / "meta.json").read_text())
    del meta["speed_resid"]
    (model / "meta.json").write_text(json.dumps(meta))
    state = torch.load(model / "speed.pt", weights_only=True)
    state["w1"] = torch.cat([state["w1"][:, :24], state["w1"][:, 28:]], 1)  # the 4 rack inputs gone
    state["global_params"] = state["global_params"][..., :12]
    torch.save(state, model / "speed.pt")
    (model / weights.WEIGHTS_FILE).unlink()
    checkpoint.export(model)
    numpy_speed, torch_speed = served.load(model).speed_model, checkpoint.load(model).speed_model
    nodes = tuple(Node(f"n{i}", 32, 8, 256_000, f"s{i // 2}") for i in range(4))
    jobs = synthetic_jobs(6, seed=3, mix="large")
    snapshot = ClusterSnapshot.empty(nodes).with_job(jobs[0], Placement.of(jobs[0], ["n0"] * jobs[0].num_tasks))
    for job in jobs[1:]:
        placement = Placement.of(job, [f"n{1 + k % 3}" for k in range(job.num_tasks)])
        np.testing.assert_allclose(numpy_speed.predict_all(snapshot, job, placement),
                                   torch_speed.predict_all(snapshot, job, placement), rtol=1e-5)
