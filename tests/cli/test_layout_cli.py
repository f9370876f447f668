"""`slurm-advisor layout`, in-process, with the job's environment given literally."""
from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from slurm_advisor.cli.layout import layout
from slurm_advisor.cli.main import cli

if "layout" not in cli.commands:
    cli.add_command(layout)

#: Every variable the command reads, unset unless a test sets it (the tests may run inside a job).
_CLEAR = dict.fromkeys(("SLURM_ADVISOR_LAYOUT", "SLURM_ADVISOR_DECISION", "SLURM_ADVISOR_PS", "SLURM_ADVISOR_MARKER",
                        "SLURM_JOB_NODELIST", "SLURM_TASKS_PER_NODE", "SLURM_STEP_NODELIST",
                        "SLURM_STEP_TASKS_PER_NODE", "SLURM_PROCID", "SLURMD_NODENAME",
                        "SLURM_ADVISOR_ADDR_n1", "SLURM_ADVISOR_ADDR_n3"))
ADVISED = {"SLURM_ADVISOR_LAYOUT": "ps=n1;worker=n1,n3,n3", "SLURM_ADVISOR_DECISION": "d-5f0c2a9e41b7",
           "SLURM_JOB_NODELIST": "n[1,3]", "SLURM_TASKS_PER_NODE": "3,1"}


def _run(env: dict[str, str], *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["layout", *args], env={**_CLEAR, **env})
    return result.exit_code, result.stdout, result.stderr


def test_shell_is_the_default() -> None:
    assert _run(ADVISED) == (0, ("export SLURM_ADVISOR_PS_HOSTS=n1\n"
                                 "export SLURM_ADVISOR_WORKER_HOSTS=n1,n3,n3\n"
                                 "export SLURM_ADVISOR_NUM_PS=1\n"
                                 "export SLURM_ADVISOR_NUM_WORKERS=3\n"
                                 "export SLURM_ADVISOR_MASTER_ADDR=n1\n"
                                 "export SLURM_ADVISOR_MASTER_PORT=29500\n"
                                 "export SLURM_ADVISOR_LAYOUT_SOURCE=advisor\n"), "")


def test_hostfile_of_an_unadvised_job_with_ps() -> None:
    env = {"SLURM_JOB_NODELIST": "n[1,3]", "SLURM_TASKS_PER_NODE": "3,1"}
    assert _run(env, "--format", "hostfile") == (0, "n1\nn1\nn1\nn3\n", "")
    assert _run({**env, "SLURM_ADVISOR_PS": "2"}, "--format", "json")[1] == (
        '{"source": "slurm", "decision": null, "ps": ["n1", "n1"], "worker": ["n1", "n3"], '
        '"tasks_per_node": {"n1": 3, "n3": 1}, "warning": null}\n')


def test_a_layout_from_another_job_is_set_aside_with_a_warning() -> None:
    env = {**ADVISED, "SLURM_JOB_NODELIST": "n2", "SLURM_TASKS_PER_NODE": "2"}
    assert _run(env, "--format", "hostfile", "--ps", "1") == (
        0, "n2\nn2\n", ("warning: SLURM_ADVISOR_LAYOUT names node n1, which is not in this job's allocation "
                        "(SLURM_JOB_NODELIST=n2): not made for this job; using Slurm's allocation\n"))


def test_tf_config_from_procid_or_task_index() -> None:
    code, out, _ = _run({**ADVISED, "SLURM_PROCID": "2", "SLURM_ADVISOR_ADDR_n3": "127.0.0.1"},
                        "--format", "tf-config", "--base-port", "4000")
    assert code == 0
    assert out == ('{"cluster":{"ps":["n1:4000"],"worker":["n1:4001","127.0.0.1:4002","127.0.0.1:4003"]},'
                   '"task":{"type":"worker","index":1}}\n')
    assert json.loads(_run(ADVISED, "--format", "tf-config", "--task-index", "0")[1])["task"] == {
        "type": "ps", "index": 0}


def test_torchrun_for_this_node() -> None:
    env = {"SLURM_ADVISOR_LAYOUT": "worker=n1,n1,n3,n3", "SLURMD_NODENAME": "n3", "SLURM_ADVISOR_ADDR_n1": "10.1.2.3"}
    assert _run(env, "--format", "torchrun") == (
        0, "--nnodes=2 --node-rank=1 --master-addr=10.1.2.3 --master-port=29500 --nproc-per-node=2\n", "")
    assert _run(env, "--format", "torchrun", "--node", "n1")[1].split()[1] == "--node-rank=0"


@pytest.mark.parametrize("env, args, message", [
    (ADVISED, ["--format", "torchrun", "--node", "n1"],
     ("error: torchrun starts workers only, and this layout has 1 PS tasks; "
     "use --format hostfile with srun --distribution=arbitrary\n")),
    ({"SLURM_ADVISOR_LAYOUT": "worker=n1,n1,n3"}, ["--format", "torchrun", "--node", "n1"],
     ("error: torchrun needs the same number of processes on every node, and the layout has n1:2, n3:1; "
     "use --format hostfile with srun --distribution=arbitrary\n")),
    ({}, [], "error: SLURM_JOB_NODELIST is not set: run inside a Slurm job, or set SLURM_ADVISOR_LAYOUT\n"),
    ({"SLURM_ADVISOR_LAYOUT": "ps=n1;worker=$(reboot)"}, ["--format", "hostfile"],
     "error: SLURM_ADVISOR_LAYOUT: bad node name '$(reboot)': letters, digits and ._- only (64 at most)\n"),
    ({"SLURM_ADVISOR_LAYOUT": "worker=n1;rm -rf ~"}, [],
     "error: SLURM_ADVISOR_LAYOUT: bad part 'rm -rf ~'; expected ps=<nodes>;worker=<nodes>\n"),
    (ADVISED, ["--format", "tf-config"], ("error: SLURM_PROCID is not set: give --task-index or run the "
                                         "command in a task that srun started\n")),
    ({"SLURM_JOB_NODELIST": "n[1-", "SLURM_TASKS_PER_NODE": "1"}, [],
     "error: SLURM_JOB_NODELIST: bad host list 'n[1-': unclosed '['\n"),
])
def test_bad_input_is_one_line_and_exit_2(env: dict[str, str], args: list[str], message: str) -> None:
    assert _run(env, *args) == (2, "", message)


def test_bad_option_is_a_usage_error() -> None:
    code, _, err = _run(ADVISED, "--format", "yaml")
    assert code == 2 and "Invalid value for '--format'" in err


def test_the_readmes_ps_job_placed_by_slurm_gets_its_ps_from_the_marker_the_hook_exported() -> None:
    # observe mode: Slurm put the 4 tasks on n1 (3) and n3 (1); the hook copied the comment's marker
    env = {"SLURM_JOB_NODELIST": "n[1,3]", "SLURM_TASKS_PER_NODE": "3,1",
           "SLURM_ADVISOR_MARKER": "slurm-advisor: type=resnet50 ps=1 workers=3 model_mb=98 batch=64"}
    code, out, err = _run(env)
    assert code == 0 and err == ""
    assert "export SLURM_ADVISOR_PS_HOSTS=n1\n" in out and "export SLURM_ADVISOR_WORKER_HOSTS=n1,n1,n3\n" in out
    assert "export SLURM_ADVISOR_LAYOUT_SOURCE=slurm\n" in out
    code, out, err = _run({**env, "SLURM_ADVISOR_MARKER": "slurm-advisor: type=resnet50 ps=1"})
    assert code != 0 and "SLURM_ADVISOR_MARKER: comment: marker lacks workers; or give --ps" in out + err
