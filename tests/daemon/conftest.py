"""A daemon on a real Unix socket in a temporary directory, over a fixed in-memory cluster."""
from __future__ import annotations

from collections.abc import Iterator

import pytest
from daemon_helpers import make_daemon

from slurm_advisor.daemon.daemon import Daemon
from slurm_advisor.daemon.server import AdvisorServer, ServerThread


@pytest.fixture
def daemon(tmp_path) -> Iterator[Daemon]:
    d = make_daemon(tmp_path)
    d.start()
    yield d
    d.stop()


@pytest.fixture
def served(daemon) -> Iterator[Daemon]:
    server = AdvisorServer(daemon.config.socket, daemon.dispatcher(), daemon.config.client_timeout_s)
    with ServerThread(server):
        yield daemon
