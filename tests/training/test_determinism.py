"""Training is deterministic for a seed on one machine: the same samples, trace and Hyper give
bit-identical networks in two processes, whatever the process's hash seed or thread settings."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

SCRIPT = """
import hashlib, sys
from dataclasses import replace
from slurm_advisor.experiments.experiment import record
from slurm_advisor.learned.hyper import Hyper
from slurm_advisor.training.train import train
from slurm_advisor.domain import Node
from slurm_advisor.traces.synthetic import synthetic_jobs
from slurm_advisor.speedmodels.contention import ContentionSpeedModel
nodes = tuple(Node(f"n{i:02d}", 32, 8, 256_000, "s1" if i < 2 else "s2") for i in range(4))
jobs = synthetic_jobs(30, seed=5, mix="large", arrival_rate_per_h=1.0)
samples = record(nodes, jobs, ContentionSpeedModel(), ("slurm-default", "random"), seed=0)
hp = replace(Hyper(seed=3), speed_epochs=6, speed_hidden=32, hidden=16, warm_episodes=1, warm_epochs=4,
             rl_episodes=2, episode_jobs=15, updates_per_episode=2, minibatch=64)
report = train(samples, nodes, jobs, hp, log=lambda m: None)
digest = hashlib.sha256()
for net in (report.policy, report.speed):
    for name, tensor in sorted(net.state_dict().items()):
        digest.update(name.encode())
        digest.update(tensor.detach().contiguous().numpy().tobytes())
print(digest.hexdigest(), report.deploy)
"""


def _train(**env: str) -> str:
    done = subprocess.run([sys.executable, "-c", SCRIPT], env={**os.environ, **env},
                          capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip()


@pytest.mark.slow
def test_same_seed_same_networks_across_processes_and_threads() -> None:
    first = _train(PYTHONHASHSEED="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    second = _train(PYTHONHASHSEED="2", OMP_NUM_THREADS="2", MKL_NUM_THREADS="2")
    assert first == second
