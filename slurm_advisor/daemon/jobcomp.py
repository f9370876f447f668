"""Outcomes from Slurm's job completion file (``JobCompType=jobcomp/filetxt``), for advised jobs
that left squeue before the daemon saw them end (a daemon down for longer than MinJobAge).

slurmctld appends one line per ended job: ``JobId=12 UserId=u(0) ... Name=<anything> JobState=...
StartTime=... EndTime=... NodeList=... NodeCnt=... WorkDir=<anything> ... SubmitTime=...``.
The reader keeps its offset and reads only what was appended since; the first read starts at most
64 MiB before the end. A job name or work directory may hold spaces and fake fields: only the
owner's own job could be mis-recorded that way, and squeue's view of a job wins while it is listed.
"""
from __future__ import annotations

import logging
import re
from pathlib import Path

from slurm_advisor.cluster.base import SourceError
from slurm_advisor.cluster.slurm_json import expand_hostlist
from slurm_advisor.cluster.squeue_lines import parse_time
from slurm_advisor.domain.outcome import FINAL_STATES, Outcome

log = logging.getLogger("slurm_advisor.daemon")
_FIRST_READ = 64 * 1024 * 1024
_JOB = re.compile(r"^JobId=(\d+) ")
_FIELDS = re.compile(r" JobState=(\S+) Partition=\S* TimeLimit=\S+ StartTime=(\S+) EndTime=(\S+) "
                     r"NodeList=(\S+) NodeCnt=")
_SUBMIT = re.compile(r" SubmitTime=(\S+) EligibleTime=")
_CONFIG = re.compile(r"^(JobCompType|JobCompLoc)\s*=\s*(\S*)", re.MULTILINE)


def configured(show_config: str) -> Path | None:
    """The completion file that ``scontrol show config`` names, when it is jobcomp/filetxt."""
    values = dict(_CONFIG.findall(show_config))
    if values.get("JobCompType") != "jobcomp/filetxt" or not values.get("JobCompLoc"):
        return None
    return Path(values["JobCompLoc"])


def parse_line(line: str, decision_id: str | None = None) -> Outcome | None:
    """The outcome in one completion line; None when it is not one (or not a final state)."""
    job = _JOB.match(line)
    fields = list(_FIELDS.finditer(line))
    if job is None or not fields:
        return None
    state, start, end, nodes = fields[-1].groups()  # the last: a job name cannot come after it
    if state not in FINAL_STATES:
        return None
    submit = list(_SUBMIT.finditer(line))
    try:
        times = [parse_time(t, f"jobcomp: job {job.group(1)}") or None
                 for t in (submit[-1].group(1) if submit else "", start, end)]
    except SourceError:
        return None
    hosts = () if nodes in ("(null)", "None assigned") else tuple(expand_hostlist(nodes))
    return Outcome(job.group(1), state, decision_id, *times, hosts)


class JobCompFile:
    def __init__(self, path: Path):
        self.path = Path(path)
        self._offset: int | None = None  # None: not read yet
        self._rest = b""

    def ended(self, wanted: dict[str, str | None]) -> list[Outcome]:
        """Outcomes of the ``wanted`` jobs (job id -> decision id) in the lines appended since the last call."""
        try:
            with self.path.open("rb") as f:
                size = f.seek(0, 2)
                if self._offset is None or size < self._offset:  # first read, or the file was rotated
                    self._offset, self._rest = max(0, size - _FIRST_READ), b""
                f.seek(self._offset)
                data = self._rest + f.read()
        except OSError as exc:
            log.warning("cannot read the job completion file %s: %s", self.path, exc)
            return []
        self._offset += len(data) - len(self._rest)
        lines, _, self._rest = data.rpartition(b"\n")
        out = []
        for raw in lines.split(b"\n"):
            job = _JOB.match(raw.decode("utf-8", "replace"))
            if job is not None and job.group(1) in wanted:
                outcome = parse_line(raw.decode("utf-8", "replace"), wanted[job.group(1)])
                if outcome is not None:
                    out.append(outcome)
        return out
