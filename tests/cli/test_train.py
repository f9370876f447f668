"""`slurm-advisor train --from-db` on a store recorded by `simulate --record-to`, in-process."""
from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner

from slurm_advisor.cli import main
from slurm_advisor.sim.trace import write_trace
from slurm_advisor.store import Store
from slurm_advisor.traces.synthetic import synthetic_jobs

CLUSTER = Path(__file__).resolve().parents[2] / "examples" / "clusters" / "16x8.toml"

if "train" not in main.cli.commands:
    main._register()


def run(*args: str):
    return CliRunner().invoke(main.cli, list(args))


@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> tuple[Path, Path]:
    """A training trace and a SQLite store with the speeds two policies logged on it."""
    work = tmp_path_factory.mktemp("train")
    trace, db = work / "train.csv", work / "samples.db"
    write_trace(trace, synthetic_jobs(40, seed=3, mix="large", arrival_rate_per_h=3.0))
    result = run("simulate", "--cluster", str(CLUSTER), "--trace", str(trace),
                 "--policy", "slurm-default,random", "--record-to", str(db))
    assert result.exit_code == 0, result.output
    return trace, db


@pytest.mark.slow
def test_train_writes_a_model_directory(recorded, tmp_path: Path) -> None:
    trace, db = recorded
    out = tmp_path / "model"
    result = run("train", "--from-db", str(db), "--cluster", str(CLUSTER), "--trace", str(trace),
                 "--out", str(out), "--episodes", "1", "--episode-jobs", "20")
    assert result.exit_code == 0, result.output
    assert {p.name for p in out.iterdir()} == {"meta.json", "policy.pt", "speed.pt", "weights.npz", "learning_curve.png",
                                              "lif_profile.json"}
    assert (out / "learning_curve.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    meta = json.loads((out / "meta.json").read_text())
    assert meta["hyper"]["rl_episodes"] == 1 and meta["hyper"]["episode_jobs"] == 20
    assert [c["episode"] for c in meta["curve"]] == [0, 1]
    assert meta["trained_on"]["samples"] > 20 and meta["trained_on"]["jobs"] == 40
    assert f"model written to {out}" in result.stdout
    # The model it wrote is what `simulate --policy learned --model` runs.
    sim = run("simulate", "--cluster", str(CLUSTER), "--trace", str(trace), "--policy", "learned",
              "--model", str(out), "--json")
    assert sim.exit_code == 0, sim.output
    assert json.loads(sim.stdout)["learned"]["jobs"] == 40


def one_error(result, *words: str) -> str:
    """Exit status 2 and one `error:` line on stderr naming ``words``; no exception escaped."""
    assert result.exit_code == 2, result.output
    assert isinstance(result.exception, SystemExit), result.exception
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    for word in words:
        assert word in lines[0], lines[0]
    return lines[0]


def test_empty_store_is_one_error_line(recorded, tmp_path: Path) -> None:
    trace, _ = recorded
    empty = tmp_path / "empty.db"
    Store.open(str(empty)).close()
    result = run("train", "--from-db", str(empty), "--cluster", str(CLUSTER), "--trace", str(trace),
                 "--out", str(tmp_path / "model"))
    one_error(result, "only 0 speed samples", "--record-to")
    assert not (tmp_path / "model").exists()


def test_a_database_that_does_not_exist_is_one_error_line_and_is_not_created(recorded, tmp_path: Path) -> None:
    trace, _ = recorded
    typo = tmp_path / "typo.db"
    result = run("train", "--from-db", str(typo), "--cluster", str(CLUSTER), "--trace", str(trace),
                 "--out", str(tmp_path / "model"))
    one_error(result, str(typo), "does not exist")
    assert not typo.exists() and not (tmp_path / "model").exists()


@pytest.mark.parametrize("flag, value", [("--episodes", "-1"), ("--episodes", "0"), ("--episode-jobs", "0"),
                                         ("--episode-jobs", "-5")])
def test_a_budget_below_one_is_a_usage_error(recorded, tmp_path: Path, flag: str, value: str) -> None:
    trace, db = recorded
    result = run("train", "--from-db", str(db), "--cluster", str(CLUSTER), "--trace", str(trace),
                 "--out", str(tmp_path / "model"), flag, value)
    assert result.exit_code == 2 and isinstance(result.exception, SystemExit)
    assert flag in result.stderr and value in result.stderr
    assert not (tmp_path / "model").exists()


def test_a_trace_where_no_job_fits_is_one_error_line(recorded, tmp_path: Path) -> None:
    _, db = recorded
    huge = tmp_path / "huge.csv"
    write_trace(huge, [replace(j, num_workers=500) for j in synthetic_jobs(3, seed=1)])
    result = run("train", "--from-db", str(db), "--cluster", str(CLUSTER), "--trace", str(huge),
                 "--out", str(tmp_path / "model"))
    one_error(result, str(huge), "no job fits", "3 job(s)")
    assert not (tmp_path / "model").exists()
