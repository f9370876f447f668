"""The default cluster-state source: Slurm's own commands, read as JSON.

``sinfo --json`` gives the nodes (on Slurm 23.02+, whose ``sinfo --json`` groups nodes, the
source reads ``scontrol --json show nodes`` instead, once it has seen the grouped form),
``squeue -O`` the running jobs (squeue_lines.py: 22.05's ``--json`` lists every job however filtered), ``scontrol show topology`` the leaf switches, or under topology/block its
blocks (``blocks``: which pins Slurm takes there, slurm/blocks.py). Every command
is an argument list run with a timeout and SLURM_CONF passed in its environment, never a shell.
Parsing lives in :mod:`slurm_advisor.cluster.slurm_json`; :func:`build_snapshot` (pure) turns
the readings into the domain's snapshot.
"""
from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import time
from collections.abc import Sequence
from typing import Any

from slurm_advisor.cluster.base import SourceError
from slurm_advisor.cluster.slurm_json import (
    JobReading,
    NodeReading,
    describe_topology,
    node_shares,
    parse_sinfo,
    parse_squeue,
    parse_topology,
    read_blocks,
)
from slurm_advisor.cluster.squeue_lines import RUNNING, parse_running
from slurm_advisor.domain import ClusterSnapshot, Job, Placement, Resources, RunningJob
from slurm_advisor.slurm.blocks import Blocks
from slurm_advisor.slurm.marker import MarkerError, parse_marker

__all__ = ["SlurmCliSource", "build_snapshot", "parse_sinfo", "parse_squeue", "parse_topology",
           "running_job"]

SINFO = ["sinfo", "--json"]
SCONTROL_NODES = ["scontrol", "--json", "show", "nodes"]
SQUEUE = ["squeue", "--json"]
TOPOLOGY = ["scontrol", "show", "topology"]


class SlurmCliSource:
    """The cluster that ``slurm_conf`` (default: the environment's SLURM_CONF) names."""

    name = "slurm"

    def __init__(self, slurm_conf: str | None = None, timeout_s: float = 10):
        if not timeout_s > 0:
            raise SourceError(f"timeout_s must be positive, not {timeout_s!r}")
        self.timeout_s = float(timeout_s)
        self.env = dict(os.environ)
        if slurm_conf is not None:
            self.env["SLURM_CONF"] = str(slurm_conf)
        self._nodes_command = SINFO  # becomes SCONTROL_NODES once sinfo answers in groups
        self.topology: dict[str, Any] | None = None  # what the last reading found (describe_topology)
        self.blocks: Blocks | None = None  # topology/block's blocks in that reading (the daemon takes the first)

    def snapshot(self) -> ClusterSnapshot:
        nodes = self._nodes()
        jobs = parse_running(self._text(RUNNING))
        text = self._topology()
        switches = parse_topology(text)
        self.blocks = read_blocks(text)
        self.topology = describe_topology(switches, self.blocks)
        return build_snapshot(nodes, jobs, switches, time.time())

    def _nodes(self) -> tuple[NodeReading, ...]:
        doc = self._json(self._nodes_command)
        if self._nodes_command is SINFO and isinstance(doc, dict) and "nodes" not in doc and "sinfo" in doc:
            self._nodes_command = SCONTROL_NODES
            doc = self._json(SCONTROL_NODES)
        return parse_sinfo(doc)

    def _topology(self) -> str:
        # Without topology/tree, 22.05 prints "No topology information available" on stderr
        # and exits 0; later releases may exit 1 with the same words. Both mean no switches.
        out, err, rc = self._run(TOPOLOGY)
        if rc != 0 and "no topology" not in err.lower():
            raise SourceError(f"{' '.join(TOPOLOGY)}: exit {rc}: {_last_line(err or out)}")
        return out

    def _text(self, args: Sequence[str]) -> str:
        out, err, rc = self._run(args)
        if rc != 0:
            raise SourceError(f"{' '.join(args[:2])}: exit {rc}: {_last_line(err or out)}")
        return out

    def _json(self, args: Sequence[str]) -> Any:
        out = self._text(args)
        try:
            return json.loads(out)
        except json.JSONDecodeError as exc:
            raise SourceError(f"{' '.join(args)}: not JSON ({exc.msg} at line {exc.lineno})") from None

    def _run(self, args: Sequence[str]) -> tuple[str, str, int]:
        try:
            proc = subprocess.run(list(args), capture_output=True, text=True, env=self.env,
                                  timeout=self.timeout_s, check=False)
        except FileNotFoundError:
            raise SourceError(f"{args[0]}: not found; is Slurm's client installed and on PATH?") from None
        except subprocess.TimeoutExpired:
            raise SourceError(f"{' '.join(args)}: no answer in {self.timeout_s:g} s") from None
        except OSError as exc:
            raise SourceError(f"{args[0]}: {exc.strerror}") from None
        return proc.stdout, proc.stderr, proc.returncode


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1][-300:] if lines else "(no output)"


def build_snapshot(nodes: Sequence[NodeReading], jobs: Sequence[JobReading],
                   switches: dict[str, str], now: float) -> ClusterSnapshot:
    """The snapshot from Slurm's readings. Free capacity is Slurm's own (all jobs already
    counted); only the jobs whose comment carries the advisor's marker become running jobs."""
    layout = tuple(dataclasses.replace(r.node, switch=switches.get(r.node.name)) for r in nodes)
    known = {n.name for n in layout}
    running = []
    for reading in jobs:
        rj = running_job(reading)
        if rj is not None and set(reading.nodes) <= known:
            running.append(rj)
    return ClusterSnapshot(layout, {r.node.name: r.free for r in nodes}, tuple(running), now)


def running_job(reading: JobReading) -> RunningJob | None:
    """The advisor's view of a marked running job; None for a job without a (valid) marker.

    A malformed marker on a job that already runs is not this source's error to report: the
    job is then treated as any foreign job (its capacity is in sinfo's numbers already).
    """
    try:
        marker = parse_marker(reading.comment)
    except MarkerError:
        return None
    if marker is None:
        return None
    tasks = marker.ps + marker.workers
    # Slurm gives every task the same demand; the job's totals divided by its tasks.
    demand = Resources(reading.cpus // tasks, reading.gpus // tasks, reading.mem_mb // tasks)
    job = Job(reading.job_id, marker.type, marker.ps, marker.workers, demand, demand,
              marker.iters or 1.0, submit_time=reading.start_time, user=reading.user,
              model_size_mb=marker.model_mb, batch_size=marker.batch, time_limit_s=reading.time_limit_s)
    return RunningJob(job, Placement.of(job, _task_nodes(reading, tasks)), reading.start_time)


def _task_nodes(reading: JobReading, tasks: int) -> list[str]:
    """The node of each task, PS first: the layout the job chose is in its environment, which
    squeue does not show, so tasks fill the job's nodes in node order, as many on each as its
    share of the job's CPUs there (an even split where squeue gives no per-node numbers)."""
    weights = [reading.cpus_on.get(n, 0) for n in reading.nodes] if reading.cpus_on else []
    shares = node_shares(tasks, weights or [1] * len(reading.nodes))
    return [node for node, k in zip(reading.nodes, shares) for _ in range(k)]
