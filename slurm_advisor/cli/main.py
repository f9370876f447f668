"""The `slurm-advisor` command. Each subcommand is a short click function over library code."""
from __future__ import annotations

import os
import sys
from enum import IntEnum

import click

from slurm_advisor.errors import InputError


class ExitStatus(IntEnum):
    OK = 0
    ERROR = 1
    BAD_INPUT = 2


class AdvisorGroup(click.Group):
    """Turns an InputError anywhere below into one clear line and exit status 2."""

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except InputError as e:
            click.echo(f"error: {e}", err=True)
            sys.exit(ExitStatus.BAD_INPUT)


@click.group(cls=AdvisorGroup)
@click.version_option(package_name="slurm-advisor")
def cli() -> None:
    """Learned placement of distributed ML training jobs on Slurm clusters."""


def _register() -> None:
    from slurm_advisor.cli.admin import decisions, explain, export, mode, observations, shadow, status
    from slurm_advisor.cli.convert import convert
    from slurm_advisor.cli.db import db
    from slurm_advisor.cli.demo import demo
    from slurm_advisor.cli.layout import layout
    from slurm_advisor.cli.loop import loop
    from slurm_advisor.cli.models import models
    from slurm_advisor.cli.report import report
    from slurm_advisor.cli.retrain import retrain
    from slurm_advisor.cli.serve import ctl, release, serve
    from slurm_advisor.cli.simulate import simulate
    from slurm_advisor.cli.train import train

    for command in (demo, simulate, train, convert, layout, serve, ctl, release, db, report, retrain,
                    status, decisions, observations, export, explain, shadow, models, mode, loop):
        cli.add_command(command)


def main() -> None:
    # Every matrix product the advisor makes is tiny (a decision's nodes, a batch of speed
    # contexts): BLAS and torch threads only add overhead, and on a host whose cores are busy
    # (slurmctld's, a simulation beside another) their spin-waits made a decision 10-60x slower.
    # Set before numpy and torch load; a site can still choose by setting the variables itself.
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(var, "1")
    _register()
    cli()
