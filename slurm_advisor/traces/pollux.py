"""Pollux (OSDI'21) evaluation workloads -> trace jobs with measured run lengths.

Each workload row names an application, a GPU count and a total batch size. The job's length
comes from Pollux's own convergence runs: the iterations a model needed, at the measured batch
size nearest to the job's, to reach its validation target. So the run lengths are real figures,
not a guess from a duration.

No time limit: Pollux's workloads have none, so ``time_limit_s`` stays empty (the simulator
applies its default time-limit rule).
"""
from __future__ import annotations

import csv
import math
from pathlib import Path

from slurm_advisor.domain import Job, Resources
from slurm_advisor.errors import InputError
from slurm_advisor.traces.philly import WORKER_DEMAND

# Pollux application (model folder) -> our job type.
POLLUX_TYPES = {"cifar10": "resnet18", "imagenet": "resnet50", "bert": "bert",
                "deepspeech2": "deepspeech2", "ncf": "ncf", "yolov3": "yolov3"}
_COLUMNS = ("name", "time", "application", "num_replicas", "batch_size")


def pollux_jobs(workload_csv: str | Path, models_dir: str | Path, *, seed: int = 0) -> list[Job]:
    """Every job of a Pollux ``workload-N.csv``, all-reduce, one GPU per replica.

    ``seed`` is unused (the conversion is exact) and kept so every converter takes the same options.
    """
    path, models = Path(workload_csv), Path(models_dir)
    lengths: dict[tuple[str, int], int] = {}
    jobs = []
    try:
        with path.open(newline="") as f:
            reader = csv.DictReader(f)
            missing = [c for c in _COLUMNS if c not in (reader.fieldnames or [])]
            if missing:
                raise InputError(f"{path}: line 1: missing column(s) {', '.join(missing)}")
            for row in reader:
                jobs.append(_job(path, reader.line_num, row, models, lengths))
    except OSError as e:
        raise InputError(f"{path}: cannot read Pollux workload: {e.strerror}") from None
    if not jobs:
        raise InputError(f"{path}: the workload has no jobs")
    return jobs


def nearest_batch(models_dir: Path, application: str, total_batch: int) -> int:
    """The measured batch size ``B`` (``validation-B.csv``) nearest to ``total_batch`` by ratio.

    Measured sizes double from one to the next, so nearness is judged on a log scale.
    """
    sizes = sorted(int(p.stem.split("-", 1)[1]) for p in (models_dir / application).glob("validation-*.csv"))
    if not sizes:
        raise InputError(f"{models_dir / application}: no validation-<B>.csv files")
    return min(sizes, key=lambda b: abs(math.log(b / total_batch)))


def iterations_to_target(models_dir: Path, application: str, batch: int) -> int:
    """The final cumulative ``iteration`` of ``validation-<batch>.csv``: steps to the target metric."""
    path = models_dir / application / f"validation-{batch}.csv"
    try:
        with path.open(newline="") as f:
            rows = list(csv.DictReader(f))
        return int(float(rows[-1]["iteration"]))
    except (OSError, IndexError, KeyError, ValueError) as e:
        raise InputError(f"{path}: cannot read the final iteration: {e}") from None


def _job(path: Path, line: int, row: dict[str, str], models: Path,
         lengths: dict[tuple[str, int], int]) -> Job:
    app = (row.get("application") or "").strip()
    if app not in POLLUX_TYPES:
        raise InputError(f"{path}: line {line}: column 'application': unknown '{app}'; "
                         f"known: {', '.join(POLLUX_TYPES)}")
    try:
        replicas, total_batch = int(row["num_replicas"]), int(row["batch_size"])
        submit = float(row["time"])
        if replicas < 1 or total_batch < 1 or submit < 0:
            raise ValueError("num_replicas and batch_size must be >= 1 and time >= 0")
    except (TypeError, ValueError) as e:
        raise InputError(f"{path}: line {line}: {e}") from None
    batch = nearest_batch(models, app, total_batch)
    if (app, batch) not in lengths:
        lengths[(app, batch)] = iterations_to_target(models, app, batch)
    return Job(id=row["name"].strip(), type=POLLUX_TYPES[app], num_ps=0, num_workers=replicas,
               ps_demand=Resources(), worker_demand=WORKER_DEMAND,
               iterations=lengths[(app, batch)], submit_time=submit,
               batch_size=max(1, total_batch // replicas))
