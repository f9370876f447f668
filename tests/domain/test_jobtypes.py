"""Job-type profiles: known types from published figures, unknown types from the job's own fields."""
import pytest

from slurm_advisor.domain.jobtypes import KNOWN_TYPES, profile_for, reference_speed


def test_known_type_is_looked_up_case_insensitively() -> None:
    p = profile_for("ResNet50")
    assert p == KNOWN_TYPES["resnet50"]
    assert p.name == "resnet50"
    assert p.model_size_mb == pytest.approx(25.6 * 4)


def test_known_type_takes_declared_size_and_batch() -> None:
    p = profile_for("vgg16", model_size_mb=100.0, batch_size=7)
    assert p.params_m == pytest.approx(25.0)
    assert p.batch_size == 7
    base = KNOWN_TYPES["vgg16"]
    assert (p.gflops_per_sample, p.cpu, p.membw, p.pcie) == (base.gflops_per_sample, base.cpu,
                                                             base.membw, base.pcie)


def test_unknown_type_falls_back_using_model_size() -> None:
    p = profile_for("my-llm", model_size_mb=2000.0)
    assert p.name == "my-llm"
    assert p.params_m == pytest.approx(500.0)
    assert p.model_size_mb == pytest.approx(2000.0)
    assert profile_for("my-llm", model_size_mb=400.0).params_m == pytest.approx(100.0)
    # generic middle-of-the-road usage, not zero
    assert 0 < p.cpu < 1 and 0 < p.membw < 1 and 0 < p.pcie < 1


def test_unknown_type_without_size_gets_a_generic_profile() -> None:
    p = profile_for("whatever")
    assert p.name == "whatever"
    assert p.params_m > 0 and p.batch_size > 0 and p.gflops_per_sample > 0
    assert profile_for("whatever", batch_size=3).batch_size == 3


def test_reference_speed_matches_gavel_resnet50_on_v100() -> None:
    assert reference_speed(KNOWN_TYPES["resnet50"]) == pytest.approx(4.4, abs=0.1)


def test_reference_speed_falls_with_work_per_step() -> None:
    small = profile_for("resnet50", batch_size=32)
    large = profile_for("resnet50", batch_size=128)
    assert reference_speed(small) > reference_speed(large)
    assert reference_speed(KNOWN_TYPES["resnet18"]) > reference_speed(KNOWN_TYPES["vgg16"])
    assert all(reference_speed(p) > 0 for p in KNOWN_TYPES.values())
