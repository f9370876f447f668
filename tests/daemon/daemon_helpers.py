"""Helpers of the daemon tests: a fixed in-memory cluster, the hook's fields, a daemon over them."""
from __future__ import annotations

import json
import os
import socket
import time
from dataclasses import replace
from pathlib import Path

from slurm_advisor.advisor import Advisor
from slurm_advisor.daemon.config import DaemonConfig
from slurm_advisor.daemon.daemon import Daemon
from slurm_advisor.daemon.queue import NoQueue
from slurm_advisor.daemon.service import AdviceService
from slurm_advisor.domain import ClusterSnapshot, Node, Placement
from slurm_advisor.policies.base import Hold
from slurm_advisor.policies.slurm_default import SlurmDefaultPolicy
from slurm_advisor.store import Store

NODES = tuple(Node(f"n{i}", 8, 4, 32000) for i in range(1, 5))


class StaticSource:
    name = "static"

    def __init__(self, snapshot: ClusterSnapshot):
        self.current = snapshot
        self.reads = 0

    def snapshot(self) -> ClusterSnapshot:
        self.reads += 1
        return self.current


def marked(ps: int = 0, workers: int = 2, gpus: int = 1, cpus: int = 1, **extra) -> dict:
    """The fields job_submit.lua sends for `sbatch -n ps+workers --gpus-per-task gpus --comment marker`."""
    return {"comment": f"slurm-advisor: type=resnet50 ps={ps} workers={workers}", "num_tasks": ps + workers,
            "cpus_per_task": cpus, "pn_min_memory": 1000, "mem_per_cpu": True,
            "tres_per_task": f"gres:gpu:{gpus}" if gpus else None, "user_id": 1000, **extra}


def identity(snapshot, job, placement):
    return placement


class Fixed:
    """A policy that puts the job's tasks (PS first) on ``nodes``, in task order."""

    name = "fixed"

    def __init__(self, *nodes: str):
        self.nodes = list(nodes)

    def place(self, snapshot, job, rng=None):
        return Placement.of(job, self.nodes)

    def score_nodes(self, snapshot, job):
        return {}


def make_daemon(tmp_path: Path, *, mode: str = "advise", policy=None, express=identity, store=True,
                queue=None, source=None, **config) -> Daemon:
    cfg = replace(DaemonConfig(), **{"socket": tmp_path / "advisor.sock", "mode": mode, "refresh_s": 0.05,
                                     "db": str(tmp_path / "advisor.db"), "client_timeout_s": 0.5, **config})
    service = AdviceService(Advisor(policy or SlurmDefaultPolicy()), express)
    return Daemon(cfg, source or StaticSource(ClusterSnapshot.empty(NODES)), queue or NoQueue(), service,
                  Store.open(cfg.db) if store else None)




def raw_exchange(path, data: bytes, timeout=2.0) -> bytes:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        s.connect(str(path))
        s.sendall(data)
        chunks = []
        while True:
            try:
                chunk = s.recv(65536)
            except TimeoutError:
                break
            if not chunk:
                break
            chunks.append(chunk)
            if chunk.endswith(b"\n"):
                break
        return b"".join(chunks)


def exchange_as_nobody(path, line: bytes) -> dict:
    """The reply to ``line`` from a client process running as uid 65534 (nobody); needs root."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: drop to nobody, then connect (peer credentials are taken at connect)
        try:
            os.close(read)
            os.setgid(65534)
            os.setuid(65534)
            os.write(write, raw_exchange(path, line))
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        data = pipe.read()
    os.waitpid(pid, 0)
    return json.loads(data)


def until(done, timeout_s: float = 10.0, what: str = "the awaited state") -> None:
    """Poll ``done`` until it is true, failing after ``timeout_s``: only for a daemon in another
    process, which offers no event to wait on."""
    deadline = time.monotonic() + timeout_s
    while not done():
        assert time.monotonic() < deadline, f"{what}: not within {timeout_s:g} s"
        time.sleep(0.01)


def refreshed(daemon: Daemon) -> None:
    """One full refresh of ``daemon`` now, in this thread (beside its refresh thread, never at
    once with it): the daemon has then read what the test changed before the call."""
    daemon.refresher.refresh_once()


class Holding:
    """A policy that always holds its job for one switch (a cap of one node)."""

    name = "holder"

    def place(self, snapshot, job, rng):
        return Hold("waiting for one switch", max_nodes=1)

    def score_nodes(self, snapshot, job):
        return {}
