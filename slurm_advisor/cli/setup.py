"""`slurm-advisor setup`: lay out what the daemon needs on a controller (slurm_advisor/site_setup.py)."""
from __future__ import annotations

from pathlib import Path

import click

from slurm_advisor.site_setup import Plan, lay_out, next_steps, this_command


@click.command()
@click.option("--slurm-user", default="slurm", show_default=True,
              help="slurmctld's user: the daemon runs as it, owns the state directory, and may ask for advice.")
@click.option("--cron", is_flag=True, help="Write /etc/cron.d/slurm-advisor instead of the systemd units "
                                           "(for a controller without systemd).")
@click.option("--replace", is_flag=True,
              help="Rewrite files that differ from the shipped ones (each kept as FILE.bak first).")
@click.option("--root", type=click.Path(file_okay=False, path_type=Path), default=Path("/"), show_default=True,
              help="Write under this directory instead of / (a package build, a test); the paths "
                   "inside the files stay the target's.")
def setup(slurm_user: str, cron: bool, replace: bool, root: Path) -> None:
    """Write the config (observe mode), the state directory and the units for this environment.

    \b
    python3 -m venv /opt/slurm-advisor
    /opt/slurm-advisor/bin/pip install 'slurm-advisor[postgres]'
    /opt/slurm-advisor/bin/slurm-advisor setup        # as root; run again any time: it keeps edits
    """
    plan = Plan(root=root, slurm_user=slurm_user, command=this_command(), cron=cron, replace=replace)
    for line in lay_out(plan):
        click.echo(line)
    click.echo("next:")
    for line in next_steps(plan):
        click.echo(f"  {line}")
