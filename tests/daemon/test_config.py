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


def test_a_daemon_table_is_read_too(tmp_path):
    file = tmp_path / "config.toml"
    file.write_text('[daemon]\nmode = "observe"\n')
    assert load_config(file, {}, {}).mode == "observe"


@pytest.mark.parametrize(("text", "message"), [
    ('moed = "observe"\n', "unknown setting 'moed'; valid: socket, mode"),
    ('mode = "loud"\n', "mode 'loud'"),
    ('refresh_s = "soon"\n', "refresh_s must be a number"),
    ('refresh_s = -1\n', "refresh_s must be positive"),
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
    assert load_config(None, {"SLURM_ADVISOR_LAYOUT": "ps=n1;worker=n2"}, {}).mode == "advise"


def test_the_example_config_is_valid():
    example = Path(__file__).resolve().parents[2] / "examples" / "etc" / "config.toml"
    config = load_config(example, {}, {})
    assert config.mode == "observe" and config.source == "slurm" and config.pin_bound_s == 300.0
