"""SimulatedSource: a cluster file plus a running load the caller starts, finishes or draws."""
from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest

from slurm_advisor.cluster.simulated import SimulatedSource
from slurm_advisor.domain import Job, Placement, Resources, RunningJob
from slurm_advisor.errors import InputError

REPO = Path(__file__).resolve().parents[2]


def job(job_id: str, workers: int = 2, gpus: int = 1) -> Job:
    return Job(job_id, "resnet50", 0, workers, Resources(), Resources(2, gpus, 4000), 1000.0)


def held_everywhere(snap) -> bool:
    """Free plus what the running jobs hold is every node's capacity (no half-applied change)."""
    total = snap.free_array().copy()
    for rj in snap.running:
        for name, d in rj.placement.demand_per_node(rj.job).items():
            total[snap.index(name)] += (d.cpus, d.gpus, d.mem_mb)
    return bool((total == snap.layout.capacity).all())


def test_default_cluster_is_the_embedded_one():
    snap = SimulatedSource().snapshot()
    assert len(snap.nodes) == 8 and snap.total_capacity().gpus == 64 and not snap.running


def test_cluster_file_and_initial_running_jobs():
    first = SimulatedSource(REPO / "examples/clusters/16x8.toml").snapshot().nodes[0].name
    j = job("a")
    source = SimulatedSource(REPO / "examples/clusters/16x8.toml",
                             running=[RunningJob(j, Placement.of(j, [first, first]), 3.0)])
    snap = source.snapshot()
    assert len(snap.nodes) == 16 and snap.running_job("a").start_time == 3.0
    assert snap.free[first].gpus == snap.node(first).gpus - 2


def test_bad_cluster_file_is_an_input_error(tmp_path):
    with pytest.raises(InputError):
        SimulatedSource(tmp_path / "missing.toml")


def test_start_and_finish():
    source = SimulatedSource()
    before = source.snapshot()
    name = before.nodes[0].name
    source.start(job("a"), Placement.of(job("a"), [name, name]), time=10.0)
    assert source.snapshot().free[name] == before.free[name] - Resources(4, 2, 8000)
    assert before.free[name] == before.node(name).capacity  # snapshots are values: the old one is unchanged
    with pytest.raises(ValueError, match="does not fit"):
        source.start(job("big", workers=1, gpus=99), Placement.of(job("big", 1, 99), [name]))
    source.finish("a", time=20.0)
    assert source.snapshot().free[name] == before.free[name] and source.snapshot().time == 20.0
    with pytest.raises(KeyError):
        source.finish("a")


def test_fill_reaches_about_the_share_and_never_past_it():
    source = SimulatedSource()
    ids = source.fill(0.6, np.random.default_rng(1))
    assert 0.45 <= source.gpu_share() <= 0.6
    assert len(ids) == len(source.snapshot().running) and len(set(ids)) == len(ids)
    assert held_everywhere(source.snapshot())
    again = SimulatedSource()
    assert again.fill(0.6, np.random.default_rng(1)) == ids  # same generator, same load
    with pytest.raises(ValueError, match="fraction"):
        source.fill(1.5, np.random.default_rng(0))


def test_fill_then_more_keeps_ids_unique():
    source = SimulatedSource()
    first = source.fill(0.3, np.random.default_rng(2), mix="philly")
    second = source.fill(0.5, np.random.default_rng(3), mix="philly")
    assert not set(first) & set(second) and source.gpu_share() <= 0.5


def test_snapshots_from_another_thread_are_always_whole():
    source = SimulatedSource()
    nodes = [n.name for n in source.snapshot().nodes]
    seen, stop = [], threading.Event()

    def read() -> None:
        while not stop.is_set():
            seen.append(held_everywhere(source.snapshot()))

    reader = threading.Thread(target=read)
    reader.start()
    for k in range(300):
        j = job(f"j{k}")
        source.start(j, Placement.of(j, [nodes[k % 8], nodes[(k + 1) % 8]]))
        source.finish(j.id)
    stop.set()
    reader.join()
    assert seen and all(seen)
