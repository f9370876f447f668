"""Helpers of the daemon tests: a fixed in-memory cluster, the hook's fields, a daemon over them."""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from slurm_advisor.advisor import Advisor
from slurm_advisor.daemon.config import DaemonConfig
from slurm_advisor.daemon.daemon import Daemon
from slurm_advisor.daemon.queue import NoQueue
from slurm_advisor.daemon.service import AdviceService
from slurm_advisor.domain import ClusterSnapshot, Node
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


def make_daemon(tmp_path: Path, *, mode: str = "advise", policy=None, express=identity, store=True,
                **config) -> Daemon:
    cfg = replace(DaemonConfig(), socket=tmp_path / "advisor.sock", mode=mode, refresh_s=0.05,
                  db=str(tmp_path / "advisor.db"), client_timeout_s=0.5, **config)
    service = AdviceService(Advisor(policy or SlurmDefaultPolicy()), express)
    return Daemon(cfg, StaticSource(ClusterSnapshot.empty(NODES)), NoQueue(), service,
                  Store.open(cfg.db) if store else None)


