"""The mode set at run time outlives a restart of a real daemon (build_daemon, its socket, the admin
CLI in-process) until `mode --reset`; a state file that cannot be read or written is said, not fatal."""
from __future__ import annotations

import json
import logging
from contextlib import contextmanager
from dataclasses import replace

import pytest
from click.testing import CliRunner
from daemon_helpers import make_daemon

from slurm_advisor.cli.main import cli
from slurm_advisor.daemon.build import build_daemon
from slurm_advisor.daemon.config import DaemonConfig
from slurm_advisor.daemon.protocol import ProtocolError
from slurm_advisor.daemon.server import AdvisorServer, ServerThread

pytestmark = pytest.mark.usefixtures("cli_env")


def site_config(tmp_path, **changes) -> DaemonConfig:
    return replace(DaemonConfig(), **{"source": "simulated", "policy": "slurm-default", "mode": "advise",
                                       "refresh_s": 0.05, "db": str(tmp_path / "advisor.db"),
                                       "socket": tmp_path / "advisor.sock", "models_dir": tmp_path / "models",
                                       **changes})


@contextmanager
def serving(config: DaemonConfig):
    """The daemon `serve` builds, started and answering on its socket; stopped on exit (a restart
    is leaving one of these and entering another)."""
    daemon = build_daemon(config)
    daemon.start()
    try:
        with ServerThread(AdvisorServer(config.socket, daemon.dispatcher(), 2.0)):
            yield daemon
    finally:
        daemon.stop()


def run(*args: str, code: int = 0):
    result = CliRunner().invoke(cli, list(args))
    assert result.exit_code == code, result.output
    return result


def test_a_mode_set_at_run_time_survives_a_restart_until_reset(tmp_path, caplog):
    config = site_config(tmp_path)
    sock, kept = str(config.socket), tmp_path / "advisor.db.mode.json"
    with serving(config) as daemon:
        assert daemon.status()["mode_source"] == "config"
        switched = run("mode", "observe", "--socket", sock).stdout
        assert "mode: advise -> observe (set at run time" in switched and f"kept in {kept}" in switched
    assert json.loads(kept.read_text())["mode"] == "observe"
    with caplog.at_level(logging.INFO, logger="slurm_advisor.daemon"), serving(config) as daemon:  # restarted
        assert daemon.state.mode == "observe"
        assert any("mode observe: set at run time" in r.message and str(kept) in r.message and
                   "over the config's advise" in r.message for r in caplog.records)
        status = json.loads(run("status", "--db", config.db, "--socket", sock, "--json").stdout)["daemon"]
        assert (status["mode"], status["mode_source"], status["config_mode"], status["mode_file"]) == (
            "observe", "override", "advise", str(kept))
        assert "observe mode (set at run time" in run("status", "--db", config.db, "--socket", sock).stdout
        assert "mode: observe -> advise (the config's)" in run("mode", "--reset", "--socket", sock).stdout
        daemon.mode_keeper.flush()  # written by the keeper's thread, off the request loop
        assert daemon.state.mode == "advise" and not kept.exists()
    with serving(config) as daemon:  # restarted after the reset: the config's mode
        assert daemon.state.mode == "advise" and daemon.status()["mode_source"] == "config"


def test_an_unreadable_mode_file_leaves_the_config_mode_and_status_says_why(tmp_path):
    config = site_config(tmp_path, mode="observe")
    (tmp_path / "advisor.db.mode.json").write_text("{not json")
    with serving(config) as daemon:
        status = daemon.status()
        assert daemon.state.mode == "observe" and status["mode_source"] == "config"
        assert "cannot read" in status["mode_problem"] and "the config's mode serves" in status["mode_problem"]
        daemon.switch_mode("advise")  # a switch writes the file whole again
    with serving(config) as daemon:
        assert daemon.state.mode == "advise" and daemon.status()["mode_problem"] is None


def test_a_mode_that_cannot_be_kept_is_switched_and_status_says_why(tmp_path):
    (tmp_path / "plain-file").write_text("")
    config = site_config(tmp_path, mode_file=tmp_path / "plain-file" / "mode.json")  # its directory is a file
    with serving(config) as daemon:
        assert "mode: advise -> enforce" in run("mode", "enforce", "--socket", str(config.socket)).stdout
        daemon.mode_keeper.flush()
        assert daemon.state.mode == "enforce"
        text = run("status", "--db", config.db, "--socket", str(config.socket)).stdout
        problem = daemon.status()["mode_problem"]
        assert problem.startswith("cannot write") and "a restart starts in the config's mode" in problem
        assert f"mode file: {problem}" in text


def test_a_burst_of_switches_is_one_write_of_the_last_and_a_stop_writes_what_is_pending(tmp_path):
    config = site_config(tmp_path)
    with serving(config) as daemon:
        for mode in ("observe", "enforce") * 50 + ("observe",):
            daemon.switch_mode(mode)
    assert json.loads((tmp_path / "advisor.db.mode.json").read_text())["mode"] == "observe"


def test_without_a_durable_store_a_switch_says_it_is_not_kept(tmp_path):
    daemon = make_daemon(tmp_path, store=False)
    daemon.start()
    try:
        reply = daemon.switch_mode("observe")
        assert reply["mode"] == "observe" and "not kept across a restart" in reply["warning"]
        assert "warning" not in daemon.switch_mode(None, reset=True)
        with pytest.raises(ProtocolError, match="'reset' must be true or false"):
            daemon.switch_mode(None, reset="yes")
    finally:
        daemon.stop()


def test_mode_takes_a_mode_or_reset(tmp_path):
    assert "give a mode" in run("mode", "--socket", str(tmp_path / "none.sock"), code=2).stderr
    assert "give a mode" in run("mode", "advise", "--reset", "--socket", str(tmp_path / "none.sock"), code=2).stderr
