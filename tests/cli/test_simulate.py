"""`slurm-advisor simulate`, run in-process through the real command group."""
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from slurm_advisor.cli import main
from slurm_advisor.policies import BASELINES, POLICIES
from slurm_advisor.sim.trace import COLUMNS
from slurm_advisor.store import Store

CLUSTER = Path(__file__).resolve().parents[2] / "examples" / "clusters" / "16x8.toml"
ROWS = [
    "a,0,resnet50,0,1,0,0,0,4,1,24000,2000",
    "b,60,vgg16,1,8,4,0,16000,4,1,24000,1500",
    "c,120,bert,0,4,0,0,0,4,1,24000,300",
    "d,180,a3c,0,16,0,0,0,4,1,24000,5000",
    "e,240,mystery,2,12,4,0,16000,4,1,24000,800",
    "f,300,transformer,0,2,0,0,0,4,1,24000,900",
]
SUMMARY_KEYS = {"avg_jct", "p95_jct", "makespan", "mean_slowdown", "utilization"}

if "simulate" not in main.cli.commands:
    main._register()  # registering twice only re-adds the same commands


@pytest.fixture
def trace(tmp_path: Path) -> Path:
    path = tmp_path / "trace.csv"
    path.write_text("\n".join([",".join(COLUMNS), *ROWS]) + "\n")
    return path


def simulate(*args: str):
    return CliRunner().invoke(main.cli, ["simulate", "--cluster", str(CLUSTER), *args])


def test_table_has_a_row_per_policy(trace: Path) -> None:
    result = simulate("--trace", str(trace))
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].split()[:4] == ["policy", "avg_jct", "p95_jct", "makespan"]
    rows = [line.split()[0] for line in lines[2:]]
    assert rows == list(BASELINES)
    assert all(len(line.split()) == 8 for line in lines[2:])


def test_json_gives_the_summary_of_each_policy(trace: Path) -> None:
    result = simulate("--trace", str(trace), "--policy", "pack,oracle,spread", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert list(data) == ["pack", "oracle", "spread"]
    for summary in data.values():
        assert SUMMARY_KEYS <= set(summary)
        assert summary["jobs"] == len(ROWS)
        assert 0 < summary["utilization"] <= 1
        assert summary["mean_slowdown"] > 0  # < 1 is possible: spreading can beat the consolidated reference
        assert summary["p95_jct"] >= summary["avg_jct"] > 0


def test_same_seed_same_numbers(trace: Path) -> None:
    first = simulate("--trace", str(trace), "--policy", "random", "--json", "--seed", "3")
    second = simulate("--trace", str(trace), "--policy", "random", "--json", "--seed", "3")
    assert first.exit_code == 0 and json.loads(first.stdout) == json.loads(second.stdout)


def test_record_to_stores_samples(trace: Path, tmp_path: Path) -> None:
    db = tmp_path / "deep" / "samples.db"
    result = simulate("--trace", str(trace), "--policy", "slurm-default", "--record-to", str(db))
    assert result.exit_code == 0, result.output
    with Store.open(str(db)) as store:
        assert store.count_samples() > 0
        assert store.count_samples(source="sim") == store.count_samples()
        assert {s.subject.job.id for s in store.load_samples()} == {"a", "b", "c", "d", "e", "f"}


def test_plot_writes_a_png(trace: Path, tmp_path: Path) -> None:
    png = tmp_path / "cdf.png"
    result = simulate("--trace", str(trace), "--policy", "pack,spread", "--plot", str(png))
    assert result.exit_code == 0, result.output
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert f"plot written to {png}" in result.stdout


def test_bad_trace_is_one_error_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text("\n".join([",".join(COLUMNS), ROWS[0], ROWS[1].replace(",8,", ",eight,")]) + "\n")
    result = simulate("--trace", str(bad))
    assert result.exit_code == 2
    assert "Traceback" not in result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("error: ")
    assert str(bad) in lines[0] and "line 3" in lines[0] and "'num_workers'" in lines[0]


def test_bad_speed_model_is_one_error_line(trace: Path) -> None:
    result = simulate("--trace", str(trace), "--speed-model", "nonsense")
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [result.output.strip()]
    assert result.output.startswith("error: unknown speed model 'nonsense'")


def test_unknown_policy_is_a_usage_error_listing_valid_names(trace: Path) -> None:
    result = simulate("--trace", str(trace), "--policy", "pack,best-fit")
    assert result.exit_code == 2
    assert "Traceback" not in result.output
    assert "best-fit" in result.output
    for name in POLICIES:
        assert name in result.output


def test_missing_files_are_usage_errors(tmp_path: Path) -> None:
    result = simulate("--trace", str(tmp_path / "none.csv"))
    assert result.exit_code == 2 and "none.csv" in result.output
