"""Every ground truth built from a --speed-model spec is checked: built-in or plug-in, each asked
job gets a finite speed of at least MIN_SPEED, or one InputError names the model and the job."""
from __future__ import annotations

import math
from pathlib import Path

import pytest

from slurm_advisor.domain import Job, Node, Placement, Resources, RunningJob
from slurm_advisor.errors import InputError
from slurm_advisor.speedmodels import load_speed_model
from slurm_advisor.speedmodels.base import MIN_SPEED, CheckedSpeedModel
from slurm_advisor.speedmodels.contention import ContentionSpeedModel

NODES = [Node("n1", 32, 8, 256_000, "s1"), Node("n2", 32, 8, 256_000, "s1")]
JOB = Job("j", "resnet50", 0, 2, Resources(), Resources(4, 1, 24_000), 100.0)
OTHER = Job("k", "vgg16", 0, 1, Resources(), Resources(4, 1, 24_000), 100.0)
RUNNING = [RunningJob(JOB, Placement.of(JOB, ["n1", "n2"])), RunningJob(OTHER, Placement.of(OTHER, ["n1"]))]


class _Fixed:
    """A built-in-like model (local, named) answering fixed speeds."""

    name, local = "fixed", True

    def __init__(self, answer: dict):
        self.answer = answer

    def speeds(self, nodes, running, only=None):
        return dict(self.answer)


@pytest.mark.parametrize("spec, kind", [("contention", ContentionSpeedModel)])
def test_every_truth_from_a_spec_is_checked(spec: str, kind: type) -> None:
    model = load_speed_model(spec)
    assert isinstance(model, CheckedSpeedModel) and isinstance(model.inner, kind)
    assert (model.name, model.local) == (model.inner.name, model.inner.local)
    assert model.speeds(NODES, RUNNING) == model.inner.speeds(NODES, RUNNING)


def test_gavel_and_pollux_truths_are_checked(shared_data: Path) -> None:
    for spec in (f"gavel:{shared_data / 'gavel' / 'simulation_throughputs.json'}",
                 f"pollux:{shared_data / 'pollux' / 'models'}"):
        assert isinstance(load_speed_model(spec), CheckedSpeedModel)


def test_plugins_are_checked_too(tmp_path: Path) -> None:
    path = tmp_path / "tiny.py"
    path.write_text("class Tiny:\n    def speeds(self, nodes, jobs):\n"
                    "        return {j['id']: 1e-320 for j in jobs}\n")
    model = load_speed_model(f"{path}:Tiny")
    with pytest.raises(InputError) as err:
        model.speeds(NODES, RUNNING)
    assert "tiny.py:Tiny" in str(err.value) and "job 'j'" in str(err.value)


@pytest.mark.parametrize("speed", [0.0, -1.0, 1e-320, MIN_SPEED / 2, math.inf, math.nan])
def test_bad_speeds_name_the_model_and_the_job(speed: float) -> None:
    model = CheckedSpeedModel(_Fixed({"j": 1.0, "k": speed}))
    with pytest.raises(InputError) as err:
        model.speeds(NODES, RUNNING)
    message = str(err.value)
    assert "speed model fixed" in message and "job 'k'" in message and f"{MIN_SPEED:g}" in message


def test_a_missing_speed_names_the_job() -> None:
    with pytest.raises(InputError, match="speed model fixed: no speed for job 'k'"):
        CheckedSpeedModel(_Fixed({"j": 1.0})).speeds(NODES, RUNNING)


def test_only_the_asked_jobs_are_checked() -> None:
    model = CheckedSpeedModel(_Fixed({"j": 2.0, "k": -1.0}))
    assert model.speeds(NODES, RUNNING, only={"j"})["j"] == 2.0
    assert CheckedSpeedModel(_Fixed({"j": MIN_SPEED})).speeds(NODES, RUNNING[:1]) == {"j": MIN_SPEED}
