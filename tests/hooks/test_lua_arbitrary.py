"""The hook's exact pins for jobs submitted with -m arbitrary (hooks/slurm_advisor.lua): what it
tells the daemon, what it writes for a reply with ``task_nodes``, and that it writes no per-task
list for any other job nor a pin without one for an arbitrary job (on 22.05 repeats are refused at
submission; an arbitrary job pinned without them would get one task per node)."""
from __future__ import annotations

from typing import Any

import pytest
from fake_advisor import CAP, PLACE, FakeAdvisor
from lua_driver import REPO, lua_socket_missing

from slurm_advisor.daemon.protocol import decode_request

pytestmark = pytest.mark.skipif(bool(lua_socket_missing()), reason=lua_socket_missing() or "")

MARKER = "slurm-advisor: type=resnet50 ps=1 workers=4 nodes=any"
# as sbatch -m arbitrary -w n1,n3,n3,n3,n3 sends it: req_nodes and the environment's copy
ARBITRARY = {"comment": MARKER, "num_tasks": 5, "min_nodes": 2, "req_nodes": "n[1,3,3,3,3]",
             "environment": {"SLURM_ARBITRARY_NODELIST": "n[1,3,3,3,3]", "HOME": "/home/u"}}
EXACT = {**PLACE, "nodes": "n[2,4]", "task_nodes": "n2,n4,n4,n2,n2", "layout": "ps=n2;worker=n4,n4,n2,n2"}


def writes(result: dict[str, Any]) -> dict[str, Any]:
    assert result["rc"] == 0
    return dict(result["writes"])


@pytest.mark.parametrize(("fields", "flag"), [
    (ARBITRARY, True),
    # inherited from a parent job's environment: this submission's -w differs
    ({**ARBITRARY, "req_nodes": "n[1,3]"}, False),
    ({**ARBITRARY, "environment": {"HOME": "/home/u"}}, None),
    ({**ARBITRARY, "environment": None}, None),  # srun/salloc: no environment to read
])
def test_the_request_says_whether_the_job_is_arbitrary(run_hook, daemon: FakeAdvisor, fields, flag) -> None:
    run_hook(fields)
    assert decode_request(daemon.requests[0])["job"]["arbitrary"] is flag


def test_an_exact_pin_writes_one_node_per_task_and_the_batch_steps_list(run_hook, daemon: FakeAdvisor) -> None:
    daemon.reply_with(EXACT)
    got = writes(run_hook(ARBITRARY))
    assert got["req_nodes"] == "n2,n4,n4,n2,n2"
    assert got["environment.SLURM_ARBITRARY_NODELIST"] == "n2,n4,n4,n2,n2"
    assert got["min_nodes"] == 2 and got["max_nodes"] == 2 and got["num_tasks"] == 5
    assert got["environment.SLURM_ADVISOR_LAYOUT"] == "ps=n2;worker=n4,n4,n2,n2"


BAD = {
    "a list for a job not submitted arbitrary": ({**ARBITRARY, "environment": {}}, EXACT),
    "an arbitrary job pinned without a list": (ARBITRARY, PLACE),
    "an arbitrary job capped": (ARBITRARY, CAP),
    "fewer entries than tasks": (ARBITRARY, {**EXACT, "task_nodes": "n2,n4,n4,n2"}),
    "another node count": (ARBITRARY, {**EXACT, "task_nodes": "n2,n4,n4,n2,n1"}),
    "an empty name": (ARBITRARY, {**EXACT, "task_nodes": "n2,,n4,n2,n2"}),
    "a range": (ARBITRARY, {**EXACT, "task_nodes": "n[2,4,4,2,2]"}),
    "shell": (ARBITRARY, {**EXACT, "task_nodes": "n2;id,n4,n4,n2,n2"}),
    "not a string": (ARBITRARY, {**EXACT, "task_nodes": 5}),
}


@pytest.mark.parametrize("kind", list(BAD))
def test_a_pin_that_does_not_fit_the_distribution_changes_nothing(run_hook, daemon: FakeAdvisor, kind: str) -> None:
    fields, reply = BAD[kind]
    daemon.reply_with(reply)
    result = run_hook(fields)
    assert result["rc"] == 0 and result["writes"] == [] and result["unchanged"] is True
    assert len(result["logs"]) == 1 and "bad reply ignored" in result["logs"][0], result["logs"]


def test_the_client_side_filter_leaves_arbitrary_jobs_to_the_submit_hook(run_hook, daemon: FakeAdvisor) -> None:
    daemon.reply_with(PLACE)
    options = {"type": "sbatch", "comment": MARKER, "ntasks": "5", "nodes": "1-0", "distribution": "arbitrary",
               "nodelist": "n[1,3,3,3,3]"}
    result = run_hook(options, "cli", REPO / "hooks" / "cli_filter.lua")
    assert result["writes"] == [] and daemon.connections == 0
    run_hook({**options, "distribution": "block"}, "cli", REPO / "hooks" / "cli_filter.lua")
    assert daemon.connections == 1  # any other distribution is asked about as before
