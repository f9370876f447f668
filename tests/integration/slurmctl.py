"""The testbed's Slurm through its own commands: submit, read free capacity and allocations, wait, cancel.

Every command is an argument list (never a shell string). Readings are parsed from `sinfo --json`
(on 23.02+, whose sinfo groups nodes and has no ``nodes`` key: `scontrol --json show nodes`) and
`scontrol show job -d -o` into the domain's values (`Node`, `Resources`) at this edge. A
`Slurm` remembers the jobs it submitted: `cancel_all` cancels exactly those and waits until the
cluster has all its capacity back.
"""
from __future__ import annotations

import json
import re
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

from slurm_advisor.cluster.slurm_json import expand_hostlist
from slurm_advisor.daemon.allocation import count_ids
from slurm_advisor.domain import Node, Resources
from slurm_advisor.slurm.release import Release

#: States in which a job still holds (or is about to hold) its allocation.
ACTIVE = frozenset({"PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED"})
_PER_NODE = re.compile(r"\bNodes=(\S+) CPU_IDs=(\S+) Mem=(\d+) GRES=(\S*)")
_FIELD = re.compile(r"(?:^|\s)([A-Za-z][\w/:]*)=(\S*)")


class SlurmError(RuntimeError):
    """A Slurm command failed or did not answer."""


def run(args: Sequence[str], timeout_s: float = 30.0) -> str:
    try:
        proc = subprocess.run(list(args), capture_output=True, text=True, timeout=timeout_s, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SlurmError(f"{args[0]}: {exc}") from exc
    if proc.returncode != 0:
        said = (proc.stderr.strip() or proc.stdout.strip())[-2000:]
        raise SlurmError(f"{' '.join(args)}: exit {proc.returncode}: {said}")
    return proc.stdout


def gpu_count(gres: str) -> int:
    """GPUs in a GRES string: "gpu:3", "gpu:3(IDX:0-2)", "gpu:v100:2,nic:1"; "" or "(null)" -> 0."""
    return sum(int(n) for n in re.findall(r"\bgpu(?::[^:,(]+)?:(\d+)", gres))


def job_fields(line: str) -> dict[str, str]:
    """The ``Key=value`` fields of one ``scontrol show ... -o`` line, the first of each key kept
    (a value with spaces, such as a comment's, is cut at its first space)."""
    fields: dict[str, str] = {}
    for key, value in _FIELD.findall(line):
        fields.setdefault(key, value)
    return fields


def _int(value) -> int:
    """A JSON number: plain (22.05) or a 23.02+ ``{"set", "infinite", "number"}`` object."""
    return int(value["number"] if isinstance(value, dict) else value)


def _time(value: str) -> datetime | None:
    try:
        return datetime.fromisoformat(value)
    except ValueError:  # "Unknown", "None", "N/A"
        return None


@dataclass(frozen=True)
class JobView:
    """One job as `scontrol show job -d -o` reports it (times in whole seconds, as Slurm keeps them)."""
    id: str
    state: str
    reason: str
    submit: datetime | None
    start: datetime | None
    end: datetime | None
    allocation: dict[str, Resources]  # node -> CPUs, GPUs, MB allocated there (empty while pending)

    @classmethod
    def parse(cls, line: str) -> JobView:
        fields = job_fields(line)
        allocation = {}
        for nodes, cpu_ids, mem, gres in _PER_NODE.findall(line):
            for node in expand_hostlist(nodes):
                allocation[node] = Resources(count_ids(cpu_ids), gpu_count(gres), int(mem))
        return cls(fields["JobId"], fields["JobState"], fields.get("Reason", ""),
                   _time(fields.get("SubmitTime", "")), _time(fields.get("StartTime", "")),
                   _time(fields.get("EndTime", "")), allocation)


def until(done: Callable[[], object], timeout_s: float, what: str, every_s: float = 0.05) -> None:
    """Poll ``done`` until it is true: the one wait on something outside this process (Slurm, a
    daemon) that offers no event to wait on; SlurmError naming ``what`` after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not done():
        if time.monotonic() > deadline:
            raise SlurmError(f"{what}: not within {timeout_s:g} s")
        time.sleep(every_s)


class Slurm:
    """The cluster that SLURM_CONF names, and the jobs this object submitted to it."""

    def __init__(self, workdir: str = "/tmp"):
        self.workdir = workdir  # batch jobs run here and write no output files
        self.submitted: list[str] = []
        self._node_commands = [["sinfo", "--json"], ["scontrol", "--json", "show", "nodes"]]

    # -- reading -----------------------------------------------------------------------------
    def ping(self) -> None:
        """Fails fast (SlurmError) when no slurmctld answers; sinfo would retry for a minute."""
        run(["scontrol", "ping"], timeout_s=15)

    def release(self) -> Release:
        """The release of the Slurm commands on PATH (``sinfo --version``)."""
        return Release.parse(run(["sinfo", "--version"]))

    def _nodes_json(self) -> list[dict]:
        for command in self._node_commands:
            answer = json.loads(run(command))
            if answer.get("errors"):  # sinfo --json exits 0 even when it reached no controller
                raise SlurmError(f"{' '.join(command)}: {answer['errors']}")
            if "nodes" in answer:
                self._node_commands = [command]  # the release's way, from now on
                return answer["nodes"]
        raise SlurmError(f"no 'nodes' in the answer of {' '.join(self._node_commands[-1])}")

    def nodes(self) -> tuple[Node, ...]:
        """The nodes in Slurm's order, with their configured capacity."""
        return tuple(Node(n["name"], _int(n["cpus"]), gpu_count(n["gres"]), _int(n["real_memory"]))
                     for n in self._nodes_json())

    def node_states(self) -> dict[str, str]:
        """node -> its state, lower case: 22.05's one word ("idle"); 23.02+'s list of the state and
        its flags joined by "+" ("idle", "idle+drain")."""
        return {n["name"]: n["state"] if isinstance(n["state"], str) else "+".join(n["state"]).lower()
                for n in self._nodes_json()}

    def free(self) -> dict[str, Resources]:
        """node -> CPUs, GPUs and MB not allocated to any job."""
        return {n["name"]: Resources(_int(n["cpus"]) - _int(n["alloc_cpus"]),
                                     gpu_count(n["gres"]) - gpu_count(n["gres_used"]),
                                     _int(n["real_memory"]) - _int(n["alloc_memory"]))
                for n in self._nodes_json()}

    def job(self, job_id: str) -> JobView:
        return JobView.parse(run(["scontrol", "show", "job", "-d", "-o", job_id]))

    def _queued(self) -> set[str]:
        """Ids that squeue lists: pending, running or completing."""
        return set(run(["squeue", "-h", "-o", "%i"]).split())

    def active_ids(self) -> list[str]:
        """Jobs of ours that Slurm still lists as pending, running or completing."""
        listed = self._queued()
        return [j for j in self.submitted if j in listed]

    # -- acting ------------------------------------------------------------------------------
    def submit(self, options: Sequence[str], sleep_s: float) -> str:
        """`sbatch --parsable` a job that sleeps ``sleep_s`` seconds; returns its id."""
        args = ["sbatch", "--parsable", "--output=/dev/null", "--error=/dev/null", f"--chdir={self.workdir}",
                *options, f"--wrap=exec sleep {float(sleep_s):g}"]
        job_id = run(args).strip().split(";")[0]
        self.submitted.append(job_id)
        return job_id

    def cancel(self, *job_ids: str) -> None:
        if job_ids:
            subprocess.run(["scancel", *job_ids], capture_output=True, timeout=30, check=False)

    def wait(self, job_id: str, done: Callable[[JobView], bool], timeout_s: float = 30.0,
             what: str = "the awaited state") -> JobView:
        deadline = time.monotonic() + timeout_s
        while True:
            view = self.job(job_id)
            if done(view):
                return view
            if time.monotonic() > deadline:
                raise SlurmError(f"job {job_id} did not reach {what} in {timeout_s:g} s: {view}")
            time.sleep(0.1)

    def wait_gone(self, *job_ids: str, timeout_s: float = 30.0) -> None:
        """Until the jobs have ended and left squeue (which lists them while they complete, that
        is while their processes are killed and their allocations not yet free)."""
        for job_id in job_ids:
            self.wait(job_id, lambda v: v.state not in ACTIVE, timeout_s, "an end state")
        deadline = time.monotonic() + timeout_s
        while set(job_ids) & self._queued():
            if time.monotonic() > deadline:
                raise SlurmError(f"jobs {job_ids} still completing {timeout_s:g} s after their end")
            time.sleep(0.1)

    def cancel_all(self, timeout_s: float = 30.0) -> None:
        """Cancel every job this object submitted; wait until all nodes have all their capacity back."""
        self.cancel(*self.active_ids())
        deadline = time.monotonic() + timeout_s
        capacity = {n.name: n.capacity for n in self.nodes()}
        while self.active_ids() or self.free() != capacity:
            if time.monotonic() > deadline:
                raise SlurmError(f"cluster not empty {timeout_s:g} s after scancel: free {self.free()}")
            time.sleep(0.2)
