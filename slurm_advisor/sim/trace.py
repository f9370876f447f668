"""The job trace CSV: the one input format every converter writes and the simulator reads.

Required columns (extra columns are ignored)::

    job_id,submit_time,type,num_ps,num_workers,ps_cpus,ps_gpus,ps_mem_mb,
    worker_cpus,worker_gpus,worker_mem_mb,iterations

Optional columns, read when present: ``user``, ``batch_size``, ``model_size_mb`` and
``time_limit_s`` (Slurm's ``--time`` in seconds: positive and finite; empty or absent: see the
simulator's default time-limit rule).

Bounds, so that every time the simulator derives stays finite: ``submit_time`` at most 1e10 s
(317 years), ``iterations`` at most 1e12, ``model_size_mb`` at most 1e7 (10 TB: no model is
larger). So that no file hangs a command or overflows numpy's arrays: a task asks for at most
what one node may have (``clusterfile.MAX_NODE``), a job has at most 100,000 PS and as many
workers, a field is at most csv's 131,072 characters, a file at most ``MAX_TRACE_BYTES`` and
``MAX_TRACE_JOBS`` jobs. The file is UTF-8; a byte-order mark at the start is allowed. A bad row raises
:class:`InputError` naming file, line and column; nothing is half-loaded.
"""
from __future__ import annotations

import csv
import math
from collections.abc import Iterable
from pathlib import Path

from slurm_advisor.domain import Job, Resources
from slurm_advisor.errors import InputError
from slurm_advisor.sim.clusterfile import MAX_NODE, MAX_NODES

COLUMNS = ("job_id", "submit_time", "type", "num_ps", "num_workers", "ps_cpus", "ps_gpus",
           "ps_mem_mb", "worker_cpus", "worker_gpus", "worker_mem_mb", "iterations")
OPTIONAL_COLUMNS = ("user", "batch_size", "model_size_mb", "time_limit_s")
MAX_MODEL_SIZE_MB = 1e7     # 10 TB: a larger "model" is a typo, and it would make speeds vanish
MAX_SUBMIT_TIME_S = 1e10
MAX_ITERATIONS = 1e12
_INT_COLUMNS = ("num_ps", "num_workers", "ps_cpus", "ps_gpus", "ps_mem_mb", "worker_cpus",
                "worker_gpus", "worker_mem_mb")
# the most each integer column may hold: a task fits on a node, a job's tasks on the largest cluster
_INT_MAX = {"num_ps": MAX_NODES, "num_workers": MAX_NODES, "batch_size": 10**9,
            **{f"{role}_{r}": MAX_NODE[r] for role in ("ps", "worker") for r in ("cpus", "gpus", "mem_mb")}}
MAX_TRACE_BYTES = 1024**3           # 1 GiB: ~10 million rows
MAX_TRACE_JOBS = 2_000_000


def read_trace(path: str | Path) -> list[Job]:
    """All jobs of a trace file, sorted by submit time (stable for equal times)."""
    path = Path(path)
    try:
        if path.stat().st_size > MAX_TRACE_BYTES:
            raise InputError(f"{path}: {path.stat().st_size:,} bytes; a trace file may hold at most "
                             f"{MAX_TRACE_BYTES:,}")
        with path.open(newline="", encoding="utf-8-sig") as f:
            reader = csv.DictReader(f)
            numbered = _read_rows(path, reader)
    except OSError as e:
        raise InputError(f"{path}: cannot read trace: {e.strerror}") from None
    except UnicodeDecodeError:
        raise InputError(f"{path}: not a UTF-8 text CSV file") from None
    _check_unique_ids(path, numbered)
    jobs = [job for _, job in numbered]
    if not jobs:
        raise InputError(f"{path}: the trace has no jobs")
    return sorted(jobs, key=lambda j: j.submit_time)


def _read_rows(path: Path, reader: csv.DictReader) -> list[tuple[int, Job]]:
    numbered = []
    try:
        missing = [c for c in COLUMNS if c not in (reader.fieldnames or [])]
        if missing:
            raise InputError(f"{path}: line 1: missing column(s) {', '.join(missing)}; "
                             f"expected {','.join(COLUMNS)}")
        for row in reader:
            if len(numbered) == MAX_TRACE_JOBS:
                raise InputError(f"{path}: line {reader.line_num}: more than {MAX_TRACE_JOBS:,} jobs; "
                                 "split the trace")
            numbered.append((reader.line_num, _parse_row(path, reader.line_num, row)))
    except csv.Error as e:  # "field larger than field limit (131072)"
        limit = csv.field_size_limit()
        why = f"a field is longer than {limit} characters" if "field limit" in str(e) else str(e)
        raise InputError(f"{path}: line {reader.line_num + 1}: {why}") from None
    return numbered


def _parse_row(path: Path, line: int, row: dict[str, str]) -> Job:
    def field(name: str) -> str:
        value = row.get(name)
        if value is None or value.strip() == "":
            raise InputError(f"{path}: line {line}: column '{name}' is empty")
        return value.strip()

    def integer(name: str, minimum: int = 0) -> int:
        raw = field(name)
        if len(raw) > 20:  # int() of thousands of digits is slow, then refused anyway
            raise InputError(f"{path}: line {line}: column '{name}': a {len(raw)}-character number; "
                             f"at most {_INT_MAX[name]:,}")
        try:
            value = int(raw)
        except ValueError:
            raise InputError(f"{path}: line {line}: column '{name}': '{raw}' is not an integer") from None
        if value < minimum:
            raise InputError(f"{path}: line {line}: column '{name}': {value} is below {minimum}")
        if value > _INT_MAX[name]:
            raise InputError(f"{path}: line {line}: column '{name}': {value} is too large (at most {_INT_MAX[name]:,})")
        return value

    def number(name: str, maximum: float, positive: bool = False) -> float:
        raw = field(name)
        try:
            value = float(raw)
        except ValueError:
            raise InputError(f"{path}: line {line}: column '{name}': '{raw}' is not a number") from None
        if not math.isfinite(value) or value < 0 or (positive and value == 0):
            raise InputError(f"{path}: line {line}: column '{name}': {raw} must be "
                             f"{'positive' if positive else 'non-negative'} and finite")
        if value > maximum:
            raise InputError(f"{path}: line {line}: column '{name}': {raw} is too large (at most {maximum:g})")
        return value

    def optional(name: str) -> float | None:
        bound = MAX_MODEL_SIZE_MB if name == "model_size_mb" else math.inf
        return number(name, bound, positive=True) if (row.get(name) or "").strip() else None

    ints = {c: integer(c, minimum=1 if c == "num_workers" else 0) for c in _INT_COLUMNS}
    worker = Resources(ints["worker_cpus"], ints["worker_gpus"], ints["worker_mem_mb"])
    if worker.is_zero():
        raise InputError(f"{path}: line {line}: column 'worker_cpus': a worker must ask for "
                         "some CPUs, GPUs or memory")
    return Job(
        id=field("job_id"), type=field("type"), num_ps=ints["num_ps"],
        num_workers=ints["num_workers"],
        ps_demand=Resources(ints["ps_cpus"], ints["ps_gpus"], ints["ps_mem_mb"]),
        worker_demand=worker, iterations=number("iterations", MAX_ITERATIONS, positive=True),
        submit_time=number("submit_time", MAX_SUBMIT_TIME_S), user=(row.get("user") or "").strip(),
        batch_size=integer("batch_size", 1) if (row.get("batch_size") or "").strip() else None,
        model_size_mb=optional("model_size_mb"), time_limit_s=optional("time_limit_s"))


def _check_unique_ids(path: Path, numbered: list[tuple[int, Job]]) -> None:
    first_line: dict[str, int] = {}
    for line, job in numbered:
        if job.id in first_line:
            raise InputError(f"{path}: line {line}: column 'job_id': '{job.id}' already used "
                             f"on line {first_line[job.id]}")
        first_line[job.id] = line


def write_trace(path: str | Path, jobs: Iterable[Job]) -> int:
    """Write jobs in the trace format (with the optional columns); returns the row count."""
    n = 0
    with Path(path).open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(COLUMNS + OPTIONAL_COLUMNS)
        for j in jobs:
            w.writerow([j.id, _num(j.submit_time), j.type, j.num_ps, j.num_workers,
                        j.ps_demand.cpus, j.ps_demand.gpus, j.ps_demand.mem_mb,
                        j.worker_demand.cpus, j.worker_demand.gpus, j.worker_demand.mem_mb,
                        _num(j.iterations), j.user, j.batch_size or "",
                        _num(j.model_size_mb) if j.model_size_mb else "",
                        _num(j.time_limit_s) if j.time_limit_s else ""])
            n += 1
    return n


def _num(x: float) -> str:
    # repr: the shortest text that reads back as the same float (no rounding of times)
    return str(int(x)) if float(x).is_integer() else repr(float(x))
