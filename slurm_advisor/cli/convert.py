"""`slurm-advisor convert ...`: turn public traces into the job trace CSV the simulator reads."""
from __future__ import annotations

from pathlib import Path

import click

from slurm_advisor.cli.output import replaced_whole
from slurm_advisor.domain import Job
from slurm_advisor.sim.trace import write_trace
from slurm_advisor.traces.gavel import gavel_jobs
from slurm_advisor.traces.philly import philly_jobs
from slurm_advisor.traces.pollux import pollux_jobs
from slurm_advisor.traces.synthetic import MIXES, synthetic_jobs

_IN = click.Path(exists=True, dir_okay=False, path_type=Path)
_OUT = click.option("--out", required=True, type=click.Path(dir_okay=False, path_type=Path),
                    help="Trace CSV to write.")
_SEED = click.option("--seed", default=0, show_default=True, help="Seed of the random choices.")


def _write(out: Path, jobs: list[Job]) -> None:
    with replaced_whole(out) as tmp:  # a failed write leaves no truncated trace
        n = write_trace(tmp, jobs)
    click.echo(f"wrote {n} jobs to {out}")


@click.group()
def convert() -> None:
    """Convert public job traces (Philly, Gavel, Pollux) or synthesize one."""


@convert.command()
@click.argument("path", type=_IN)
@click.option("--vc", default=None, help="Keep only this Philly virtual cluster.")
@click.option("--start-s", default=0, show_default=True, help="Window start, s since the first job.")
@click.option("--duration-s", type=int, default=None, help="Window length in s (default: to the end).")
@click.option("--max-jobs", type=int, default=None, help="Stop after this many jobs.")
@click.option("--time-scale", default=1.0, show_default=True, help="Divide arrival times by this.")
@_SEED
@_OUT
def philly(path: Path, vc: str | None, start_s: int, duration_s: int | None, max_jobs: int | None,
           time_scale: float, seed: int, out: Path) -> None:
    """Jobs from Philly's philly_jobs.csv.gz, typed by GPU-hours."""
    _write(out, philly_jobs(path, vc=vc, start_s=start_s, duration_s=duration_s,
                            max_jobs=max_jobs, time_scale=time_scale, seed=seed))


@convert.command()
@click.argument("path", type=_IN)
@click.option("--max-workers", default=8, show_default=True, help="Clamp larger scale factors to this.")
@_SEED
@_OUT
def gavel(path: Path, max_workers: int, seed: int, out: Path) -> None:
    """Jobs from a Gavel .trace file (old 7-field or current 10-field format)."""
    _write(out, gavel_jobs(path, max_workers=max_workers, seed=seed))


@convert.command()
@click.argument("workload_csv", type=_IN)
@click.argument("models_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@_SEED
@_OUT
def pollux(workload_csv: Path, models_dir: Path, seed: int, out: Path) -> None:
    """Jobs from a Pollux workload-N.csv; run lengths from MODELS_DIR/<app>/validation-<B>.csv."""
    _write(out, pollux_jobs(workload_csv, models_dir, seed=seed))


@convert.command()
@click.argument("n", type=click.IntRange(min=1))
@click.option("--mix", type=click.Choice(sorted(MIXES)), default="philly", show_default=True,
              help="Job-size mix.")
@click.option("--arrival-rate-per-h", type=float, default=None,
              help="Mean arrivals per hour (default: the mix's own rate).")
@click.option("--ps-fraction", default=0.5, show_default=True,
              help="Share of multi-worker jobs that use parameter servers.")
@click.option("--types", default=None, metavar="A,B,...",
              help="Comma-separated job type names to draw from (default: the published types).")
@_SEED
@_OUT
def synthetic(n: int, mix: str, arrival_rate_per_h: float | None, ps_fraction: float,
              types: str | None, seed: int, out: Path) -> None:
    """N synthetic jobs with Poisson arrivals."""
    _write(out, synthetic_jobs(n, seed=seed, mix=mix, arrival_rate_per_h=arrival_rate_per_h,
                               ps_fraction=ps_fraction,
                               types=None if types is None else types.split(",")))
