"""Gavel (OSDI'20) trace files -> trace jobs, in both the old 7-field and the current 10-field form.

Gavel's traces name a measured model ("ResNet-50 (batch size 64)"), a step count and a GPU count;
we keep all three, so a simulation over a Gavel trace runs the jobs Gavel itself simulated.

No time limit: neither format carries one (the current format's SLO field is a completion
target, not a run-time limit, and is not read), so ``time_limit_s`` stays empty (the simulator
applies its default time-limit rule).
"""
from __future__ import annotations

import re
from pathlib import Path

from slurm_advisor.domain import Job, Resources
from slurm_advisor.errors import InputError
from slurm_advisor.traces.philly import WORKER_DEMAND

# Gavel model name -> our job type (see slurm_advisor.domain.jobtypes).
GAVEL_TYPES = {"ResNet-18": "resnet18", "ResNet-50": "resnet50", "Transformer": "transformer",
               "LM": "lstm", "Recommendation": "recommendation", "A3C": "a3c", "CycleGAN": "cyclegan"}
_JOB_TYPE = re.compile(r"^(?P<model>.+?)(?: \(batch size (?P<batch>\d+)\))?$")
# Field positions: (total_steps, scale_factor, arrival_time_s) by field count.
_LAYOUTS = {7: (4, 6, 5), 10: (5, 6, 9)}


def gavel_jobs(path: str | Path, *, max_workers: int = 8, seed: int = 0) -> list[Job]:
    """Every job of a Gavel trace; scale factors above ``max_workers`` are clamped to it.

    Gavel measured throughputs only up to 8 GPUs, so larger jobs (sf 16, 32 in the MSR traces)
    are clamped rather than dropped, keeping the trace's arrival pattern intact. ``seed`` is
    unused (the conversion is exact) and kept so that every converter takes the same options.
    """
    if max_workers < 1:
        raise InputError(f"max_workers must be at least 1, got {max_workers}")
    path = Path(path)
    try:
        lines = path.read_text().splitlines()
    except OSError as e:
        raise InputError(f"{path}: cannot read Gavel trace: {e.strerror}") from None
    except UnicodeDecodeError:
        raise InputError(f"{path}: not a text Gavel trace") from None
    jobs = [_parse_line(path, n, text, len(lines), max_workers)
            for n, text in enumerate(lines, start=1) if text.strip()]
    if not jobs:
        raise InputError(f"{path}: the Gavel trace has no jobs")
    return jobs


def parse_job_type(job_type: str) -> tuple[str, int | None]:
    """'ResNet-50 (batch size 64)' -> ('resnet50', 64); 'A3C' -> ('a3c', None)."""
    match = _JOB_TYPE.match(job_type.strip())
    model = match.group("model") if match else job_type
    if model not in GAVEL_TYPES:
        raise ValueError(f"unknown Gavel model '{model}'; known: {', '.join(GAVEL_TYPES)}")
    batch = match.group("batch") if match else None
    return GAVEL_TYPES[model], int(batch) if batch else None


def _parse_line(path: Path, line: int, text: str, width: int, max_workers: int) -> Job:
    fields = text.rstrip("\r\n").split("\t")
    layout = _LAYOUTS.get(len(fields))
    if layout is None:
        raise InputError(f"{path}: line {line}: {len(fields)} tab-separated fields; expected 7 "
                         "(old Gavel format) or 10 (current format)")
    steps_at, sf_at, arrival_at = layout
    try:
        job_type, batch = parse_job_type(fields[0])
        steps = int(fields[steps_at])
        scale_factor = int(fields[sf_at])
        arrival = float(fields[arrival_at])
        if not arrival >= 0:
            raise ValueError(f"arrival time {fields[arrival_at]} must be non-negative")
        return Job(id=f"gavel-{line - 1:0{len(str(width))}d}", type=job_type, num_ps=0,
                   num_workers=min(scale_factor, max_workers), ps_demand=Resources(),
                   worker_demand=WORKER_DEMAND, iterations=steps, submit_time=arrival,
                   batch_size=batch)
    except ValueError as e:
        raise InputError(f"{path}: line {line}: {e}") from None
