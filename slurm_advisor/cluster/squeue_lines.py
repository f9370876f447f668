"""Compact ``squeue -O`` readings, for what the daemon reads on every refresh.

``squeue --json`` on 22.05 ignores ``--states``/``--jobs`` and prints every job slurmctld still
holds (finished ones too, for MinJobAge) at ~30 KB each: 3 MB for a hundred jobs, 170 ms of
Slurm's time and more of ours to parse, every refresh. ``-O`` prints just the fields asked for,
one line per job (checked on 22.05: 4 KB, 13 ms for the same queue), and honours the filters.
The last field of each format is free text (a comment) and may hold the separator: the line is
split at most len(fields) - 1 times.
"""
from __future__ import annotations

import re
from datetime import datetime

from slurm_advisor.cluster.base import SourceError
from slurm_advisor.cluster.slurm_json import JobReading, expand_hostlist
from slurm_advisor.slurm.marker import MARKER

SEP = "|"
RUNNING_FIELDS = ("JobID", "UserName", "NumCPUs", "NumTasks", "tres-alloc", "tres-per-task", "tres-per-node",
                  "StartTime", "TimeLimit", "NodeList", "Comment")
#: running jobs: what the source needs to rebuild the advisor's own running jobs
RUNNING = ["squeue", "--noheader", "--states=RUNNING",
           "--Format=" + ",".join(f"{f}:{SEP}" for f in RUNNING_FIELDS[:-1]) + f",{RUNNING_FIELDS[-1]}:"]
_GPU = re.compile(r"gres[:/]gpu(?::[^:,=]+)?[:=](\d+)")  # gres:gpu:2, gres/gpu=2, gres/gpu:a100:2
_DURATION = re.compile(r"(?:(\d+)-)?(?:(\d+):)?(\d+):(\d+)$|(\d+)$")


def split(line: str, fields: int) -> list[str]:
    parts = line.split(SEP, fields - 1)
    if len(parts) != fields:
        raise SourceError(f"squeue: expected {fields} fields, got {len(parts)} in {line[:120]!r}")
    return parts


def parse_running(text: str) -> tuple[JobReading, ...]:
    """The running jobs whose comment carries the advisor's marker (others hold nothing new:
    their capacity is already in the nodes' free numbers)."""
    out = []
    for line in text.splitlines():
        if MARKER not in line:
            continue
        (job_id, user, cpus, tasks, alloc, per_task, per_node, start, limit, nodes,
         comment) = split(line, len(RUNNING_FIELDS))
        where = f"squeue: job {job_id}"
        hosts = tuple(expand_hostlist(nodes))
        out.append(JobReading(job_id, comment, user, hosts, _int(cpus, f"{where}: NumCPUs"),
                              _gpus(alloc, per_task, per_node, _int(tasks, f"{where}: NumTasks"), len(hosts)),
                              _alloc_memory_mb(alloc), {}, parse_time(start, f"{where}: StartTime"),
                              parse_duration(limit, f"{where}: TimeLimit")))
    return tuple(out)


def parse_time(text: str, where: str) -> float:
    """Seconds since the epoch from squeue's local ISO time; 0 for Unknown/N/A."""
    text = text.strip()
    if text in ("", "N/A", "Unknown", "None"):
        return 0.0
    try:
        return datetime.fromisoformat(text).timestamp()
    except ValueError:
        raise SourceError(f"{where}: not a time: {text!r}") from None


def parse_duration(text: str, where: str) -> float | None:
    """Seconds from Slurm's [days-][hours:]minutes:seconds (or plain minutes); None: UNLIMITED."""
    text = text.strip()
    if text.upper() in ("UNLIMITED", "INFINITE", "NOT_SET", "N/A", ""):
        return None
    match = _DURATION.match(text)
    if match is None:
        raise SourceError(f"{where}: not a duration: {text!r}")
    days, hours, minutes, seconds, plain = match.groups()
    if plain is not None:
        return float(plain) * 60.0
    return float(((int(days or 0) * 24 + int(hours or 0)) * 60 + int(minutes)) * 60 + int(seconds))


def _gpus(alloc: str, per_task: str, per_node: str, tasks: int, nodes: int) -> int:
    """The job's GPUs: tres-alloc's gres/gpu when accounting tracks it, else what the job asked for
    per task or per node (cons_tres gives exactly that)."""
    for text, times in ((alloc, 1), (per_task, tasks), (per_node, nodes)):
        match = _GPU.search(text)
        if match:
            return int(match.group(1)) * times
    return 0


def _alloc_memory_mb(alloc: str) -> int:
    """The job's allocated memory in MB from tres-alloc (``mem=3000M``; K, G, T also occur)."""
    match = re.search(r"(?:^|,)mem=(\d+(?:\.\d+)?)([KMGT]?)", alloc)
    if match is None:
        return 0
    value, unit = float(match.group(1)), match.group(2)
    return int(value * {"K": 1 / 1024, "M": 1, "G": 1024, "T": 1024 * 1024}.get(unit, 1))


def _int(text: str, where: str) -> int:
    try:
        return int(text.strip())
    except ValueError:
        raise SourceError(f"{where}: not an integer: {text!r}") from None
