"""The submit marker in --comment."""
from __future__ import annotations

import pytest

from slurm_advisor.slurm.marker import Marker, MarkerError, parse_marker


def test_marker_is_found_among_other_text():
    marker = parse_marker("nightly run slurm-advisor: type=resnet50 ps=1 workers=4 model_mb=98 batch=64 (ok)")
    assert marker == Marker("resnet50", 1, 4, 98.0, 64, None)


def test_no_marker_is_none():
    assert parse_marker("just a comment") is None
    assert parse_marker(None) is None


@pytest.mark.parametrize(("comment", "message"), [
    ("slurm-advisor:", "key=value"),
    ("slurm-advisor: type=x ps=1", "lacks workers"),
    ("slurm-advisor: type=x ps=1 workers=two", "not an integer"),
    ("slurm-advisor: type=x ps=0 workers=0", "workers >= 1"),
    ("slurm-advisor: type=x ps=0 workers=1 gpus=3", "unknown marker key 'gpus'"),
    ("slurm-advisor: type=$(reboot) ps=0 workers=1", "letters, digits"),
    ("slurm-advisor: type=x ps=0 workers=1 model_mb=inf", "out of range"),
    ("slurm-advisor: type=x ps=0 workers=1 iters=0", "out of range"),
    ("slurm-advisor: type=x ps=0 workers=1000000000", "at most 100000"),
    ("slurm-advisor: type=x ps=0 workers=" + "9" * 5000, "not an integer"),
])
def test_malformed_markers_name_the_key(comment, message):
    with pytest.raises(MarkerError, match=message):
        parse_marker(comment)
