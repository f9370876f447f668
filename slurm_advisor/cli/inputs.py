"""Inputs the commands share, checked once at the edge: the cluster, the trace, and the fit of one
to the other (a job that can never fit is a warning; a trace where none fits is an error)."""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import click

from slurm_advisor.domain import ClusterSnapshot, Job, Node
from slurm_advisor.errors import InputError

_SHOWN = 5  # job ids named in a message; the rest are counted


def read_inputs(cluster: Path, trace: Path) -> tuple[tuple[Node, ...], list[Job]]:
    """The cluster and the trace; warns on stderr about jobs that can never fit, refuses a trace
    where none fits (naming the first few and the count)."""
    from slurm_advisor.sim.clusterfile import read_cluster
    from slurm_advisor.sim.trace import read_trace

    nodes, jobs = read_cluster(cluster), read_trace(trace)
    never = never_fitting(nodes, jobs)
    if len(never) == len(jobs):
        raise InputError(f"{trace}: no job fits on the cluster of {cluster} even when it is empty: "
                         f"{_named(never)}")
    if never:
        click.echo(f"warning: {trace}: {_named(never)} can never fit on the cluster of {cluster} "
                   "and are not simulated", err=True)
    return nodes, jobs


def never_fitting(nodes: Sequence[Node], jobs: Sequence[Job]) -> list[str]:
    """Ids of the jobs that Slurm's own rule cannot place even on the empty cluster (as the simulator
    decides which jobs it skips)."""
    from slurm_advisor.policies.slurm_default import SlurmDefaultPolicy

    empty, rule = ClusterSnapshot.empty(tuple(nodes)), SlurmDefaultPolicy()
    fits: dict[tuple, bool] = {}
    out = []
    for job in jobs:
        shape = (job.num_ps, job.num_workers, job.ps_demand, job.worker_demand)
        if shape not in fits:
            fits[shape] = rule.place(empty, job) is not None
        if not fits[shape]:
            out.append(job.id)
    return out


def _named(ids: Sequence[str]) -> str:
    shown = ", ".join(ids[:_SHOWN])
    more = f" and {len(ids) - _SHOWN} more" if len(ids) > _SHOWN else ""
    return f"{len(ids)} job(s) ({shown}{more})"
