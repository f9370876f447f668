"""The Slurm release read from ``sinfo --version``, and where the model of Slurm follows it."""
import pytest

from slurm_advisor.slurm.release import DEFAULT, Release


@pytest.mark.parametrize("text, release", [
    ("slurm 22.05.8\n", Release(22, 5, 8)),
    ("slurm-wlm 24.11.5\n", Release(24, 11, 5)),
    ("slurm-wlm 26.05.5", Release(26, 5, 5)),
    ("24.11", Release(24, 11, 0)),
])
def test_parse(text: str, release: Release) -> None:
    assert Release.parse(text) == release


def test_no_release_is_an_error_naming_the_text() -> None:
    with pytest.raises(ValueError, match="no Slurm release in 'sinfo: command not found'"):
        Release.parse("sinfo: command not found")


def test_written_as_slurm_writes_it() -> None:
    assert str(Release(24, 11, 5)) == "24.11.5" and str(DEFAULT) == "22.05.8"


def test_behaviours_by_release() -> None:
    assert not DEFAULT.spreads_job_gpus and not DEFAULT.first_fit_single_node
    assert not Release(23, 11, 10).spreads_job_gpus  # _set_max_gres learnt rem_nodes in 24.05
    assert Release(24, 5).spreads_job_gpus and Release(24, 11, 5).spreads_job_gpus
    assert not Release(24, 11, 5).first_fit_single_node
    assert Release(26, 5, 5).spreads_job_gpus and Release(26, 5, 5).first_fit_single_node
    assert DEFAULT.keeps_gpu_weights and Release(23, 2, 7).keeps_gpu_weights  # 55b5c8ca3a came in 23.11
    assert not Release(23, 11).keeps_gpu_weights and not Release(24, 11, 5).keeps_gpu_weights
    assert not Release(24, 5, 9).will_run_windows and Release(24, 11).will_run_windows  # 3d8d6cb4e9
    assert not Release(25, 5).starts_at_last_relevant_job and Release(25, 11).starts_at_last_relevant_job
    assert not Release(24, 11, 7).gone_at_start_res and Release(25, 5).gone_at_start_res  # 324f83551b
    assert not DEFAULT.will_run_windows and not DEFAULT.starts_at_last_relevant_job
