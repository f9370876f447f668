"""What one peer may cost: connection accounting, the fd limit, the rate-limited log (no sockets)."""
from __future__ import annotations

import logging
import resource
import subprocess
import sys

import pytest

from slurm_advisor.daemon.config import load_config
from slurm_advisor.daemon.limits import (
    FD_HEADROOM,
    Admission,
    ConnectionLimits,
    RateLimitedLog,
    connections_within,
)
from slurm_advisor.errors import InputError


def test_a_peer_gets_its_quota_and_no_more():
    admission = Admission(ConnectionLimits(total=32, per_peer=3))
    assert [admission.admit("uid 1000") for _ in range(3)] == [None] * 3
    assert "uid 1000 holds 3 connections (max_connections_per_uid 3)" in admission.admit("uid 1000")
    assert admission.admit("uid 1001") is None  # another user has its own quota
    admission.release("uid 1000")
    assert admission.admit("uid 1000") is None  # a closed connection gives its place back
    assert admission.open == 4


def test_root_and_the_slurm_user_keep_room_when_every_other_user_holds_its_quota():
    limits = ConnectionLimits(total=32, per_peer=4)
    admission = Admission(limits)
    users = [f"uid {uid}" for uid in range(2000, 2020)]
    refused = [admission.admit(user) for user in users for _ in range(4)]
    assert refused.count(None) == limits.total - limits.reserved
    assert "kept for root and the Slurm user" in next(r for r in refused if r)
    assert [admission.admit(None) for _ in range(limits.reserved)] == [None] * limits.reserved
    assert "32 connections open (max_connections 32)" in admission.admit(None)  # the total binds them too


def test_privileged_peers_have_no_per_peer_quota():
    admission = Admission(ConnectionLimits(total=16, per_peer=1))
    assert [admission.admit(None) for _ in range(16)] == [None] * 16
    for _ in range(16):
        admission.release(None)
    assert admission.open == 0


@pytest.mark.parametrize(("wanted", "soft", "hard", "expected"), [
    (1024, 1024, 524288, (1024, 1024 + FD_HEADROOM)),              # systemd's default: the soft limit is raised
    (1024, 4096, 4096, (1024, 4096)),                               # room already: unchanged
    (1024, 1024, 1024, (1024 - FD_HEADROOM, 1024)),                 # cannot be raised: fewer connections
    (1024, 64, 64, (16, 64)),                                       # never fewer than 16
    (1024, resource.RLIM_INFINITY, resource.RLIM_INFINITY, (1024, resource.RLIM_INFINITY)),
    (1024, 256, resource.RLIM_INFINITY, (1024, 1024 + FD_HEADROOM)),
])
def test_the_total_fits_the_file_descriptor_limit(wanted, soft, hard, expected):
    assert connections_within(wanted, soft, hard) == expected


_FIT = ("import logging, sys; from slurm_advisor.daemon.limits import ConnectionLimits, fd_fitted; "
        "logging.basicConfig(stream=sys.stderr, level=logging.INFO); "
        "print(fd_fitted(ConnectionLimits(1024, 64), logging.getLogger('fit')).total, "
        "*__import__('resource').getrlimit(__import__('resource').RLIMIT_NOFILE))")


@pytest.mark.parametrize(("soft", "hard", "printed", "logged"), [
    (300, 4096, f"1024 {1024 + FD_HEADROOM} 4096", f"raised the soft file descriptor limit from 300 to {1024 + FD_HEADROOM}"),
    (200, 200, f"{200 - FD_HEADROOM} 200 200",
     f"max_connections lowered from 1024 to {200 - FD_HEADROOM}: the file descriptor limit is 200 (hard 200)"),
], ids=["raised", "lowered"])
def test_the_daemon_fits_its_connections_to_its_own_fd_limit(soft, hard, printed, logged):
    proc = subprocess.run([sys.executable, "-c", _FIT], check=False, capture_output=True, text=True, timeout=60,
                          preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard)))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == printed.split()
    assert logged in proc.stderr


class _Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _lines(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records]


def test_a_repeated_event_is_logged_once_per_interval_with_a_count(caplog):
    clock = _Clock()
    limited = RateLimitedLog(logging.getLogger("test.limits"), logging.WARNING, interval_s=10, clock=clock)
    with caplog.at_level(logging.WARNING, logger="test.limits"):
        for i in range(15_603):
            limited("refused uid %d", i)
            clock.now += 0.0005
        assert _lines(caplog) == ["refused uid 0"]
        limited.flush()  # the interval is not over: nothing yet
        clock.now = 110.5
        limited.flush()  # over, and held back: the latest, with how many more
        assert _lines(caplog)[1] == "refused uid 15602; 15,601 more in the last 10 s"
        limited.flush()
        clock.now = 200.0
        limited("refused uid %d", 7)  # a quiet interval later: at once, with no count
    assert _lines(caplog)[2:] == ["refused uid 7"]


def test_an_event_after_the_interval_carries_the_count_of_those_held_back(caplog):
    clock = _Clock()
    limited = RateLimitedLog(logging.getLogger("test.limits"), logging.ERROR, interval_s=10, clock=clock)
    with caplog.at_level(logging.ERROR, logger="test.limits"):
        limited("accept failed: %s", "EMFILE")
        clock.now += 1
        limited("accept failed: %s", "ENFILE")
        clock.now += 10
        limited("accept failed: %s", "EMFILE")
    assert _lines(caplog) == ["accept failed: EMFILE", "accept failed: EMFILE; 1 more in the last 11 s"]


def test_connection_limits_out_of_range_name_the_valid_range():
    def refused(**settings) -> str:
        with pytest.raises(InputError) as caught:
            load_config(None, {}, settings)
        return str(caught.value)

    assert refused(max_connections=8) == "flag: max_connections must be from 16 to 65536, not 8"
    assert refused(max_connections=100_000) == "flag: max_connections must be from 16 to 65536, not 100000"
    assert refused(max_connections_per_uid=0) == "flag: max_connections_per_uid must be from 1 to 65536, not 0"
    assert refused(max_connections_per_uid="many") == "flag: max_connections_per_uid must be a whole number, not 'many'"
    # a per-uid quota above the total is the total (nothing to refuse): 16 then
    assert load_config(None, {}, {"max_connections": 16, "max_connections_per_uid": 64}).max_connections == 16


def test_connection_limits_are_read_from_every_layer(tmp_path):
    file = tmp_path / "config.toml"
    file.write_text("max_connections = 256\n")
    config = load_config(file, {"SLURM_ADVISOR_MAX_CONNECTIONS_PER_UID": "8"}, {})
    assert (config.max_connections, config.max_connections_per_uid) == (256, 8)
