"""`slurm-advisor db upgrade`: creates or upgrades the store and says at which revision it is."""
from __future__ import annotations

from click.testing import CliRunner

from slurm_advisor.cli.main import _register, cli
from slurm_advisor.store import Store


def test_db_upgrade_creates_the_schema(tmp_path):
    _register()
    path = tmp_path / "new" / "advisor.db"
    result = CliRunner().invoke(cli, ["db", "upgrade", "--db", str(path)])
    assert result.exit_code == 0, result.output
    assert result.output.strip().endswith("at revision 0005") and str(path) in result.output
    with Store.open(str(path), create=False) as store:
        assert store.count_reports() == 0 and store.list_models() == []


def test_db_upgrade_of_a_bad_url_is_one_error_line(tmp_path):
    _register()
    result = CliRunner().invoke(cli, ["db", "upgrade", "--db", "nosuchdialect://u:secret@h/db"])
    assert result.exit_code == 2 and "bad database URL" in result.output and "secret" not in result.output


def _empty_db_commands(tmp_path):
    from pathlib import Path
    repo = Path(__file__).resolve().parents[2]
    cluster, trace = str(repo / "examples/clusters/16x8.toml"), str(repo / "examples/traces/large-mix.csv")
    return [["db", "upgrade", "--db", ""], ["db", "upgrade", "--db", "  "],
            ["serve", "--db", "", "--source", "simulated", "--socket", str(tmp_path / "a.sock")],
            ["decisions", "--db", ""], ["export", "decisions", "--db", "", "--out", str(tmp_path / "d.csv")],
            ["retrain", "--db", "", "--cluster", cluster, "--models-dir", str(tmp_path / "models")],
            ["train", "--from-db", "", "--cluster", cluster, "--trace", trace, "--out", str(tmp_path / "m")],
            ["simulate", "--cluster", cluster, "--trace", trace, "--policy", "pack", "--record-to", ""]]


def test_an_empty_db_is_refused_by_every_command_with_one_message(tmp_path, monkeypatch):
    """`db upgrade --db ""` quietly migrated the default database while `serve --db ""` refused it."""
    import os
    for key in [k for k in os.environ if k.startswith("SLURM_ADVISOR_")]:
        monkeypatch.delenv(key)
    monkeypatch.chdir(tmp_path)  # "" used to resolve to the working directory
    _register()
    for args in _empty_db_commands(tmp_path):
        result = CliRunner().invoke(cli, args)
        assert (result.exit_code, result.output) == (
            2, "error: the database is empty: give a SQLite path or a SQLAlchemy URL\n"), (args, result.output)
    # no database created or migrated, no output written (retrain takes its lock first)
    assert [str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*")] in ([], ["models", "models/.retrain.lock"])
