"""Offered load: how busy a trace would keep a cluster if every job ran alone.

Benchmarks and the demo scale a trace's arrival times to a chosen offered load, so that the
cluster is loaded (jobs queue, placement matters) without a backlog that grows without end,
whatever the ground truth makes of the jobs' durations.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from slurm_advisor.domain import Job, Node
from slurm_advisor.policies.isolated import IsolatedSpeeds
from slurm_advisor.speedmodels.base import SpeedModel


def offered_load(jobs: Sequence[Job], nodes: Sequence[Node], truth: SpeedModel) -> float:
    """GPU-seconds asked for (each job alone, consolidated) over GPU-seconds the arrival span offers."""
    isolated = IsolatedSpeeds(truth, nodes)
    gpu_s = sum(j.iterations / isolated(j) * j.total_demand().gpus for j in jobs)
    span = max(j.submit_time for j in jobs) - min(j.submit_time for j in jobs)
    gpus = sum(n.gpus for n in nodes)
    return gpu_s / (gpus * span) if span > 0 and gpus else float("inf")


def at_offered_load(jobs: Sequence[Job], nodes: Sequence[Node], truth: SpeedModel, load: float) -> list[Job]:
    """The same jobs with arrival times stretched or squeezed to give ``load``."""
    factor = offered_load(jobs, nodes, truth) / load
    t0 = min(j.submit_time for j in jobs)
    return [replace(j, submit_time=(j.submit_time - t0) * factor) for j in jobs]
