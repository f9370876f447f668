"""The advised jobs in Slurm's queue, and unpinning the ones that waited too long (I/O edge).

The hook writes ``slurm-advisor:<decision>`` into each advised job's admin_comment, so one
compact ``squeue -O`` per refresh tells the daemon which of its decisions started (their claims
end), which ended and how (outcomes), which still wait pinned, and who owns every job that runs
(who may report its speed) (``squeue --json`` is avoided: on 22.05 it ignores its filters and
costs ~30 KB a job; see cluster/squeue_lines.py). Every command is an argument list with a
timeout; nothing from a job reaches a shell.
"""
from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from slurm_advisor.cluster.base import SourceError
from slurm_advisor.cluster.slurm_json import expand_hostlist
from slurm_advisor.cluster.squeue_lines import SEP, parse_time, split

ADMIN_PREFIX = "slurm-advisor:"
# ":released": the daemon lifted its pin or cap; ":observed": observe mode, never constrained.
# Anywhere in admin_comment: the site's own text may come before it.
_DECISION_RE = re.compile(r"slurm-advisor:(d-[0-9a-f]{12})(:released|:observed)?")
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
    released: bool                # the advisor constrains it no more (released, or only observed)
    tasks: int = 1
    user_id: int | None = None
    start_time: float = 0.0       # 0: none yet (a pending job's is Slurm's estimate: not kept)
    end_time: float = 0.0         # 0: not ended (a running job's is its time limit: not kept)
    nodes: tuple[str, ...] = ()   # where it runs or ran
    admin_comment: str = ""       # all of it: the site's own text is kept when the stamp changes

    @property
    def started(self) -> bool:
        return self.state in _STARTED

    @property
    def waiting(self) -> bool:
        """Still pending under the advisor's pin or cap (not yet released)."""
        return self.state == "PENDING" and not self.released


_LINE_FIELDS = ("JobID", "UserId", "State", "SubmitTime", "StartTime", "EndTime", "NumTasks", "ReqNodes",
                "NodeList", "Admin_Comment")
SQUEUE = ["squeue", "--noheader", "--states=all",
          "--Format=" + ",".join(f"{f}:{SEP}" for f in _LINE_FIELDS[:-1]) + f",{_LINE_FIELDS[-1]}:"]
_FINAL = _STARTED - {"RUNNING", "COMPLETING", "SUSPENDED"}


@dataclass(frozen=True)
class Listing:
    """One read of the queue: the advised jobs, and the owner's uid of every job that has started
    (running, or ended but still listed: MinJobAge)."""

    advised: list[AdvisedJob]
    owners: dict[str, int]
    # Whether this is Slurm's queue, where every job the hook stamped shows up: a claim whose job
    # it never lists was rejected or cancelled (False: a queue that lists nothing, NoQueue).
    from_slurm: bool = True


def parse_listing(text: str) -> Listing:
    """The advised jobs and the job owners in the output of :data:`SQUEUE`."""
    advised, owners = [], {}
    for line in filter(str.strip, text.splitlines()):
        try:
            job_id, uid, state, rest = split(line, 4)
            job_id, state = job_id.strip(), state.strip()
            if state in _STARTED:
                owners[job_id] = int(uid)
            if ADMIN_PREFIX in rest:
                job = _advised(job_id, int(uid), state, rest)
                if job is not None:
                    advised.append(job)
        except (SourceError, ValueError) as exc:
            raise QueueError(f"squeue: {exc}") from None
    return Listing(advised, owners)


def parse_lines(text: str) -> list[AdvisedJob]:
    """The advised jobs in the output of :data:`SQUEUE`."""
    return parse_listing(text).advised


def _advised(job_id: str, uid: int, state: str, rest: str) -> AdvisedJob | None:
    submit, start, end, tasks, required, nodes, admin = split(rest, len(_LINE_FIELDS) - 3)
    match = _DECISION_RE.search(admin.strip())
    if match is None:
        return None
    where = f"job {job_id}"
    return AdvisedJob(job_id, match.group(1), state, parse_time(submit, f"{where}: SubmitTime"),
                      "" if required.strip() in ("", "(null)") else required.strip(),
                      match.group(2) is not None, int(tasks or 1), uid,
                      parse_time(start, f"{where}: StartTime") if state in _STARTED else 0.0,
                      parse_time(end, f"{where}: EndTime") if state in _FINAL else 0.0,
                      tuple(expand_hostlist(nodes.strip())) if nodes.strip() not in ("", "(null)") else (),
                      admin.strip())


def released_comment(job: AdvisedJob) -> str:
    """The job's admin_comment with its stamp marked released, the site's own text kept."""
    stamp = f"{ADMIN_PREFIX}{job.decision}:released"
    match = _DECISION_RE.search(job.admin_comment)
    if match is None:
        return stamp
    return job.admin_comment[:match.start()] + stamp + job.admin_comment[match.end():]


class SlurmQueue:
    def __init__(self, slurm_conf: Path | None = None, timeout_s: float = 10.0):
        self.env = dict(os.environ, **({"SLURM_CONF": str(slurm_conf)} if slurm_conf else {}))
        self.timeout_s = timeout_s

    def read(self) -> Listing:
        return parse_listing(self._run(SQUEUE))

    def advised(self) -> list[AdvisedJob]:
        return self.read().advised

    def show_config(self) -> str:
        return self._run(["scontrol", "show", "config"])

    def version(self) -> str:
        """``sinfo --version``: "slurm 22.05.8" (Debian's packages: "slurm-wlm 24.11.5")."""
        return self._run(["sinfo", "--version"])

    def default_partition(self) -> str | None:
        """The partition a job without -p runs in (``Default=YES``); None if there is none."""
        for line in self._run(["scontrol", "show", "partition", "--oneliner"]).splitlines():
            fields = dict(f.split("=", 1) for f in line.split() if "=" in f)
            if fields.get("Default") == "YES":
                return fields.get("PartitionName")
        return None

    def allocation(self, job_id: str) -> tuple[tuple[str, ...], tuple[int, ...]] | None:
        """(nodes, Slurm's task count on each) of a started job (``daemon/allocation.py``)."""
        from slurm_advisor.daemon.allocation import parse_job

        if not job_id.isdigit():  # an array or het job's id: not read (nothing from a job reaches a command)
            return None
        return parse_job(self._run(["scontrol", "show", "job", "-d", "-o", job_id]))

    def release(self, job: AdvisedJob, min_nodes: int | None, max_nodes: int | None) -> None:
        """Unpin (or uncap) a pending job: no required nodes, the node counts the user asked for.

        Unknown counts become 1..tasks, which is what Slurm allows a job that never set --nodes
        (it raises the minimum itself to what the tasks need; checked on 22.05)."""
        counts = f"{min_nodes or 1}-{max_nodes or max(job.tasks, min_nodes or 1)}"
        self._run(["scontrol", "update", f"JobId={job.job_id}", "ReqNodeList=", f"NumNodes={counts}",
                   f"AdminComment={released_comment(job)}"])

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

    def read(self) -> Listing:
        return Listing([], {}, from_slurm=False)

    def advised(self) -> list[AdvisedJob]:
        return []

    def release(self, job: AdvisedJob, min_nodes: int | None, max_nodes: int | None) -> None:
        raise QueueError("the simulated source has no Slurm queue")
