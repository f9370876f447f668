"""`slurm-advisor setup`: the config in observe mode, the state directory, and units or cron lines
that run this environment's command; an admin's edits kept unless --replace, then kept as .bak."""
from __future__ import annotations

import sys
from pathlib import Path

from click.testing import CliRunner

from slurm_advisor.cli.main import cli
from slurm_advisor.daemon.config import load_config
from slurm_advisor.site_setup import UNITS

COMMAND = f"{sys.prefix}/bin/slurm-advisor"


def setup(root: Path, *args: str) -> str:
    result = CliRunner().invoke(cli, ["setup", "--root", str(root), *args])
    assert result.exit_code == 0, result.output
    return result.output


def test_a_fresh_root_gets_config_state_and_units_for_this_environment(tmp_path):
    out = setup(tmp_path)
    config = tmp_path / "etc/slurm-advisor/config.toml"
    assert load_config(config, {}, {}).mode == "observe"
    assert (tmp_path / "var/lib/slurm-advisor/models").is_dir()
    units = tmp_path / "etc/systemd/system"
    assert sorted(p.name for p in units.iterdir()) == sorted(UNITS)
    service = (units / "slurm-advisor.service").read_text()
    assert f"ExecStart={COMMAND} serve --config /etc/slurm-advisor/config.toml\n" in service
    assert "/usr/local/bin" not in "".join(p.read_text() for p in units.iterdir())
    assert not (tmp_path / "etc/cron.d").exists()
    assert "install.sh /etc/slurm" in out and "observe mode" in out


def test_cron_and_another_slurm_user(tmp_path):
    setup(tmp_path, "--cron", "--slurm-user", "slurmctl")
    cron = (tmp_path / "etc/cron.d/slurm-advisor").read_text()
    assert f"* * * * * slurmctl {COMMAND} release --config /etc/slurm-advisor/config.toml" in cron
    assert load_config(tmp_path / "etc/slurm-advisor/config.toml", {}, {}).slurm_user == "slurmctl"
    assert not (tmp_path / "etc/systemd").exists()


def test_a_second_run_keeps_an_admins_edits_unless_replace(tmp_path):
    setup(tmp_path)
    config = tmp_path / "etc/slurm-advisor/config.toml"
    edited = config.read_text().replace('mode = "observe"', 'mode = "advise"')
    config.write_text(edited)
    out = setup(tmp_path)
    assert config.read_text() == edited and f"kept {config}" in out
    assert f"unchanged {tmp_path / 'etc/systemd/system/slurm-advisor.service'}" in out
    setup(tmp_path, "--replace")
    assert 'mode = "observe"' in config.read_text()
    assert config.with_name("config.toml.bak").read_text() == edited
