"""`slurm-advisor layout`: inside a job, where its tasks are and what each one is.

Reads the job's environment (SLURM_ADVISOR_LAYOUT when the advisor placed the job, else Slurm's
allocation, with as many PS tasks as --ps, SLURM_ADVISOR_PS or the job's marker in
SLURM_ADVISOR_MARKER says) and prints it in the form a launcher wants. Nothing read from the environment is run;
every node name is checked before it is printed (slurm_advisor/daemon/layout.py).
"""
from __future__ import annotations

import os
import shlex

import click

from slurm_advisor.daemon import layout as lay

FORMATS = ("shell", "hostfile", "tf-config", "torchrun", "json")


@click.command()
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="shell", show_default=True,
              help="shell: export lines for eval; hostfile: one node per task for SLURM_HOSTFILE; "
                   "tf-config: TF_CONFIG of one task; torchrun: this node's torchrun arguments; json.")
@click.option("--ps", type=click.IntRange(min=0), default=None,
              help="PS tasks of a job the advisor did not place (default: SLURM_ADVISOR_PS, else the ps= "
                   "of the job's marker in SLURM_ADVISOR_MARKER, which the hook sets, else 0).")
@click.option("--task-index", type=click.IntRange(min=0), default=None,
              help="tf-config: the task's rank in the job, PS first (default: SLURM_PROCID).")
@click.option("--node", default=None, help="torchrun: this node's name (default: SLURMD_NODENAME).")
@click.option("--base-port", type=click.IntRange(1, 65535), default=lay.DEFAULT_BASE_PORT, show_default=True,
              help="Port of task 0 (and torchrun's master port); task r listens on base + r.")
def layout(fmt: str, ps: int | None, task_index: int | None, node: str | None, base_port: int) -> None:
    """Print this job's task layout: PS hosts, worker hosts, hostfile, TF_CONFIG or torchrun args.

    \b
    eval "$(slurm-advisor layout)"                      # SLURM_ADVISOR_PS_HOSTS, _WORKER_HOSTS, ...
    slurm-advisor layout --format hostfile > hosts      # then SLURM_HOSTFILE=hosts
    srun --distribution=arbitrary ...                   # rank i runs on line i: ranks 0..P-1 are PS
    """
    env = os.environ
    job = lay.from_env(env, ps=ps)
    if job.warning:
        click.echo(f"warning: {job.warning}", err=True)
    if fmt == "shell":
        click.echo(lay.shell(job, env, base_port), nl=False)
    elif fmt == "hostfile":
        click.echo(lay.hostfile(job), nl=False)
    elif fmt == "tf-config":
        click.echo(lay.tf_config(job, lay.task_rank(env, task_index), env, base_port))
    elif fmt == "torchrun":
        click.echo(shlex.join(lay.torchrun_args(job, lay.this_node(env, node), env, base_port)))
    else:
        click.echo(lay.as_json(job))
