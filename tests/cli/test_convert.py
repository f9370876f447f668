"""The `convert` command group, run in-process on the real shared data."""
from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from slurm_advisor.cli.convert import convert
from slurm_advisor.cli.main import cli
from slurm_advisor.sim.trace import read_trace

if "convert" not in cli.commands:
    cli.add_command(convert)  # simulate/train may not exist yet, so register only this group


def _run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["convert", *args])
    return result.exit_code, result.output


@pytest.mark.parametrize("args, count", [
    (["philly", "{d}/philly/philly_jobs.csv.gz", "--max-jobs", "40", "--seed", "2"], 40),
    (["gavel", "{d}/gavel/traces/msr_seed0/2869ce.trace"], 533),
    (["pollux", "{d}/pollux/traces/workload-2.csv", "{d}/pollux/models"], 160),
    (["synthetic", "25", "--mix", "large"], 25),
])
def test_convert_writes_a_readable_trace(shared_data: Path, tmp_path: Path, args: list[str],
                                         count: int) -> None:
    out = tmp_path / "t.csv"
    code, output = _run(*[a.format(d=shared_data) for a in args], "--out", str(out))
    assert code == 0, output
    assert output.strip() == f"wrote {count} jobs to {out}"
    assert len(read_trace(out)) == count


def test_bad_gavel_line_is_one_error_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.trace"
    bad.write_text("nonsense\n")
    result = CliRunner().invoke(cli, ["convert", "gavel", str(bad), "--out", str(tmp_path / "t.csv")])
    assert result.exit_code == 2 and isinstance(result.exception, SystemExit)  # no exception escaped
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and str(bad) in lines[0] and "line 1" in lines[0]
    assert result.stdout == "" and not (tmp_path / "t.csv").exists()


def test_missing_input_and_out_are_usage_errors(tmp_path: Path) -> None:
    assert _run("gavel", str(tmp_path / "none.trace"), "--out", "x.csv")[0] == 2
    assert _run("synthetic", "5")[0] == 2


def test_synthetic_draws_the_sites_type_names(tmp_path: Path) -> None:
    out = tmp_path / "t.csv"
    code, output = _run("synthetic", "40", "--types", "ctr-ranker, seg-unet", "--out", str(out))
    assert code == 0, output
    assert {job.type for job in read_trace(out)} == {"ctr-ranker", "seg-unet"}
    code, output = _run("synthetic", "5", "--types", " , ", "--out", str(out))
    assert code == 2 and output.strip() == "error: types: give at least one job type name"


def test_a_failed_write_leaves_the_earlier_file_whole_and_no_temporary(tmp_path: Path, monkeypatch) -> None:
    """convert wrote the trace in place: a write that failed half way left a truncated file."""
    import slurm_advisor.cli.convert as module

    def full_disk(path, jobs):
        Path(path).write_text("job_id,submit_time\nhalf")
        raise OSError(28, "No space left on device")

    out = tmp_path / "t.csv"
    out.write_text("the earlier trace\n")
    monkeypatch.setattr(module, "write_trace", full_disk)
    code, output = _run("synthetic", "5", "--out", str(out))
    assert code == 2 and output == f"error: {out}: cannot write: No space left on device\n"
    assert out.read_text() == "the earlier trace\n" and sorted(p.name for p in tmp_path.iterdir()) == ["t.csv"]


def test_a_trace_into_a_missing_directory_is_one_line(tmp_path: Path) -> None:
    code, output = _run("synthetic", "5", "--out", str(tmp_path / "nope" / "t.csv"))
    assert code == 2 and output.startswith("error: ") and "cannot write" in output and len(output.splitlines()) == 1


def test_the_written_trace_has_the_umasks_mode(tmp_path: Path) -> None:
    import os
    out = tmp_path / "t.csv"
    assert _run("synthetic", "5", "--out", str(out))[0] == 0
    umask = os.umask(0o022)
    os.umask(umask)
    assert out.stat().st_mode & 0o777 == 0o666 & ~umask
