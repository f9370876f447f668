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
    assert result.output.strip().endswith("at revision 0003") and str(path) in result.output
    with Store.open(str(path), create=False) as store:
        assert store.count_reports() == 0 and store.list_models() == []


def test_db_upgrade_of_a_bad_url_is_one_error_line(tmp_path):
    _register()
    result = CliRunner().invoke(cli, ["db", "upgrade", "--db", "nosuchdialect://u:secret@h/db"])
    assert result.exit_code == 2 and "bad database URL" in result.output and "secret" not in result.output
