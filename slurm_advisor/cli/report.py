"""`slurm-advisor report`: a job script tells the daemon its speed. It never fails the job."""
from __future__ import annotations

import math
import sys
from pathlib import Path

import click


@click.command()
@click.option("--iterations", help="Training iterations done in the window.")
@click.option("--seconds", help="Length of the window in seconds (ending now).")
@click.option("--job-id", help="Slurm job id (default $SLURM_JOB_ID).")
@click.option("--socket", "socket_path", type=click.Path(path_type=Path),
              help="The daemon's socket (default $SLURM_ADVISOR_SOCKET or /run/slurm-advisor/advisor.sock).")
@click.option("--address", help="The daemon's report port as host:port, for jobs on other hosts (default "
              "$SLURM_ADVISOR_REPORT_ADDRESS; unset: the local socket). The report is signed with MUNGE.")
@click.option("--verbose", is_flag=True, help="Say on stderr (one line) when the report was not taken.")
def report(iterations, seconds, job_id, socket_path, address, verbose) -> None:
    """Report a running job's speed to the advisor. Prints nothing on stdout and exits 0 whatever
    happens (daemon away, slow or refusing), so a job script never fails because of it."""
    from slurm_advisor.report import send

    try:
        values = float(iterations or "nan"), float(seconds or "nan")
        if not all(math.isfinite(v) for v in values):
            raise ValueError("not finite")
        problem = send(*values, job_id=job_id, socket=socket_path, address=address)
    except ValueError:
        problem = f"--iterations {iterations!r} and --seconds {seconds!r} must be finite numbers"
    except Exception as exc:  # noqa: BLE001 -- never fail the job
        problem = f"{type(exc).__name__}: {exc}"
    if problem and verbose:
        click.echo(f"slurm-advisor report: not reported: {problem}", err=True)
    sys.exit(0)
