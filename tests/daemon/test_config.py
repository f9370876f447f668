from pathlib import Path

import pytest

from slurm_advisor.daemon.config import DaemonConfig, load_config
from slurm_advisor.errors import InputError


def test_layers_flags_over_environment_over_file(tmp_path):
    file = tmp_path / "config.toml"
    file.write_text('mode = "observe"\nrefresh_s = 5\nsocket = "/tmp/a.sock"\npolicy = "pack"\n')
    env = {"SLURM_ADVISOR_MODE": "enforce", "SLURM_ADVISOR_REFRESH_S": "3", "HOME": "/root"}
    config = load_config(file, env, {"mode": "advise", "socket": None})
    assert config.mode == "advise"            # flag wins
    assert config.refresh_s == 3.0            # environment over file
    assert config.socket == Path("/tmp/a.sock") and config.policy == "pack"  # file over defaults
    assert load_config(None, {}, {}).db == DaemonConfig().db


def test_with_no_config_at_all_the_daemon_only_observes():
    """A site that starts the daemon before writing a config must see nothing change in its jobs."""
    assert load_config(None, {}, {}).mode == "observe"


def test_a_daemon_table_is_read_too(tmp_path):
    file = tmp_path / "config.toml"
    file.write_text('[daemon]\nmode = "observe"\n')
    assert load_config(file, {}, {}).mode == "observe"


@pytest.mark.parametrize(("text", "message"), [
    ('moed = "observe"\n', "unknown setting 'moed'; valid: socket, mode"),
    ('mode = "loud"\n', "mode 'loud'"),
    ('refresh_s = "soon"\n', "refresh_s must be a number"),
    ('refresh_s = -1\n', "refresh_s must be from 0.01 to 86400 s, not -1"),
    ('refresh_s = true\n', "refresh_s must be a number"),
    ('socket = 3\n', "socket must be a path"),
    ('mode = [\n', "not valid TOML"),
])
def test_bad_file_names_the_file_and_key(tmp_path, text, message):
    file = tmp_path / "config.toml"
    file.write_text(text)
    with pytest.raises(InputError, match=message):
        load_config(file, {}, {})


def test_non_utf8_and_missing_files(tmp_path):
    file = tmp_path / "config.toml"
    file.write_bytes(b'mode = "\xff"\n')
    with pytest.raises(InputError, match="not UTF-8"):
        load_config(file, {}, {})
    with pytest.raises(InputError, match="cannot read config"):
        load_config(tmp_path / "missing.toml", {}, {})


def test_environment_is_checked_like_the_file():
    with pytest.raises(InputError, match="environment: SLURM_ADVISOR_REFRESH_S must be a number"):
        load_config(None, {"SLURM_ADVISOR_REFRESH_S": "x"}, {})
    # variables of other tools that share the prefix are not settings and are ignored
    assert load_config(None, {"SLURM_ADVISOR_LAYOUT": "ps=n1;worker=n2"}, {}).mode == "observe"


def test_the_example_config_is_valid():
    example = Path(__file__).resolve().parents[2] / "examples" / "etc" / "config.toml"
    config = load_config(example, {}, {})
    assert config.mode == "observe" and config.source == "slurm" and config.pin_bound_s == 300.0


@pytest.mark.parametrize(("text", "message"), [
    ("refresh_s = 1e308\n", r"refresh_s must be from 0.01 to 86400 s, not 1e\+308"),  # the threads died
    ("client_timeout_s = 1e-9\n", r"client_timeout_s must be from 0.5 to 3600 s"),  # 18 of 20 dropped
    ("refresh_s = inf\n", "refresh_s must be from"),
    ("refresh_s = nan\n", "refresh_s must be from"),
    ("refresh_s = 1e999\n", "refresh_s must be from"),
    ("claim_ttl_s = 0.01\n", "claim_ttl_s must be from"),
    ("pin_bound_s = 1e12\n", "pin_bound_s must be from"),
    ("hold_wait_s = -3\n", "hold_wait_s must be from"),
    ("command_timeout_s = 86400\n", "command_timeout_s must be from"),
    ("ready_keys = 65\n", r"ready_keys must be from 0 to 64"),
    ("ready_keys = " + "9" * 5000 + "\n", "not valid TOML"),  # int() of 4,300+ digits raises
    ("metrics_port = 70000\n", "metrics_port must be a TCP port"),
])
def test_every_number_is_range_checked_naming_the_file_and_range(tmp_path, text, message):
    file = tmp_path / "config.toml"
    file.write_text(text)
    with pytest.raises(InputError, match=message) as raised:
        load_config(file, {}, {})
    assert str(file) in str(raised.value) or "TOML" not in message


@pytest.mark.parametrize(("name", "raw"), [("SLURM_ADVISOR_REFRESH_S", "1e308"),
                                           ("SLURM_ADVISOR_CLIENT_TIMEOUT_S", "nan"),
                                           ("SLURM_ADVISOR_READY_KEYS", "9" * 5000)])
def test_the_environment_is_range_checked_too(name, raw):
    with pytest.raises(InputError, match=f"environment: {name}(: [a-z_]+)? must be"):
        load_config(None, {name: raw}, {})


def test_a_config_built_in_code_is_range_checked_by_validated():
    from dataclasses import replace
    with pytest.raises(InputError, match="refresh_s must be from"):
        replace(DaemonConfig(), refresh_s=float("inf")).validated()
    assert DaemonConfig().validated() == DaemonConfig()  # the defaults are in range
