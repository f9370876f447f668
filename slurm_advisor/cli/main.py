"""The `slurm-advisor` command. Each subcommand is a short click function over library code."""
from __future__ import annotations

import importlib
import os
import sys
from enum import IntEnum

import click

from slurm_advisor.errors import InputError


class ExitStatus(IntEnum):
    OK = 0
    ERROR = 1
    BAD_INPUT = 2


# Each command by the module that defines it, imported when the command runs (or --help lists it):
# `layout` and `report` run in every job step, and need no more than click and the standard
# library (no numpy, no store, no model), which a job's light install has (README).
COMMANDS = {
    **{name: "slurm_advisor.cli.admin" for name in ("status", "decisions", "observations", "export", "explain",
                                                    "shadow")},
    **{name: "slurm_advisor.cli.admin_models" for name in ("models", "mode")},
    **{name: "slurm_advisor.cli.serve" for name in ("serve", "ctl", "release")},
    **{name: f"slurm_advisor.cli.{name}" for name in ("canary", "convert", "db", "demo", "layout", "loop", "report",
                                                      "retrain", "setup", "simulate", "train")},
}


class AdvisorGroup(click.Group):
    """Turns an InputError anywhere below into one clear line and exit status 2; finds each
    command in its module on first use (``COMMANDS``)."""

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except InputError as e:
            click.echo(f"error: {e}", err=True)
            sys.exit(ExitStatus.BAD_INPUT)
        except ModuleNotFoundError as e:  # a command of a lighter install than it needs (torch: training)
            click.echo(f"error: {_lacks(ctx.invoked_subcommand, e)}", err=True)
            sys.exit(ExitStatus.BAD_INPUT)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*self.commands, *COMMANDS})

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in self.commands and name in COMMANDS:
            try:
                command = getattr(importlib.import_module(COMMANDS[name]), name)
            except ImportError as exc:  # a light install (jobs'): the command says what it lacks
                return _unavailable(name, exc)
            self.add_command(command, name)
        return self.commands.get(name)


def _unavailable(name: str, exc: ImportError) -> click.Command:
    """A command whose module needs what a light install lacks: listed, and says so when run."""
    def fail() -> None:
        raise InputError(_lacks(name, exc))

    return click.Command(name, callback=fail, help=f"(Not in this install: needs {exc.name or exc}.)",
                         context_settings={"ignore_unknown_options": True, "allow_extra_args": True})


def _lacks(command: str | None, exc: ImportError) -> str:
    missing = (exc.name or str(exc)).split(".")[0]
    how = ("install torch's CPU build (pip install torch --index-url https://download.pytorch.org/whl/cpu), "
           "then pip install 'slurm-advisor[train]'" if missing == "torch" else
           "pip install 'slurm-advisor[plots]'" if missing == "matplotlib" else
           "install slurm-advisor with its dependencies (pip install slurm-advisor)")
    return f"`slurm-advisor {command}` needs {missing}, which this install lacks; {how}"


@click.group(cls=AdvisorGroup)
@click.version_option(package_name="slurm-advisor")
def cli() -> None:
    """Learned placement of distributed ML training jobs on Slurm clusters."""


def _register() -> None:
    """Every command imported now (tests that read ``cli.commands``)."""
    for name in COMMANDS:
        cli.get_command(click.Context(cli), name)


def main() -> None:
    # Every matrix product the advisor makes is tiny (a decision's nodes, a batch of speed
    # contexts): BLAS and torch threads only add overhead, and on a host whose cores are busy
    # (slurmctld's, a simulation beside another) their spin-waits made a decision 10-60x slower.
    # Set before numpy and torch load; a site can still choose by setting the variables itself.
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(var, "1")
    cli()
