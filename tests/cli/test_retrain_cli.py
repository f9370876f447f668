"""`slurm-advisor retrain --submit`: the sbatch argument list, run against a stand-in sbatch."""
from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

from click.testing import CliRunner

from slurm_advisor.cli import main
from slurm_advisor.retrain.submit import sbatch_argv

if "retrain" not in main.cli.commands:
    main._register()

CLUSTER = Path(__file__).resolve().parents[2] / "examples" / "clusters" / "16x8.toml"


def _fake_sbatch(tmp_path: Path, monkeypatch, reply: str = "4242;cluster", rc: int = 0) -> Path:
    """An `sbatch` on PATH that writes its arguments, one per line, and answers like sbatch --parsable."""
    bin_dir, args = tmp_path / "bin", tmp_path / "sbatch.args"
    bin_dir.mkdir()
    script = bin_dir / "sbatch"
    script.write_text(f"#!/bin/sh\nprintf '%s\\n' \"$@\" > {shlex.quote(str(args))}\n"
                      f"echo {shlex.quote(reply)}\nexit {rc}\n")
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    return args


def test_submit_runs_the_same_retrain_as_a_batch_job(tmp_path, monkeypatch) -> None:
    args = _fake_sbatch(tmp_path, monkeypatch)
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main.cli, [
        "retrain", "--db", "postgresql+psycopg://u@h/advisor", "--cluster", str(CLUSTER), "--models-dir", "models",
        "--margin", "0.05", "--hyper", "speed_epochs=5", "--hyper", "hidden=8", "--json", "--submit",
        "--partition", "gpu", "--sbatch-arg=--gres=gpu:1", "--sbatch-arg=--time=2:00:00"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == {"submitted": "4242"}
    argv = args.read_text().splitlines()
    assert argv[:5] == ["--parsable", "--job-name=slurm-advisor-retrain", "--partition=gpu", "--gres=gpu:1",
                        "--time=2:00:00"]
    assert argv[5] == "--wrap" and len(argv) == 7
    wrapped = shlex.split(argv[6])
    assert wrapped[:4] == [sys.executable, "-m", "slurm_advisor.cli", "retrain"]
    options = wrapped[4:]
    assert "--submit" not in options and "--partition" not in options and "--sbatch-arg" not in options
    pairs = dict(zip(options[::2], options[1::2]))
    assert pairs["--db"] == "postgresql+psycopg://u@h/advisor"
    assert pairs["--cluster"] == str(CLUSTER) and pairs["--models-dir"] == str(tmp_path / "models")  # absolute
    assert pairs["--margin"] == "0.05" and options.count("--hyper") == 2 and "hidden=8" in options
    assert pairs["--holdout-max"] == "5000"  # defaults travel too: the batch job retrains as this one would
    assert options[-1] == "--json"


def test_the_wrapped_command_quotes_every_argument() -> None:
    argv = sbatch_argv(["--db", "x; rm -rf /", "--json"], python="/usr/bin/python3")
    assert argv[0] == "sbatch" and argv[-2] == "--wrap"
    assert shlex.split(argv[-1]) == ["/usr/bin/python3", "-m", "slurm_advisor.cli", "retrain", "--db",
                                     "x; rm -rf /", "--json"]


def test_a_refused_submission_is_bad_input(tmp_path, monkeypatch) -> None:
    _fake_sbatch(tmp_path, monkeypatch, reply="sbatch: error: invalid partition specified: gpu", rc=1)
    result = CliRunner().invoke(main.cli, ["retrain", "--cluster", str(CLUSTER), "--submit", "--partition", "gpu"])
    assert result.exit_code == 2 and "invalid partition" in result.stderr
