"""The advised jobs in Slurm's queue, and unpinning the ones that waited too long (I/O edge).

The hook writes ``slurm-advisor:<decision>`` into each advised job's admin_comment, so one
compact ``squeue -O`` per refresh tells the daemon which of its decisions started (their claims
end) and which still wait pinned (``squeue --json`` is avoided: on 22.05 it ignores its filters and
costs ~30 KB a job; see cluster/squeue_lines.py). Every command is an argument list with a
timeout; nothing from a job reaches a shell. ``parse_squeue`` reads the JSON form too (22.05 plain
values, 23.02+ ``{"number": ...}`` objects and state lists) for pyslurm-shaped documents.
"""
from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from slurm_advisor.cluster.base import SourceError
from slurm_advisor.cluster.squeue_lines import SEP, parse_time, split

ADMIN_PREFIX = "slurm-advisor:"
_DECISION_RE = re.compile(r"slurm-advisor:(d-[0-9a-f]{12})(:released)?")
_STARTED = {"RUNNING", "COMPLETING", "COMPLETED", "SUSPENDED", "FAILED", "CANCELLED", "TIMEOUT",
            "NODE_FAIL", "PREEMPTED", "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE"}


class QueueError(RuntimeError):
    """squeue or scontrol failed; the message is one line."""


@dataclass(frozen=True)
class AdvisedJob:
    job_id: str
    decision: str
    state: str
    submit_time: float
    required_nodes: str
    released: bool
    tasks: int = 1

    @property
    def started(self) -> bool:
        return self.state in _STARTED

    @property
    def waiting(self) -> bool:
        """Still pending under the advisor's pin or cap (not yet released)."""
        return self.state == "PENDING" and not self.released


def parse_squeue(doc: Any) -> list[AdvisedJob]:
    """The advised jobs in a decoded ``squeue --json`` document."""
    if not isinstance(doc, dict) or not isinstance(doc.get("jobs"), list):
        raise QueueError("squeue --json: no 'jobs' list")
    out = []
    for raw in doc["jobs"]:
        match = _DECISION_RE.match(str(raw.get("admin_comment") or ""))
        if match is None:
            continue
        state = raw.get("job_state")
        state = state[0] if isinstance(state, list) and state else state
        out.append(AdvisedJob(str(raw.get("job_id")), match.group(1), str(state or ""),
                              float(_number(raw.get("submit_time")) or 0), str(raw.get("required_nodes") or ""),
                              match.group(2) is not None, int(_number(raw.get("tasks")) or 1)))
    return out


def _number(value: Any) -> Any:
    if isinstance(value, dict):  # 23.02+: {"set": true, "infinite": false, "number": 5}
        return value.get("number") if value.get("set", True) else None
    return value


_LINE_FIELDS = ("JobID", "State", "SubmitTime", "NumTasks", "ReqNodes", "Admin_Comment")
SQUEUE = ["squeue", "--noheader", "--states=all",
          "--Format=" + ",".join(f"{f}:{SEP}" for f in _LINE_FIELDS[:-1]) + f",{_LINE_FIELDS[-1]}:"]


def parse_lines(text: str) -> list[AdvisedJob]:
    """The advised jobs in the output of :data:`SQUEUE`."""
    out = []
    for line in text.splitlines():
        if ADMIN_PREFIX not in line:
            continue
        try:
            job_id, state, submit, tasks, required, admin = split(line, len(_LINE_FIELDS))
            match = _DECISION_RE.match(admin.strip())
            if match is None:
                continue
            out.append(AdvisedJob(job_id.strip(), match.group(1), state.strip(),
                                  parse_time(submit, f"job {job_id}: SubmitTime"),
                                  "" if required.strip() in ("", "(null)") else required.strip(),
                                  match.group(2) is not None, int(tasks or 1)))
        except (SourceError, ValueError) as exc:
            raise QueueError(f"squeue: {exc}") from None
    return out


class SlurmQueue:
    def __init__(self, slurm_conf: Path | None = None, timeout_s: float = 10.0):
        self.env = dict(os.environ, **({"SLURM_CONF": str(slurm_conf)} if slurm_conf else {}))
        self.timeout_s = timeout_s

    def advised(self) -> list[AdvisedJob]:
        return parse_lines(self._run(SQUEUE))

    def release(self, job: AdvisedJob, min_nodes: int | None, max_nodes: int | None) -> None:
        """Unpin (or uncap) a pending job: no required nodes, the node counts the user asked for.

        Unknown counts become 1..tasks, which is what Slurm allows a job that never set --nodes
        (it raises the minimum itself to what the tasks need; checked on 22.05)."""
        counts = f"{min_nodes or 1}-{max_nodes or max(job.tasks, min_nodes or 1)}"
        self._run(["scontrol", "update", f"JobId={job.job_id}", "ReqNodeList=", f"NumNodes={counts}",
                   f"AdminComment={ADMIN_PREFIX}{job.decision}:released"])

    def _run(self, args: list[str]) -> str:
        try:
            proc = subprocess.run(args, capture_output=True, text=True, timeout=self.timeout_s,
                                  env=self.env, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise QueueError(f"{args[0]}: {exc}") from None
        if proc.returncode != 0:
            said = (proc.stderr.strip() or proc.stdout.strip()).splitlines()
            raise QueueError(f"{' '.join(args[:2])}: exit {proc.returncode}: {said[-1] if said else ''}")
        return proc.stdout


class NoQueue:
    """The simulated source's queue: nothing pending in a real Slurm; claims end by their bound."""

    def advised(self) -> list[AdvisedJob]:
        return []

    def release(self, job: AdvisedJob, min_nodes: int | None, max_nodes: int | None) -> None:
        raise QueueError("the simulated source has no Slurm queue")
