"""Philly (Microsoft, 2017) jobs -> trace jobs, typed the way Pollux's ``workload.py`` typed them.

The derived Philly file (``philly_jobs.csv.gz``) only gives submit time, GPU count, duration and
VC: no model, no framework. We therefore assign a job type from the job's GPU-hours, following
Pollux's ``simulator/workload.py`` (small jobs are small models, huge jobs are ImageNet), and mix
in the CNN and sequence types Pollux never measured so that parameter-server jobs exist too.

No time limit: the file records how long a job ran, not the limit its user asked for, so
``time_limit_s`` stays empty (the simulator applies its default time-limit rule).
"""
from __future__ import annotations

import csv
import gzip
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from slurm_advisor.domain import Job, Resources
from slurm_advisor.domain.jobtypes import profile_for, reference_speed
from slurm_advisor.errors import InputError

# One worker = one GPU with a typical host share on an 8-GPU server (32 cores, 192 GB).
WORKER_DEMAND = Resources(cpus=4, gpus=1, mem_mb=24000)
# A parameter server holds model shards and aggregates gradients: CPUs and memory, no GPU.
PS_DEMAND = Resources(cpus=4, gpus=0, mem_mb=16000)
# Types that are trained with parameter servers when they have more than one worker.
PS_TYPES = frozenset({"resnet50", "vgg16", "inception3"})
MIN_DURATION_S = 60  # Pollux drops shorter jobs too: they are mostly failed launches
MIX_FRACTION = 0.25  # share of jobs whose type comes from the bucket's "mixed-in" list


@dataclass(frozen=True, slots=True)
class _Bucket:
    """Jobs below ``max_gpu_h`` GPU-hours: Pollux's choices, and our extra types for the mix."""

    max_gpu_h: float
    pollux: tuple[str, ...]
    mixed_in: tuple[str, ...]


# Pollux: <1 GPU-h cifar10 or ncf; 1-10 deepspeech2 or bert; 10-100 yolov3; >=100 imagenet.
_BUCKETS = (
    _Bucket(1.0, ("resnet18", "ncf"), ("lstm",)),
    _Bucket(10.0, ("deepspeech2", "bert"), ("transformer", "vgg16", "inception3")),
    _Bucket(100.0, ("yolov3",), ("vgg16", "inception3")),
    _Bucket(math.inf, ("resnet50",), ("vgg16", "inception3")),
)


def philly_jobs(path: str | Path, *, vc: str | None = None, start_s: int = 0,
                duration_s: int | None = None, max_jobs: int | None = None,
                time_scale: float = 1.0, seed: int = 0) -> list[Job]:
    """Jobs submitted in ``[start_s, start_s + duration_s)`` (optionally one VC), as trace jobs.

    ``time_scale`` > 1 compresses arrivals (a heavier load); run lengths are kept, because
    ``iterations`` is sized so that a job alone runs about as long as it did on Philly.
    """
    if time_scale <= 0:
        raise InputError(f"time_scale must be positive, got {time_scale}")
    rng = np.random.default_rng(seed)
    jobs: list[Job] = []
    for line, row in _rows(Path(path)):
        if max_jobs is not None and len(jobs) >= max_jobs:
            break
        submit = _int(path, line, row, "submit_time_s")
        if submit < start_s or (vc is not None and row.get("vc") != vc):
            continue
        if duration_s is not None and submit >= start_s + duration_s:
            break  # rows are sorted by submit time
        if _int(path, line, row, "duration_s") < MIN_DURATION_S:
            continue
        # Whole seconds and steps: the trace CSV keeps non-integers to 6 significant digits only.
        jobs.append(_job(path, line, row, float(round((submit - start_s) / time_scale)), rng))
    return jobs


def pick_type(gpu_hours: float, rng: np.random.Generator) -> str:
    """A job type for a job of ``gpu_hours``: Pollux's choice, or with ``MIX_FRACTION`` an extra one."""
    bucket = next(b for b in _BUCKETS if gpu_hours < b.max_gpu_h)
    choices = bucket.mixed_in if rng.random() < MIX_FRACTION else bucket.pollux
    return str(choices[rng.integers(len(choices))])


def ps_count(job_type: str, num_workers: int) -> int:
    """Parameter servers for a job: one per four workers for multi-worker PS-style CNNs, else 0."""
    if job_type in PS_TYPES and num_workers > 1:
        return max(1, num_workers // 4)
    return 0


def _job(path: str | Path, line: int, row: dict[str, str], submit_time: float,
         rng: np.random.Generator) -> Job:
    num_gpus = _int(path, line, row, "num_gpus")
    duration = _int(path, line, row, "duration_s")
    if num_gpus < 1:
        raise InputError(f"{path}: line {line}: column 'num_gpus': {num_gpus} is below 1")
    job_type = pick_type(num_gpus * duration / 3600.0, rng)
    iterations = max(1, round(duration * reference_speed(profile_for(job_type))))
    num_ps = ps_count(job_type, num_gpus)
    return Job(id=f"philly-{row['job_id']}", type=job_type, num_ps=num_ps, num_workers=num_gpus,
               ps_demand=PS_DEMAND if num_ps else Resources(), worker_demand=WORKER_DEMAND,
               iterations=iterations, submit_time=submit_time, user=row.get("vc", ""))


def _rows(path: Path):
    """(line number, row) pairs of the gzip CSV; read errors become InputError."""
    try:
        with gzip.open(path, "rt", newline="") as f:
            reader = csv.DictReader(f)
            for row in reader:
                yield reader.line_num, row
    except (OSError, EOFError) as e:
        raise InputError(f"{path}: cannot read the Philly job list: {e}") from None


def _int(path: str | Path, line: int, row: dict[str, str], column: str) -> int:
    raw = row.get(column)
    try:
        return int(raw)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise InputError(f"{path}: line {line}: column '{column}': '{raw}' is not an integer") from None
