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


def one_error(result, *words: str) -> str:
    """The house rule: exit status 2, one `error:` line on stderr naming ``words``, nothing else."""
    assert result.exit_code == 2, result.output
    assert isinstance(result.exception, SystemExit), result.exception  # no exception escaped
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert result.stdout == ""
    for word in words:
        assert word in lines[0], lines[0]
    return lines[0]


def strict_json(text: str):
    """json.loads that refuses Infinity and NaN, which are not JSON."""
    def refuse(name: str):
        raise AssertionError(f"{name} in the JSON output")
    return json.loads(text, parse_constant=refuse)


def test_table_has_a_row_per_policy(trace: Path) -> None:
    result = simulate("--trace", str(trace))
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].split()[:7] == ["policy", "avg", "JCT", "h", "p95", "JCT", "h"]  # units in the header
    rows = [line.split()[0] for line in lines[2:-1]]
    assert rows == list(BASELINES)
    assert all(len(line.split()) == 8 for line in lines[2:-1])
    # the last line: the trace's floor, below every policy's avg JCT, both in hours as the JSON's seconds
    assert lines[-1].startswith("floor: avg JCT ") and "x slurm-default" in lines[-1]
    floor = float(lines[-1].split()[3])
    assert 0 < floor <= min(float(line.split()[1]) for line in lines[2:-1])
    summary = strict_json(simulate("--trace", str(trace), "--json").stdout)
    first = lines[2].split()
    assert float(first[1]) == pytest.approx(summary[first[0]]["avg_jct"] / 3600, abs=0.006)


def test_json_gives_the_summary_of_each_policy(trace: Path) -> None:
    result = simulate("--trace", str(trace), "--policy", "pack,oracle,spread", "--json")
    assert result.exit_code == 0, result.output
    data = strict_json(result.stdout)
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
    one_error(result, str(bad), "line 3", "'num_workers'")


def test_bad_speed_model_is_one_error_line(trace: Path) -> None:
    result = simulate("--trace", str(trace), "--speed-model", "nonsense")
    assert one_error(result).startswith("error: unknown speed model 'nonsense'")


def test_unknown_policy_is_a_usage_error_listing_valid_names(trace: Path) -> None:
    result = simulate("--trace", str(trace), "--policy", "pack,best-fit")
    assert result.exit_code == 2 and isinstance(result.exception, SystemExit)  # click's usage error
    assert result.stdout == "" and "best-fit" in result.stderr
    for name in POLICIES:
        assert name in result.output


def test_missing_files_are_usage_errors(tmp_path: Path) -> None:
    result = simulate("--trace", str(tmp_path / "none.csv"))
    assert result.exit_code == 2 and "none.csv" in result.output


def write_rows(tmp_path: Path, *rows: str, header: str = ",".join(COLUMNS), name: str = "t.csv") -> Path:
    path = tmp_path / name
    path.write_text("\n".join([header, *rows]) + "\n")
    return path


def test_a_cluster_file_that_is_not_utf8_is_one_error_line(trace: Path, tmp_path: Path) -> None:
    bad = tmp_path / "latin1.toml"
    bad.write_bytes(CLUSTER.read_bytes() + '# caf\xe9\n'.encode("latin-1"))
    result = CliRunner().invoke(main.cli, ["simulate", "--cluster", str(bad), "--trace", str(trace)])
    one_error(result, str(bad), "UTF-8")


def test_a_model_dir_with_a_bad_field_is_one_error_line(trace: Path, tmp_path: Path) -> None:
    from slurm_advisor.models.meta import DEFAULT_MODEL_DIR
    model = tmp_path / "model"
    model.mkdir()
    for name in ("policy.pt", "speed.pt"):
        (model / name).write_bytes((DEFAULT_MODEL_DIR / name).read_bytes())
    meta = json.loads((DEFAULT_MODEL_DIR / "meta.json").read_text())
    (model / "meta.json").write_text(json.dumps({**meta, "patience": "high"}))
    result = simulate("--trace", str(trace), "--policy", "learned", "--model", str(model))
    one_error(result, str(model / "meta.json"), "'patience'")


def test_a_trace_with_a_byte_order_mark_runs(tmp_path: Path) -> None:
    path = tmp_path / "bom.csv"
    path.write_bytes(b"\xef\xbb\xbf" + ("\n".join([",".join(COLUMNS), *ROWS]) + "\n").encode())
    result = simulate("--trace", str(path), "--policy", "pack", "--json")
    assert result.exit_code == 0, result.output
    assert strict_json(result.stdout)["pack"]["jobs"] == len(ROWS)


def test_an_absurd_model_size_is_one_error_line(tmp_path: Path) -> None:
    path = write_rows(tmp_path, ROWS[0] + ",1e308", header=",".join(COLUMNS) + ",model_size_mb")
    one_error(simulate("--trace", str(path)), str(path), "line 2", "'model_size_mb'")


def _plugin(tmp_path: Path, body: str) -> str:
    path = tmp_path / "plug.py"
    path.write_text(body)
    return f"{path}:Model"


@pytest.mark.parametrize("body, words", [
    ("import sys\nclass Model:\n    def speeds(self, nodes, jobs):\n        sys.exit(0)\n",
     ["plug.py:Model", "SystemExit"]),
    ("class Model:\n    def speeds(self, nodes, jobs):\n        return {j['id']: 1e-320 for j in jobs}\n",
     ["plug.py:Model", "job '"]),
])
def test_a_bad_plugin_is_one_error_line_even_with_json(trace: Path, tmp_path: Path, body: str,
                                                        words: list[str]) -> None:
    result = simulate("--trace", str(trace), "--policy", "pack", "--json",
                      "--speed-model", _plugin(tmp_path, body))
    one_error(result, *words)


def test_a_slow_but_valid_plugin_gives_finite_json(trace: Path, tmp_path: Path) -> None:
    body = "class Model:\n    def speeds(self, nodes, jobs):\n        return {j['id']: 1e-9 for j in jobs}\n"
    result = simulate("--trace", str(trace), "--policy", "pack", "--json", "--speed-model", _plugin(tmp_path, body))
    assert result.exit_code == 0, result.output
    assert strict_json(result.stdout)["pack"]["avg_jct"] > 1e11


def test_a_trace_where_no_job_fits_is_one_error_line(tmp_path: Path) -> None:
    huge = [f"big{i},{i},resnet50,0,{200 + i},0,0,0,4,1,24000,100" for i in range(7)]
    path = write_rows(tmp_path, *huge)
    message = one_error(simulate("--trace", str(path)), str(path), "big0", "big4", "7 job")
    assert "big5" not in message


def test_jobs_that_never_fit_are_a_warning_and_the_rest_is_simulated(trace: Path, tmp_path: Path) -> None:
    path = write_rows(tmp_path, *ROWS, "huge,0,resnet50,0,500,0,0,0,4,1,24000,100")
    result = simulate("--trace", str(path), "--policy", "pack", "--json")
    assert result.exit_code == 0, result.output
    assert strict_json(result.stdout)["pack"]["jobs"] == len(ROWS)
    warning = result.stderr.strip().splitlines()
    assert len(warning) == 1 and warning[0].startswith("warning: ") and "huge" in warning[0]


def test_recording_writes_every_sample_in_a_few_commits(trace: Path, tmp_path: Path) -> None:
    from sqlalchemy import Engine, event

    from slurm_advisor.sim.clusterfile import read_cluster
    from slurm_advisor.sim.runner import compare
    from slurm_advisor.sim.trace import read_trace
    from slurm_advisor.speedmodels import load_speed_model

    seen: list = []
    compare(read_cluster(CLUSTER), read_trace(trace), load_speed_model("contention"),
            ["slurm-default", "spread"], recorder=seen.extend)
    commits: list[int] = []

    def count(_connection) -> None:
        commits.append(1)

    event.listen(Engine, "commit", count)
    try:
        db = tmp_path / "s.db"
        result = simulate("--trace", str(trace), "--policy", "slurm-default,spread", "--record-to", str(db))
    finally:
        event.remove(Engine, "commit", count)
    assert result.exit_code == 0, result.output
    assert len(seen) > 30  # one sample per touched job per event: many events, few commits
    assert len(commits) <= 3  # the schema upgrade and one batch
    with Store.open(str(db)) as store:
        assert store.count_samples() == len(seen)
