"""Synthetic traces: Poisson arrivals with Philly-like or deliberately large multi-node jobs.

The real traces are dominated by 1-GPU jobs, which placement barely affects; the ``large`` mix
exists to stress placement with jobs that must span nodes, and to exercise parameter servers.

No time limit is drawn: ``time_limit_s`` stays empty (the simulator applies its default
time-limit rule).
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from slurm_advisor.domain import Job, Resources
from slurm_advisor.domain.jobtypes import KNOWN_TYPES, profile_for, reference_speed
from slurm_advisor.errors import InputError
from slurm_advisor.traces.philly import PS_DEMAND, WORKER_DEMAND

MIN_DURATION_S = 60.0
MAX_DURATION_S = 7 * 24 * 3600.0


@dataclass(frozen=True, slots=True)
class Mix:
    """Worker counts with their probabilities, a log-normal run length, and a default arrival rate."""

    workers: tuple[int, ...]
    probs: tuple[float, ...]
    median_duration_s: float
    sigma: float             # of log(duration): 1.5 spreads minutes to days, as on Philly
    arrival_rate_per_h: float


MIXES: dict[str, Mix] = {
    # Philly GPU counts: 1 GPU 93%, 2/4/8 about 2% each, 16 or more under 1%.
    "philly": Mix((1, 2, 4, 8, 16), (0.93, 0.02, 0.02, 0.02, 0.01), 3600.0, 1.5, 30.0),
    # Mostly jobs of 4-16 workers: on 4- or 8-GPU nodes most of them must span nodes.
    "large": Mix((1, 2, 4, 8, 12, 16), (0.05, 0.05, 0.25, 0.30, 0.10, 0.25), 2 * 3600.0, 1.0, 4.0),
}


def synthetic_jobs(n: int, *, seed: int = 0, mix: str = "philly",
                   arrival_rate_per_h: float | None = None, ps_fraction: float = 0.5,
                   types: Sequence[str] | None = None) -> list[Job]:
    """``n`` jobs with Poisson arrivals; ``arrival_rate_per_h`` defaults to the mix's own rate.

    A ``ps_fraction`` share of multi-worker jobs use parameter servers (1 to workers // 2 of them).
    Job types are drawn uniformly from ``types`` (a site's own names; default: the published
    types of ``jobtypes``); a type ``jobtypes`` does not know gets its default profile's speed
    for turning the drawn run length into iterations. The same arguments always give the same jobs.
    """
    spec = _check(n, mix, arrival_rate_per_h, ps_fraction)
    if types is not None and not [t for t in types if t.strip()]:
        raise InputError("types: give at least one job type name")
    rate = arrival_rate_per_h or spec.arrival_rate_per_h
    rng = np.random.default_rng(seed)
    arrivals = np.cumsum(rng.exponential(3600.0 / rate, size=n))
    arrivals -= arrivals[0]  # the first job arrives at time 0
    types = sorted(KNOWN_TYPES) if types is None else [t.strip() for t in types if t.strip()]
    width = len(str(n - 1))
    return [_job(f"syn-{i:0{width}d}", float(arrivals[i]), spec, types, ps_fraction, rng)
            for i in range(n)]


def _job(job_id: str, submit: float, spec: Mix, types: list[str], ps_fraction: float,
         rng: np.random.Generator) -> Job:
    job_type = types[int(rng.integers(len(types)))]
    workers = int(rng.choice(spec.workers, p=spec.probs))
    use_ps = workers > 1 and rng.random() < ps_fraction
    num_ps = int(rng.integers(1, workers // 2 + 1)) if use_ps else 0
    duration = float(np.clip(spec.median_duration_s * np.exp(spec.sigma * rng.standard_normal()),
                             MIN_DURATION_S, MAX_DURATION_S))
    # Whole seconds and steps: the trace CSV keeps non-integers to 6 significant digits only.
    return Job(id=job_id, type=job_type, num_ps=num_ps, num_workers=workers,
               ps_demand=PS_DEMAND if num_ps else Resources(), worker_demand=WORKER_DEMAND,
               iterations=max(1, round(duration * reference_speed(profile_for(job_type)))),
               submit_time=float(round(submit)))


def _check(n: int, mix: str, rate: float | None, ps_fraction: float) -> Mix:
    if n < 1:
        raise InputError(f"number of jobs must be at least 1, got {n}")
    if mix not in MIXES:
        raise InputError(f"unknown mix '{mix}'; valid: {', '.join(MIXES)}")
    if rate is not None and not rate > 0:
        raise InputError(f"arrival rate must be positive, got {rate}")
    if not 0.0 <= ps_fraction <= 1.0:
        raise InputError(f"ps_fraction must be between 0 and 1, got {ps_fraction}")
    return MIXES[mix]
