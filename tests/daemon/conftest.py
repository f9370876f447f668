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
