"""The job-side layout module: host lists, Slurm's fallback, hostile input refused, each renderer."""
from __future__ import annotations

import json
import subprocess

import pytest

from slurm_advisor.daemon.layout import (
    JobLayout,
    address,
    as_json,
    expand_hostlist,
    expand_task_counts,
    from_env,
    hostfile,
    shell,
    task_rank,
    tf_config,
    this_node,
    torchrun_args,
)
from slurm_advisor.errors import InputError

ADVISED = {"SLURM_ADVISOR_LAYOUT": "ps=n1;worker=n1,n3,n3", "SLURM_ADVISOR_DECISION": "d-5f0c2a9e41b7"}


@pytest.mark.parametrize("spec, names", [  # as `scontrol show hostnames` of Slurm 22.05 prints them
    ("n[1-3,5],gpu[01-02]", ["n1", "n2", "n3", "n5", "gpu01", "gpu02"]),
    ("r[1-2]n[08-10]", ["r1n08", "r1n09", "r1n10", "r2n08", "r2n09", "r2n10"]),
    ("n[8-010]", ["n8", "n9", "n10"]),
    ("n[01-3]", ["n01", "n02", "n03"]),
    ("n1-[1-2]", ["n1-1", "n1-2"]),
    ("n[1,3]", ["n1", "n3"]),
    ("a,b", ["a", "b"]),
    ("n[1-2],n[1-2]", ["n1", "n2", "n1", "n2"]),
    ("node.x-1", ["node.x-1"]),
])
def test_hostlist_expands_as_slurm_does(spec: str, names: list[str]) -> None:
    assert expand_hostlist(spec) == names


@pytest.mark.parametrize("spec, says", [
    ("n[3-1]", "bad range '3-1'"), ("n[1-", "unclosed '['"), ("n]1", "unbalanced"), ("n[[1]]", "unbalanced"),
    ("n[]", "bad range ''"), ("n[a-b]", "bad range 'a-b'"), ("n1,,n2", "empty name"), ("n[1-]", "bad range"),
    ("n[0-99999999]", "more than 65536 hosts"), ("n[1-300]m[1-300]", "more than 65536 hosts"),
    ("n$(id)", "bad node name"), ("n;rm", "bad node name"), ("-n1", "bad node name"),
])
def test_bad_hostlist_is_refused_naming_the_variable(spec: str, says: str) -> None:
    with pytest.raises(InputError, match="^SLURM_JOB_NODELIST: ") as err:
        expand_hostlist(spec)
    assert says in str(err.value)


def test_task_counts() -> None:
    assert expand_task_counts("2(x3),1") == [2, 2, 2, 1]
    assert expand_task_counts("4") == [4]
    for bad in ("", "0", "2(x0)", "2x3", "a", "2(x3"):
        with pytest.raises(InputError, match="^SLURM_TASKS_PER_NODE: bad task count"):
            expand_task_counts(bad)


def test_advised_layout_is_read_as_is() -> None:
    job = from_env({**ADVISED, "SLURM_JOB_NODELIST": "n[1,3]", "SLURM_TASKS_PER_NODE": "3,1"}, ps=3)
    assert job == JobLayout(("n1",), ("n1", "n3", "n3"), "advisor", "d-5f0c2a9e41b7")  # --ps is for fallback
    assert job.tasks == ("n1", "n1", "n3", "n3")
    assert job.tasks_per_node == {"n1": 2, "n3": 2}
    assert [job.role(r) for r in range(4)] == [("ps", 0), ("worker", 0), ("worker", 1), ("worker", 2)]


def test_without_a_layout_slurms_allocation_is_used_ps_first() -> None:
    env = {"SLURM_JOB_NODELIST": "n[1-2],gpu07", "SLURM_TASKS_PER_NODE": "2(x2),1"}
    assert from_env(env) == JobLayout((), ("n1", "n1", "n2", "n2", "gpu07"), "slurm")
    assert from_env(env, ps=3).ps == ("n1", "n1", "n2")
    assert from_env({**env, "SLURM_ADVISOR_PS": "1"}).ps == ("n1",)
    assert from_env({**env, "SLURM_ADVISOR_PS": "1"}, ps=2).ps == ("n1", "n1")  # the flag wins
    assert from_env({**env, "SLURM_ADVISOR_DECISION": "d-1"}).decision == "d-1"  # capped, not placed


ARBITRARY_JOB = {"SLURM_JOB_NODELIST": "n[1,3]", "SLURM_NTASKS": "4", "SLURM_ARBITRARY_NODELIST": "n[3,1,3,3]"}


def test_an_arbitrary_job_left_to_slurm_gets_its_own_list_task_by_task() -> None:
    # 24.11/26.05: slurmd lays the batch step out by the list and sets no SLURM_TASKS_PER_NODE
    job = from_env({**ARBITRARY_JOB, "SLURM_ADVISOR_PS": "1"})
    assert (job.ps, job.workers, job.source) == (("n3",), ("n1", "n3", "n3"), "slurm")
    assert hostfile(job) == "n3\nn1\nn3\nn3\n"


@pytest.mark.parametrize("change", [
    {"SLURM_ARBITRARY_NODELIST": "n[1,3]"},          # 22.05: sbatch dropped the repeats
    {"SLURM_ARBITRARY_NODELIST": "n[3,2,3,3]"},      # inherited: n2 is not this job's
    {"SLURM_ARBITRARY_NODELIST": "n[3,1,3,3]$(id)"},
])
def test_an_arbitrary_list_that_is_not_this_jobs_tasks_is_not_used(change: dict[str, str]) -> None:
    with pytest.raises(InputError, match="SLURM_TASKS_PER_NODE is not set|SLURM_ARBITRARY_NODELIST"):
        from_env({**ARBITRARY_JOB, **change})


@pytest.mark.parametrize("env, ps, says", [
    ({}, None, "SLURM_JOB_NODELIST is not set: run inside a Slurm job, or set SLURM_ADVISOR_LAYOUT"),
    ({"SLURM_JOB_NODELIST": "n[1-2]"}, None,
     "SLURM_TASKS_PER_NODE is not set, though SLURM_JOB_NODELIST is: run inside a Slurm job"),
    ({"SLURM_JOB_NODELIST": "n[1-2]", "SLURM_TASKS_PER_NODE": "2(x3)"}, None,
     "SLURM_TASKS_PER_NODE='2(x3)' counts 3 nodes, SLURM_JOB_NODELIST='n[1-2]' names 2"),
    ({"SLURM_JOB_NODELIST": "n1", "SLURM_TASKS_PER_NODE": "2"}, 2,
     "--ps: 2 PS tasks leave no worker among the job's 2 tasks"),
    ({"SLURM_JOB_NODELIST": "n1", "SLURM_TASKS_PER_NODE": "2", "SLURM_ADVISOR_PS": "x"}, None,
     "SLURM_ADVISOR_PS='x' is not a count of PS tasks"),
])
def test_fallback_errors(env: dict[str, str], ps: int | None, says: str) -> None:
    with pytest.raises(InputError) as err:
        from_env(env, ps=ps)
    assert str(err.value) == says


@pytest.mark.parametrize("text, says", [
    ("ps=n1;worker=n2;rm -rf /", "SLURM_ADVISOR_LAYOUT: bad part 'rm -rf /'"),
    ("ps=n1;worker=$(reboot)", "SLURM_ADVISOR_LAYOUT: bad node name '$(reboot)'"),
    ("worker=n1,`id`", "SLURM_ADVISOR_LAYOUT: bad node name '`id`'"),
    ("worker=n1,n2 n3", "SLURM_ADVISOR_LAYOUT: bad node name 'n2 n3'"),
    ("worker=n1,,n2", "SLURM_ADVISOR_LAYOUT: bad node name ''"),
    ("worker=n'1", "SLURM_ADVISOR_LAYOUT: bad node name \"n'1\""),
    ("ps=n1", "SLURM_ADVISOR_LAYOUT: no workers"),
    ("chief=n1;worker=n2", "SLURM_ADVISOR_LAYOUT: bad part 'chief=n1'"),
])
def test_hostile_or_malformed_layout_is_refused(text: str, says: str) -> None:
    with pytest.raises(InputError) as err:
        from_env({"SLURM_ADVISOR_LAYOUT": text})
    assert str(err.value).startswith(says)


def test_layout_not_made_for_this_job_gives_way_to_the_allocation() -> None:
    """A job submitted from an advised job inherits its SLURM_ADVISOR_LAYOUT: it must still run."""
    job = from_env({**ADVISED, "SLURM_JOB_NODELIST": "n[1-2]", "SLURM_TASKS_PER_NODE": "1(x2)"}, ps=1)
    assert (job.ps, job.workers, job.source) == (("n1",), ("n2",), "slurm")
    assert job.warning == ("SLURM_ADVISOR_LAYOUT names node n3, which is not in this job's allocation "
                           "(SLURM_JOB_NODELIST=n[1-2]): not made for this job; using Slurm's allocation")
    assert from_env({**ADVISED, "SLURM_JOB_NODELIST": "n[1-3]"}).warning is None


def test_inside_an_srun_step_the_steps_tasks_are_counted() -> None:
    env = {"SLURM_JOB_NODELIST": "n[1,3]", "SLURM_TASKS_PER_NODE": "1", "SLURM_STEP_NODELIST": "n3",
           "SLURM_STEP_TASKS_PER_NODE": "2"}
    assert from_env(env, ps=1).tasks == ("n3", "n3")
    with pytest.raises(InputError, match="^SLURM_STEP_TASKS_PER_NODE='2,2' counts 2 nodes, "
                                         "SLURM_STEP_NODELIST='n3' names 1$"):
        from_env({**env, "SLURM_STEP_TASKS_PER_NODE": "2,2"})


def test_shell_lines_round_trip_through_bash() -> None:
    job = from_env(ADVISED)
    text = shell(job, {"SLURM_ADVISOR_ADDR_n1": "10.0.0.1"}, base_port=29600)
    assert text == ("export SLURM_ADVISOR_PS_HOSTS=n1\n"
                    "export SLURM_ADVISOR_WORKER_HOSTS=n1,n3,n3\n"
                    "export SLURM_ADVISOR_NUM_PS=1\n"
                    "export SLURM_ADVISOR_NUM_WORKERS=3\n"
                    "export SLURM_ADVISOR_MASTER_ADDR=10.0.0.1\n"
                    "export SLURM_ADVISOR_MASTER_PORT=29600\n"
                    "export SLURM_ADVISOR_LAYOUT_SOURCE=advisor\n")
    worker_only = shell(JobLayout((), ("n-1.a", "n_2"), "slurm"), {})
    assert "export SLURM_ADVISOR_PS_HOSTS=''\n" in worker_only
    script = 'eval "$(cat)"; echo "$SLURM_ADVISOR_PS_HOSTS|$SLURM_ADVISOR_WORKER_HOSTS|$SLURM_ADVISOR_NUM_PS"'
    for lines, expected in ((text, "n1|n1,n3,n3|1"), (worker_only, "|n-1.a,n_2|0")):
        out = subprocess.run(["bash", "-c", script], input=lines, capture_output=True, text=True, check=True)
        assert out.stdout == expected + "\n"


def test_hostfile_is_one_line_per_task_ps_first() -> None:
    assert hostfile(from_env(ADVISED)) == "n1\nn1\nn3\nn3\n"


def test_tf_config_per_rank() -> None:
    job, env = from_env(ADVISED), {"SLURM_ADVISOR_ADDR_n3": "10.0.0.3"}
    cluster = {"ps": ["n1:29500"], "worker": ["n1:29501", "10.0.0.3:29502", "10.0.0.3:29503"]}
    assert json.loads(tf_config(job, 0, env)) == {"cluster": cluster, "task": {"type": "ps", "index": 0}}
    assert json.loads(tf_config(job, 3, env)) == {"cluster": cluster, "task": {"type": "worker", "index": 2}}
    assert json.loads(tf_config(JobLayout((), ("n1",), "slurm"), 0, {}, 7000)) == {
        "cluster": {"worker": ["n1:7000"]}, "task": {"type": "worker", "index": 0}}
    with pytest.raises(InputError, match="task rank 4 is out of range: the layout has 4 tasks"):
        tf_config(job, 4, env)
    with pytest.raises(InputError, match="--base-port 65534: task 2's port 65536 is not a TCP port"):
        tf_config(job, 0, env, 65534)


def test_task_rank_and_node_come_from_slurm_unless_given() -> None:
    assert task_rank({"SLURM_PROCID": "3"}, None) == 3
    assert task_rank({"SLURM_PROCID": "3"}, 1) == 1
    with pytest.raises(InputError, match="^SLURM_PROCID is not set: give --task-index"):
        task_rank({}, None)
    assert this_node({"SLURMD_NODENAME": "n3"}, None) == "n3"
    assert this_node({"SLURMD_NODENAME": "n3"}, "n1") == "n1"
    with pytest.raises(InputError, match="^SLURMD_NODENAME is not set: give --node"):
        this_node({}, None)
    with pytest.raises(InputError, match="^--node: bad node name"):
        this_node({}, "n1;id")


def test_torchrun_arguments() -> None:
    job = JobLayout((), ("n2", "n2", "n4", "n4"), "advisor")
    env = {"SLURM_ADVISOR_ADDR_n2": "127.0.0.1"}
    assert torchrun_args(job, "n4", env, 29511) == [
        "--nnodes=2", "--node-rank=1", "--master-addr=127.0.0.1", "--master-port=29511", "--nproc-per-node=2"]
    assert torchrun_args(job, "n2", {})[1:3] == ["--node-rank=0", "--master-addr=n2"]


@pytest.mark.parametrize("job, node, says", [
    (JobLayout((), ("n1", "n1", "n3"), "advisor"), "n1",
     ("torchrun needs the same number of processes on every node, and the layout has n1:2, n3:1; "
      "use --format hostfile with srun --distribution=arbitrary")),
    (JobLayout(("n1",), ("n1",), "advisor"), "n1", "torchrun starts workers only, and this layout has 1 PS"),
    (JobLayout((), ("n1",), "advisor"), "n2", "node n2 runs no task of this layout (n1)"),
])
def test_torchrun_refusals(job: JobLayout, node: str, says: str) -> None:
    with pytest.raises(InputError) as err:
        torchrun_args(job, node, {})
    assert str(err.value).startswith(says)


def test_address_override_is_checked() -> None:
    assert address("n1", {}) == "n1"
    assert address("gpu-01.rack", {"SLURM_ADVISOR_ADDR_gpu_01_rack": "fe80::1"}) == "fe80::1"
    with pytest.raises(InputError, match=r"^SLURM_ADVISOR_ADDR_n1='\$\(id\)' is not a host name or IP address$"):
        address("n1", {"SLURM_ADVISOR_ADDR_n1": "$(id)"})


def test_json() -> None:
    assert json.loads(as_json(from_env(ADVISED))) == {
        "source": "advisor", "decision": "d-5f0c2a9e41b7", "ps": ["n1"], "worker": ["n1", "n3", "n3"],
        "tasks_per_node": {"n1": 2, "n3": 2}, "warning": None}


MARKED = {"SLURM_JOB_NODELIST": "n[1-2]", "SLURM_TASKS_PER_NODE": "2,1",
          "SLURM_ADVISOR_MARKER": "slurm-advisor: type=mlp ps=1 workers=2"}


def test_a_job_slurm_placed_takes_its_ps_count_from_its_marker() -> None:
    assert from_env(MARKED) == JobLayout(("n1",), ("n1", "n2"), "slurm")
    assert from_env({**MARKED, "SLURM_ADVISOR_MARKER": "ticket 42; slurm-advisor: type=mlp ps=2 workers=1"}).ps == \
        ("n1", "n1")  # the marker anywhere in the comment, as the daemon reads it
    assert from_env(MARKED, ps=0).ps == ()  # the flag wins
    assert from_env({**MARKED, "SLURM_ADVISOR_PS": "2"}).ps == ("n1", "n1")  # and the explicit variable
    advised = from_env({**MARKED, **ADVISED, "SLURM_JOB_NODELIST": "n[1,3]", "SLURM_TASKS_PER_NODE": "2(x2)"})
    assert advised.source == "advisor" and advised.ps == ("n1",)  # the advised layout is read as is


def test_a_marker_inherited_from_another_job_is_set_aside_with_a_warning() -> None:
    job = from_env({**MARKED, "SLURM_TASKS_PER_NODE": "2,2"})  # 4 tasks; the marker says 3
    assert job.ps == () and job.warning == ("SLURM_ADVISOR_MARKER says ps=1 workers=2, but this job has 4 tasks: "
                                            "not made for this job; no PS (give --ps)")


@pytest.mark.parametrize("marker, says", [
    ("slurm-advisor: type=mlp ps=1", "SLURM_ADVISOR_MARKER: comment: marker lacks workers; or give --ps"),
    ("slurm-advisor: type=mlp ps=x workers=2",
     "SLURM_ADVISOR_MARKER: comment: marker ps='x' is not an integer; or give --ps"),
    ("type=mlp ps=1 workers=2",
     "SLURM_ADVISOR_MARKER='type=mlp ps=1 workers=2' holds no 'slurm-advisor:' marker; or give --ps"),
    ("slurm-advisor: type=mlp ps=3 workers=0",
     "SLURM_ADVISOR_MARKER: comment: marker needs workers >= 1 and ps >= 0; or give --ps"),
])
def test_a_bad_marker_is_one_input_error(marker: str, says: str) -> None:
    with pytest.raises(InputError) as err:
        from_env({**MARKED, "SLURM_ADVISOR_MARKER": marker})
    assert str(err.value) == says
