"""Checkpoints: round trip, schema versions, missing files, and no pickle on load."""
from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from slurm_advisor.errors import InputError
from slurm_advisor.learned.hyper import Hyper
from slurm_advisor.learned.policy.features import SCHEMA_VERSION, FeatureSchema
from slurm_advisor.learned.policy.net import PolicyNet
from slurm_advisor.training import checkpoint

SCHEMA = FeatureSchema()
SHIPPED = checkpoint.load()
HP = replace(SHIPPED.hyper, hidden=16, seed=3)  # the shipped site ensemble's speed_hidden


@pytest.fixture
def saved(tmp_path: Path):
    torch.manual_seed(0)
    policy = PolicyNet(SCHEMA.node_dim, SCHEMA.global_dim, HP.hidden)
    speed = SHIPPED.speed_model
    directory = checkpoint.save(tmp_path / "model", policy, speed, SCHEMA, HP, {"note": "test"})
    return directory, policy, speed


def inputs(n_nodes: int = 5):
    g = torch.Generator().manual_seed(1)
    nodes = torch.rand(2, n_nodes, SCHEMA.node_dim, generator=g)
    mask = torch.ones(2, n_nodes, dtype=torch.bool)
    mask[1, 0] = False
    return nodes, torch.rand(2, SCHEMA.global_dim, generator=g), mask


def test_round_trip_gives_the_same_outputs(saved) -> None:
    directory, policy, speed = saved
    assert {p.name for p in directory.iterdir()} == {"meta.json", "policy.pt", "speed.pt", "weights.npz"}
    ckpt = checkpoint.load(directory)
    assert ckpt.schema == SCHEMA and ckpt.hyper == HP and ckpt.meta["note"] == "test"
    assert not ckpt.policy.training and not ckpt.speed.training
    with torch.no_grad():
        (logits, values), (logits2, values2) = policy(*inputs()), ckpt.policy(*inputs())
    torch.testing.assert_close(logits2, logits, rtol=1e-2, atol=1e-2)
    torch.testing.assert_close(values2, values, rtol=1e-2, atol=1e-2)
    assert torch.equal(logits2.argmax(1), logits.argmax(1))
    assert all(p.dtype == torch.float32 for p in ckpt.policy.parameters())
    saved_speed, loaded_speed = speed.net.state_dict(), ckpt.speed.state_dict()  # float32 on disk: exact
    assert saved_speed.keys() == loaded_speed.keys()
    assert all(torch.equal(saved_speed[k], loaded_speed[k]) for k in saved_speed)
    assert ckpt.speed_vocab == speed.vocab


def test_weights_are_stored_as_float16(saved) -> None:
    directory, _, _ = saved
    state = torch.load(directory / "policy.pt", weights_only=True)
    assert all(v.dtype == torch.float16 for v in state.values() if v.is_floating_point())


def test_meta_records_schema_and_hyperparameters(saved) -> None:
    directory, _, _ = saved
    meta = json.loads((directory / "meta.json").read_text())
    assert meta["schema_version"] == SCHEMA_VERSION
    assert meta["types"] == list(SCHEMA.types)
    assert Hyper.from_dict(meta["hyper"]) == HP


def test_other_schema_version_is_refused_clearly(saved) -> None:
    directory, _, _ = saved
    meta_path = directory / "meta.json"
    meta = json.loads(meta_path.read_text())
    meta["schema_version"] = SCHEMA_VERSION + 41
    meta_path.write_text(json.dumps(meta))
    with pytest.raises(InputError) as info:
        checkpoint.load(directory)
    message = str(info.value)
    assert str(directory) in message and "schema version" in message
    assert str(SCHEMA_VERSION + 41) in message and str(SCHEMA_VERSION) in message and "retrain" in message


def test_missing_directory_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="not a model directory"):
        checkpoint.load(tmp_path / "nowhere")


def test_broken_meta_is_an_input_error(saved) -> None:
    directory, _, _ = saved
    (directory / "meta.json").write_text("{not json")
    with pytest.raises(InputError, match="not valid JSON"):
        checkpoint.load(directory)


@pytest.mark.parametrize("name", ["policy.pt", "speed.pt"])
def test_missing_or_foreign_weights_are_input_errors(saved, name) -> None:
    directory, _, _ = saved
    (directory / name).unlink()
    with pytest.raises(InputError, match=name):
        checkpoint.load(directory)
    torch.save({"unrelated": torch.zeros(3)}, directory / name)
    with pytest.raises(InputError, match="cannot load weights"):
        checkpoint.load(directory)


def test_loads_with_weights_only(saved, monkeypatch) -> None:
    directory, _, _ = saved
    calls = []
    real = torch.load

    def spy(*args, **kwargs):
        calls.append(kwargs.get("weights_only"))
        return real(*args, **kwargs)

    monkeypatch.setattr(torch, "load", spy)
    checkpoint.load(directory)
    assert calls == [True, True]


def test_a_pickled_object_is_not_executed(saved) -> None:
    directory, _, _ = saved
    torch.save({"body.0.weight": _Evil()}, directory / "speed.pt")
    with pytest.raises(InputError):
        checkpoint.load(directory)
    assert not _Evil.ran


@pytest.mark.parametrize("content", ["pickled-object", "garbage"])
def test_unloadable_weights_are_input_errors(saved, content) -> None:
    directory, _, _ = saved
    if content == "garbage":
        (directory / "policy.pt").write_bytes(b"not a checkpoint at all")
    else:
        torch.save({"body.0.weight": _Evil()}, directory / "policy.pt")
    with pytest.raises(InputError, match="cannot load weights"):
        checkpoint.load(directory)


class _Evil:
    ran = False

    def __reduce__(self):
        return (_Evil._run, ())

    @staticmethod
    def _run():
        _Evil.ran = True
        return torch.zeros(1)


def _edit_meta(directory: Path, **changes) -> Path:
    path = directory / "meta.json"
    meta = json.loads(path.read_text())
    for key, value in changes.items():
        if value is _DROP:
            del meta[key]
        else:
            meta[key] = value
    path.write_text(json.dumps(meta))
    return path


_DROP = object()


@pytest.mark.parametrize("changes, field", [
    ({"types": _DROP}, "'types'"),
    ({"types": "resnet50"}, "'types'"),
    ({"types": ["resnet50", 3]}, "'types'"),
    ({"schema_version": _DROP}, "'schema_version'"),
    ({"hyper": [1, 2]}, "'hyper'"),
    ({"hyper": {"hidden": "big"}}, "'hyper.hidden'"),
    ({"hyper": {"speed_hidden": 0}}, "'hyper.speed_hidden'"),
    ({"hyper": {"episode_rates": 1.5}}, "'hyper.episode_rates'"),
    ({"hyper": {"episode_rates": []}}, "'hyper.episode_rates'"),
    ({"hyper": {"episode_rates": [1.0, "fast"]}}, "'hyper.episode_rates'"),
    ({"patience": "high"}, "'patience'"),
    ({"patience": 1.5}, "'patience'"),
    ({"patience": True}, "'patience'"),
    ({"deploy": "best-fit"}, "'deploy'"),
    ({"deploy": 3}, "'deploy'"),
])
def test_bad_meta_fields_are_one_input_error_naming_file_and_field(saved, changes, field) -> None:
    directory, _, _ = saved
    path = _edit_meta(directory, **changes)
    with pytest.raises(InputError) as info:
        checkpoint.load(directory)
    assert str(path) in str(info.value) and field in str(info.value)


def test_meta_that_is_not_an_object_is_an_input_error(saved) -> None:
    directory, _, _ = saved
    (directory / "meta.json").write_text("[1, 2, 3]\n")
    with pytest.raises(InputError, match="must be a JSON object") as info:
        checkpoint.load(directory)
    assert str(directory / "meta.json") in str(info.value)


def test_meta_that_is_a_directory_is_an_input_error(saved) -> None:
    directory, _, _ = saved
    (directory / "meta.json").unlink()
    (directory / "meta.json").mkdir()
    with pytest.raises(InputError) as info:
        checkpoint.load(directory)
    assert str(directory / "meta.json") in str(info.value)


def test_meta_that_is_not_utf8_is_an_input_error(saved) -> None:
    directory, _, _ = saved
    (directory / "meta.json").write_bytes(b'{"note": "caf\xe9"}')
    with pytest.raises(InputError, match="UTF-8") as info:
        checkpoint.load(directory)
    assert str(directory / "meta.json") in str(info.value)


@pytest.mark.parametrize("content", [[torch.zeros(2)], torch.zeros(3), {"body.0.weight": [1.0]}])
def test_weights_that_are_not_a_state_dict_are_input_errors(saved, content) -> None:
    directory, _, _ = saved
    torch.save(content, directory / "policy.pt")
    with pytest.raises(InputError, match="cannot load weights") as info:
        checkpoint.load(directory)
    assert str(directory / "policy.pt") in str(info.value)


def test_a_model_of_the_legacy_mlp_kind_is_refused_with_the_command_that_replaces_it(saved) -> None:
    directory, _, _ = saved
    meta_path = directory / "meta.json"
    meta = json.loads(meta_path.read_text())
    del meta["speed_kind"]  # as every model saved before the site ensemble
    meta_path.write_text(json.dumps(meta))
    with pytest.raises(InputError) as info:
        checkpoint.load(directory)
    assert "'speed_kind'" in str(info.value) and "legacy MLP" in str(info.value)
    assert "slurm-advisor train" in str(info.value)
