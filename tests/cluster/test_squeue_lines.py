"""The compact squeue readings: running jobs of the advisor, times and durations."""
from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pytest

from slurm_advisor.cluster.base import SourceError
from slurm_advisor.cluster.squeue_lines import parse_duration, parse_running, parse_time

FIXTURES = Path(__file__).resolve().parent / "fixtures"


def test_only_marked_running_jobs_are_read_from_the_2205_recording():
    (job,) = parse_running((FIXTURES / "squeue-running-22.05.txt").read_text())
    assert (job.job_id, job.nodes, job.cpus, job.gpus, job.mem_mb) == ("1", ("n1", "n2"), 6, 3, 6000)
    assert job.comment == "slurm-advisor: type=resnet50 ps=1 workers=2 iters=5000"
    assert job.time_limit_s == 5400.0 and job.start_time == datetime(2026, 12, 1, 14, 24, 25).timestamp()


def test_gpus_from_accounting_else_from_the_request():
    (job,) = parse_running((FIXTURES / "squeue-running-23.02.txt").read_text())[:1]
    assert job.gpus == 4 and job.mem_mb == 64000
    line = "9|ann|4|1|cpu=4,mem=2G,node=2|N/A|gres:gpu:2|N/A|10:00|n[3-4]|slurm-advisor: type=x ps=0 workers=1"
    assert parse_running(line)[0].gpus == 4 and parse_running(line)[0].mem_mb == 2048


def test_a_comment_holding_the_separator_stays_whole():
    line = "7|ann|4|4|cpu=4|N/A|N/A|N/A|10:00|n3|a|b slurm-advisor: type=x ps=0 workers=4"
    (job,) = parse_running(line)
    assert job.comment == "a|b slurm-advisor: type=x ps=0 workers=4" and job.start_time == 0.0


@pytest.mark.parametrize(("text", "seconds"), [
    ("1:30:00", 5400.0), ("30:00", 1800.0), ("2-00:00:00", 172800.0), ("45", 2700.0), ("UNLIMITED", None),
])
def test_durations(text, seconds):
    assert parse_duration(text, "TimeLimit") == seconds


def test_bad_values_name_the_field():
    with pytest.raises(SourceError, match="TimeLimit: not a duration: 'soon'"):
        parse_duration("soon", "TimeLimit")
    with pytest.raises(SourceError, match="StartTime: not a time"):
        parse_time("yesterday", "StartTime")
    with pytest.raises(SourceError, match="job 7: NumCPUs: not an integer"):
        parse_running("7|ann|four|4|cpu=4|N/A|N/A|N/A|10:00|n3|slurm-advisor: type=x ps=0 workers=4")
