"""`retrain --submit`: the same retrain as a Slurm batch job (e.g. on a GPU partition).

The sbatch command is an argument list, never a shell string. ``--wrap`` needs one command line,
which is built from the retrain's own arguments with ``shlex.join`` (every argument quoted), so
no option value can reach the batch shell as code. The job runs this Python interpreter
(``python -m slurm_advisor.cli``): the compute node must see the same installation.
"""
from __future__ import annotations

import shlex
import subprocess
import sys
from collections.abc import Callable, Sequence

from slurm_advisor.errors import InputError

JOB_NAME = "slurm-advisor-retrain"


def sbatch_argv(retrain_args: Sequence[str], *, partition: str | None = None,
                sbatch_args: Sequence[str] = (), python: str = sys.executable) -> list[str]:
    """``sbatch --parsable ... --wrap 'python -m slurm_advisor.cli retrain ARGS'``."""
    argv = ["sbatch", "--parsable", f"--job-name={JOB_NAME}"]
    if partition:
        argv.append(f"--partition={partition}")
    argv.extend(sbatch_args)
    argv += ["--wrap", shlex.join([python, "-m", "slurm_advisor.cli", "retrain", *retrain_args])]
    return argv


def submit(argv: Sequence[str], run: Callable[..., subprocess.CompletedProcess] = subprocess.run,
           timeout_s: float = 60.0) -> str:
    """Run sbatch; the job id it printed. InputError when sbatch is missing or refuses."""
    try:
        done = run(list(argv), capture_output=True, text=True, timeout=timeout_s, check=False)
    except FileNotFoundError:
        raise InputError("sbatch not found: --submit needs Slurm's commands on this machine") from None
    except subprocess.TimeoutExpired:
        raise InputError(f"sbatch did not answer within {timeout_s:g} s") from None
    if done.returncode != 0:
        detail = (done.stderr or done.stdout or "").strip().splitlines()
        raise InputError(f"sbatch refused the retrain job: {detail[-1] if detail else f'exit {done.returncode}'}")
    return done.stdout.strip().split(";")[0]
