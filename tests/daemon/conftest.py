"""A daemon on a real Unix socket in a temporary directory, over a fixed in-memory cluster."""
from __future__ import annotations

from collections.abc import Iterator

import pytest
from daemon_helpers import make_daemon

from slurm_advisor.daemon.daemon import Daemon
from slurm_advisor.daemon.server import AdvisorServer, ServerThread
from slurm_advisor.policies import Policy


@pytest.fixture
def policy() -> Policy | None:
    """None: slurm-default; a test that needs another parametrizes ``policy``."""
    return None


@pytest.fixture
def daemon(tmp_path, policy) -> Iterator[Daemon]:
    d = make_daemon(tmp_path, policy=policy)
    d.start()
    yield d
    d.stop()


@pytest.fixture
def served(daemon) -> Iterator[Daemon]:
    server = AdvisorServer(daemon.config.socket, daemon.dispatcher(), daemon.config.client_timeout_s)
    with ServerThread(server):
        yield daemon


@pytest.fixture(scope="session")
def munged() -> Iterator[str]:
    """A private munged (its own key and socket, run as the munge user, stopped by PID): the
    socket path. Skipped where munged cannot run (not root, not installed) unless the Slurm
    testbed is expected (CI), where that is a failure."""
    import os
    import shutil
    import subprocess
    import tempfile
    import time
    from pathlib import Path

    def unavailable(why: str):
        if os.environ.get("SLURM_ADVISOR_TEST_SLURM"):
            pytest.fail(f"munged is needed here: {why}")
        pytest.skip(f"needs munged: {why}")

    if os.geteuid() != 0 or not shutil.which("munged") or not shutil.which("runuser"):
        unavailable("run as root with munge installed (apt-get install munge)")
    import pwd
    try:
        user = pwd.getpwnam("munge")
    except KeyError:
        unavailable("no munge user")
    # not under pytest's tmp root: that is private to root, and munged runs as the munge user
    root = Path(tempfile.mkdtemp(prefix="slurm-advisor-munge-"))
    os.chmod(root, 0o755)
    os.chown(root, user.pw_uid, user.pw_gid)
    key = root / "munge.key"
    key.write_bytes(os.urandom(1024))
    os.chown(key, user.pw_uid, user.pw_gid)
    os.chmod(key, 0o400)
    sock, pidfile = root / "munge.socket", root / "munged.pid"
    subprocess.run(["runuser", "-u", "munge", "--", "munged", f"--socket={sock}", f"--key-file={key}",
                    f"--pid-file={pidfile}", f"--log-file={root / 'munged.log'}", f"--seed-file={root / 'seed'}"],
                   check=True, timeout=30)
    deadline = time.monotonic() + 10
    while not (sock.exists() and pidfile.exists()) and time.monotonic() < deadline:
        time.sleep(0.05)
    yield str(sock)
    try:
        os.kill(int(pidfile.read_text().split()[0]), 15)
    except (OSError, ValueError):
        pass
    shutil.rmtree(root, ignore_errors=True)
