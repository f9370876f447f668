"""hooks/job_submit.lua and hooks/cli_filter.lua under lua5.1 with a mocked `slurm`, against a fake daemon.

The Lua side (tests/hooks/lua/driver.lua) runs one hook call and prints what it wrote; this side
serves the canned replies and checks: the right fields for place/cap, nothing at all written for
every failure, always SUCCESS, bounded by the timeout, and no connection unless the job is marked.
"""
from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fake_advisor import CAP, NONE, OBSERVE, PLACE, FakeAdvisor, close_silently, line
from lua_driver import DRIVER, HOOK, LUA, MODULE, REPO, TIMEOUT_S, lua_literal, lua_socket_missing

from slurm_advisor.daemon.protocol import decode_request
from slurm_advisor.slurm.marker import parse_marker
from slurm_advisor.slurm.request import read

CLI_FILTER = REPO / "hooks" / "cli_filter.lua"

# what the hook copies of the marker into a batch job's environment (for `slurm-advisor layout`)
MARKER_ENV = "slurm-advisor: type=resnet50 ps=1 workers=4 batch=64"
MARKED = {"comment": 'run 7 "x" slurm-advisor: type=resnet50 ps=1 workers=4 batch=64', "name": "train",
          "user_id": 1000, "partition": "batch", "num_tasks": 5, "cpus_per_task": 2, "mem_per_cpu": 4000,
          "tres_per_task": "gres:gpu:1", "time_limit": 120, "environment": {"HOME": "/home/u"}}


pytestmark = pytest.mark.skipif(bool(lua_socket_missing()), reason=lua_socket_missing() or "")


def assert_untouched(result: dict[str, Any]) -> None:
    assert result["rc"] == 0
    assert result["writes"] == []
    assert result["unchanged"] is True


def writes(result: dict[str, Any]) -> dict[str, Any]:
    assert result["rc"] == 0
    return dict(result["writes"])


def test_place_writes_nodes_tasks_layout_and_decision(run_hook, daemon: FakeAdvisor) -> None:
    daemon.reply_with(PLACE)
    result = run_hook(MARKED)
    assert writes(result) == {
        "req_nodes": "n1,n3", "min_nodes": 2, "max_nodes": 2, "num_tasks": 5,
        "admin_comment": "slurm-advisor:d-5f0c2a9e41b7",
        "environment.SLURM_ADVISOR_LAYOUT": "ps=n1;worker=n1,n3,n3,n3",
        "environment.SLURM_ADVISOR_DECISION": "d-5f0c2a9e41b7", "environment.SLURM_ADVISOR_MARKER": MARKER_ENV,
    }
    assert result["after"]["comment"] == MARKED["comment"]  # the user's text is kept
    assert daemon.connections == 1


def test_place_in_segments_writes_the_segment_size(run_hook, daemon: FakeAdvisor) -> None:
    # topology/block on 26.05: a pin across blocks goes as segments, each inside one block
    daemon.reply_with({**PLACE, "segment_size": 1})
    result = writes(run_hook(MARKED))
    assert result["segment_size"] == 1 and result["req_nodes"] == "n1,n3"


def test_request_is_the_protocols_advise(run_hook, daemon: FakeAdvisor) -> None:
    fields = {**MARKED, "comment": 'q"b\\s\nt\tü\x01 slurm-advisor: type=bert ps=0 workers=4'}
    run_hook(fields)
    request = decode_request(daemon.requests[0])
    assert daemon.requests[0].endswith(b"}\n") and daemon.requests[0].count(b"\n") == 1
    job = request["job"]
    assert request["op"] == "advise"
    assert job["comment"] == fields["comment"]  # escapes round-trip
    assert job == {**job, "name": "train", "user_id": 1000, "partition": "batch", "num_tasks": 5,
                   "cpus_per_task": 2, "pn_min_memory": 4000, "mem_per_cpu": True,
                   "tres_per_task": "gres:gpu:1", "tres_per_node": None, "time_limit": 120,
                   "min_nodes": None, "max_nodes": None, "req_nodes": None}
    assert parse_marker(job["comment"]).workers == 4
    task = read({**job, "comment": MARKED["comment"]}).task  # the marker of the job's own 5 tasks
    assert task.mem_mb == 8000 and task.gpus == 1


def test_unset_fields_are_null_and_mem_per_node_is_not_per_cpu(run_hook, daemon: FakeAdvisor) -> None:
    run_hook({"comment": "slurm-advisor: type=x ps=1 workers=1", "mem_per_node": 16000,
              "min_nodes": 2, "max_nodes": 2})
    job = decode_request(daemon.requests[0])["job"]
    assert job["num_tasks"] is None and job["cpus_per_task"] is None and job["time_limit"] is None
    assert job["pn_min_memory"] == 16000 and job["mem_per_cpu"] is False
    assert job["min_nodes"] == 2 and job["max_nodes"] == 2 and job["name"] is None


def test_escaped_text_in_a_reply_is_read(run_hook, daemon: FakeAdvisor) -> None:
    """json.dumps writes non-ASCII as \\u escapes, beyond the BMP as surrogate pairs."""
    daemon.reply_with({**PLACE, "reason": 'é 中 😀 "q" \\ \n\t/', "extra": 1.5e-3})
    assert writes(run_hook(MARKED))["req_nodes"] == "n1,n3"


def test_cap_writes_max_nodes_switches_and_seconds(run_hook, daemon: FakeAdvisor) -> None:
    daemon.reply_with(CAP)
    assert writes(run_hook(MARKED)) == {
        "max_nodes": 3, "req_switch": 1, "wait4switch": 600, "admin_comment": "slurm-advisor:d-00aa11bb22cc",
        "environment.SLURM_ADVISOR_DECISION": "d-00aa11bb22cc", "environment.SLURM_ADVISOR_MARKER": MARKER_ENV}


def test_cap_without_switches_leaves_them(run_hook, daemon: FakeAdvisor) -> None:
    daemon.reply_with({**CAP, "switches": None, "wait4switch_s": None})
    assert set(writes(run_hook(MARKED))) == {"max_nodes", "admin_comment", "environment.SLURM_ADVISOR_DECISION",
                                             "environment.SLURM_ADVISOR_MARKER"}


def test_interactive_job_gets_fields_and_no_environment(run_hook, daemon: FakeAdvisor) -> None:
    daemon.reply_with(PLACE)
    got = writes(run_hook({**MARKED, "environment": None}))
    assert got["req_nodes"] == "n1,n3" and "environment.SLURM_ADVISOR_LAYOUT" not in got


def test_observe_stamps_only_the_decision_id(run_hook, daemon: FakeAdvisor) -> None:
    daemon.reply_with(OBSERVE)
    assert writes(run_hook(MARKED)) == {"admin_comment": "slurm-advisor:d-0123456789ab:observed", "environment.SLURM_ADVISOR_MARKER": MARKER_ENV}


def test_the_stamp_is_appended_to_a_sites_admin_comment(run_hook, daemon: FakeAdvisor) -> None:
    daemon.reply_with(OBSERVE)
    written = writes(run_hook({**MARKED, "admin_comment": "qos-router:gpu"}))
    assert written["admin_comment"] == "qos-router:gpu slurm-advisor:d-0123456789ab:observed"


def test_observe_changes_no_client_option(run_hook, daemon: FakeAdvisor) -> None:
    daemon.reply_with(OBSERVE)
    assert writes(run_hook(CLI_OPTIONS, "cli", CLI_FILTER)) == {}


def test_none_changes_nothing(run_hook, daemon: FakeAdvisor) -> None:
    daemon.reply_with(NONE)
    result = run_hook(MARKED)
    assert_untouched(result)
    assert daemon.connections == 1 and result["logs"] == []


BAD_REPLIES = {
    "garbage bytes": b"\x00\xff\xfe garbage\n",
    "not json": b"hello\n",
    "json array": b'[{"v":1}]\n',
    "nested object": line({**PLACE, "nodes": {"n1": 1}}),
    "nodes not a string": line({**PLACE, "nodes": 13}),
    "shell in nodes": line({**PLACE, "nodes": "n1;rm -rf /"}),
    "space in nodes": line({**PLACE, "nodes": "n1 n2"}),
    "empty nodes": line({**PLACE, "nodes": ""}),
    "count as string": line({**PLACE, "min_nodes": "2", "max_nodes": "2"}),
    "fractional tasks": line({**PLACE, "num_tasks": 2.5}),
    "zero tasks": line({**PLACE, "num_tasks": 0}),
    "tasks too large": line({**PLACE, "num_tasks": 2**31}),
    "min and max differ": line({**PLACE, "min_nodes": 1}),
    "zero segment": line({**PLACE, "segment_size": 0}),
    "segment as string": line({**PLACE, "segment_size": "1"}),
    "no layout": line({k: v for k, v in PLACE.items() if k != "layout"}),
    "newline in layout": line({**PLACE, "layout": "ps=n1\nworker=n3"}),
    "bad decision": line({**PLACE, "decision": "d-1 x"}),
    "unknown action": line({**PLACE, "action": "drop"}),
    "boolean max_nodes": line({**CAP, "max_nodes": True}),
    "wait without switches": line({**CAP, "switches": None}),
    "negative wait": line({**CAP, "wait4switch_s": -1}),
    "other version": line({**PLACE, "v": 2}),
    "ok missing": line({k: v for k, v in PLACE.items() if k != "ok"}),
    "refused": line({"v": 1, "ok": False, "error": "comment: marker lacks ps %s %d"}),
    "two lines": line(PLACE) + line(PLACE),
    "duplicate key": line(PLACE)[:-2] + b',"action":"place"}\n',
    "huge line": b'{"v":1,"x":"' + b"a" * 200_000 + b'"}\n',
    "huge without newline": b"b" * 200_000,
    "half a line then close": line(PLACE)[:40],
}


@pytest.mark.parametrize("kind", list(BAD_REPLIES))
def test_bad_reply_changes_nothing(run_hook, daemon: FakeAdvisor, kind: str) -> None:
    daemon.reply_with(BAD_REPLIES[kind])
    if kind in ("half a line then close", "huge without newline"):
        data = BAD_REPLIES[kind]
        daemon.behaviour = lambda conn, request: conn.sendall(data)  # then the handler closes
    result = run_hook(MARKED)
    assert_untouched(result)
    assert daemon.connections == 1
    assert len(result["logs"]) == 1 and "slurm-advisor: " in result["logs"][0], result["logs"]
    assert result["elapsed_ms"] < TIMEOUT_S * 1000 + 50


def test_refusal_is_logged_as_info_with_the_daemons_reason(run_hook, daemon: FakeAdvisor) -> None:
    daemon.reply_with(BAD_REPLIES["refused"])
    (log,) = run_hook(MARKED)["logs"]
    assert log.startswith("info: slurm-advisor: daemon refused the job: comment: marker lacks ps %s %d")


def test_slow_daemon_is_cut_at_the_timeout(run_hook, daemon: FakeAdvisor) -> None:
    daemon.reply_with(PLACE, delay_s=1.0)
    result = run_hook(MARKED)
    assert_untouched(result)
    assert TIMEOUT_S * 1000 - 5 <= result["elapsed_ms"] < TIMEOUT_S * 1000 + 50
    assert "no reply within" in result["logs"][0]


@pytest.mark.parametrize("backoff, connections", [(None, 1), ("0", 3)])
def test_a_timeout_backs_off(run_hook, daemon: FakeAdvisor, backoff: str | None, connections: int) -> None:
    """After a timed-out exchange the next jobs pass at once, without a connection (unless BACKOFF=0)."""
    daemon.reply_with(PLACE, delay_s=1.0)
    result = run_hook(MARKED, "bench", HOOK, "3", env={"SLURM_ADVISOR_BACKOFF": backoff} if backoff else None)
    assert daemon.connections == connections and result["log_count"] == 3
    assert result["max_ms"] < TIMEOUT_S * 1000 + 50
    if backoff is None:
        assert "backing off for " in result["logs"][1] and result["mean_ms"] < TIMEOUT_S * 1000 / 3 + 20


def test_close_without_reply(run_hook, daemon: FakeAdvisor) -> None:
    daemon.behaviour = close_silently
    result = run_hook(MARKED)
    assert_untouched(result)
    assert "closed the connection without a reply" in result["logs"][0]


def test_no_daemon_at_all(run_hook, daemon: FakeAdvisor, tmp_path: Path) -> None:
    result = run_hook(MARKED, env={"SLURM_ADVISOR_SOCKET": str(tmp_path / "nobody.sock")})
    assert_untouched(result)
    assert result["logs"][0].startswith("error: slurm-advisor: daemon unreachable: connect ")
    assert result["elapsed_ms"] < 50


def test_no_lua_socket_passes_every_job(run_hook, daemon: FakeAdvisor, tmp_path: Path) -> None:
    result = run_hook(MARKED, env={"LUA_CPATH": str(tmp_path / "?.so")})
    assert_untouched(result)
    assert any("lua-socket not available" in log for log in result["logs"])
    assert daemon.connections == 0


@pytest.mark.parametrize("comment", [None, "", "nightly run", "slurm-advisor without colon"])
def test_unmarked_jobs_make_no_connection(run_hook, daemon: FakeAdvisor, comment: str | None) -> None:
    daemon.reply_with(PLACE)
    result = run_hook({**MARKED, "comment": comment})
    assert_untouched(result)
    assert daemon.connections == 0 and result["logs"] == []


def test_kill_switch_makes_no_connection(run_hook, daemon: FakeAdvisor, tmp_path: Path) -> None:
    daemon.reply_with(PLACE)
    (tmp_path / "disabled").write_text("")
    result = run_hook(MARKED)
    assert_untouched(result)
    assert daemon.connections == 0


def test_modify_is_untouched(run_hook, daemon: FakeAdvisor) -> None:
    daemon.reply_with(PLACE)
    assert_untouched(run_hook(MARKED, "modify"))
    assert daemon.connections == 0


def test_bad_timeout_setting_falls_back_to_the_default(run_hook, daemon: FakeAdvisor) -> None:
    daemon.reply_with(PLACE, delay_s=1.0)
    result = run_hook(MARKED, env={"SLURM_ADVISOR_TIMEOUT": "soon"})
    assert "SLURM_ADVISOR_TIMEOUT must be seconds" in result["logs"][0]
    assert result["elapsed_ms"] < TIMEOUT_S * 1000 + 50


def test_the_hook_has_no_shell_calls() -> None:
    for path in (HOOK, CLI_FILTER):
        calls = re.findall(r"\b(os\.execute|io\.popen|loadstring|dostring|os\.remove)\s*\(", path.read_text())
        assert calls == [], f"{path.name} calls {calls}"


def test_time_per_call_against_a_fast_daemon(run_hook, tmp_path: Path) -> None:
    """1000 calls against a Lua responder (no Python threads in the way): the controller's budget is ~2 ms."""
    path = tmp_path / "fast.sock"
    responder = subprocess.Popen([LUA, str(DRIVER.parent / "responder.lua"), str(path), json.dumps(PLACE)],
                                 stdout=subprocess.PIPE, text=True)
    try:
        assert responder.stdout.readline() == "ready\n"
        result = run_hook(MARKED, "bench", HOOK, "1000", env={"SLURM_ADVISOR_SOCKET": str(path)})
    finally:
        responder.kill()
        responder.wait()
    print(f"\njob_submit.lua, 1000 calls: mean {result['mean_ms']:.3f} ms, max {result['max_ms']:.3f} ms")
    assert result["log_count"] == 1000 and "d-5f0c2a9e41b7: place on n1,n3" in result["logs"][0]
    assert result["mean_ms"] < 2.0


CLI_OPTIONS = {"type": "sbatch", "comment": "slurm-advisor: type=resnet50 ps=1 workers=4", "ntasks": "5",
               "cpus-per-task": "2", "mem-per-cpu": "4G", "gpus-per-task": "1", "time": "02:00:00",
               "nodes": "1-0", "job-name": "train"}


def test_cli_filter_place_sets_options_and_exports(run_hook, daemon: FakeAdvisor) -> None:
    daemon.reply_with(PLACE)
    got = writes(run_hook(CLI_OPTIONS, "cli", CLI_FILTER))
    assert got == {"nodelist": "n1,n3", "nodes": "2", "ntasks": "5",
                   "export": "ALL,'SLURM_ADVISOR_LAYOUT=ps=n1;worker=n1,n3,n3,n3',"
                             "SLURM_ADVISOR_DECISION=d-5f0c2a9e41b7"}
    job = decode_request(daemon.requests[0])["job"]
    assert job == {**job, "num_tasks": 5, "cpus_per_task": 2, "pn_min_memory": 4096, "mem_per_cpu": True,
                   "tres_per_task": "gres:gpu:1", "time_limit": 120, "min_nodes": None, "max_nodes": None}


def test_cli_filter_place_in_segments_sets_segment(run_hook, daemon: FakeAdvisor) -> None:
    daemon.reply_with({**PLACE, "segment_size": 1})
    got = writes(run_hook(CLI_OPTIONS, "cli", CLI_FILTER))
    assert got["segment"] == "1" and got["nodelist"] == "n1,n3"


def test_cli_filter_cap_keeps_the_users_export(run_hook, daemon: FakeAdvisor) -> None:
    daemon.reply_with(CAP)
    got = writes(run_hook({**CLI_OPTIONS, "nodes": "2-8", "export": "NONE"}, "cli", CLI_FILTER))
    assert got == {"nodes": "2-3", "switches": "1@0:10:00", "export": "NONE,SLURM_ADVISOR_DECISION=d-00aa11bb22cc"}


@pytest.mark.parametrize("kind", ["not json", "shell in nodes", "huge line"])
def test_cli_filter_fails_open(run_hook, daemon: FakeAdvisor, kind: str) -> None:
    daemon.reply_with(BAD_REPLIES[kind])
    assert_untouched(run_hook(CLI_OPTIONS, "cli", CLI_FILTER))


def test_cli_filter_skips_unmarked_jobs_and_steps(run_hook, daemon: FakeAdvisor) -> None:
    daemon.reply_with(PLACE)
    assert_untouched(run_hook({**CLI_OPTIONS, "comment": "plain"}, "cli", CLI_FILTER))
    assert_untouched(run_hook({**CLI_OPTIONS, "type": "srun"}, "cli", CLI_FILTER, env={"SLURM_JOB_ID": "7"}))
    assert daemon.connections == 0


def test_cli_filter_without_its_library_passes(run_hook, daemon: FakeAdvisor, tmp_path: Path) -> None:
    daemon.reply_with(PLACE)
    result = run_hook(CLI_OPTIONS, "cli", CLI_FILTER, env={"SLURM_ADVISOR_HOOK_LIB": str(tmp_path / "none.lua")})
    assert_untouched(result)
    assert "cannot load" in result["logs"][0] and daemon.connections == 0


# -- ready answers (slurm_advisor/daemon/ready.py): the file next to the socket, the datagram ------

READY_PLACE = {**PLACE, "decision": "d-aaaaaaaaaaaa", "nodes": "n2,n4", "layout": "ps=n2;worker=n2,n4,n4,n4"}


def ready_key_of(run_hook, daemon: FakeAdvisor) -> str:
    """The key the hook sends with its request (one exchange with the fake daemon)."""
    daemon.reply_with(NONE)
    run_hook(MARKED)
    key = decode_request(daemon.requests[-1])["ready_key"]
    assert "train" not in key and "1000" not in key and "slurm-advisor: type=resnet50" in key  # no name, no user
    return key


def write_ready(daemon: FakeAdvisor, key: str, reply: dict[str, Any] = READY_PLACE, *, hook: str = "",
                seen: int = 0, expires: float | None = None, text: str | None = None) -> Path:
    path = Path(daemon.path + ".ready")
    header = {"v": 1, "epoch": "e1", "generation": 1, "hook": hook, "seen": seen,
              "expires": int(expires if expires is not None else time.time() + 60)}
    lines = [header, {"key": key, "id": reply["decision"], "reply": json.dumps(reply)}, {"end": 1}]
    path.write_text(text if text is not None else "".join(ready_line(x) for x in lines))
    return path


def ready_line(obj: dict[str, Any]) -> str:
    """One line of the file as the daemon writes it (daemon/ready.py: compact, UTF-8)."""
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False) + "\n"


@pytest.fixture
def taken(daemon: FakeAdvisor) -> Iterator[socket.socket]:
    """The daemon's datagram socket, read by the test."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(daemon.path + ".taken")
    sock.settimeout(2.0)
    yield sock
    sock.close()


def test_a_ready_answer_is_used_without_a_round_trip_and_the_daemon_told(run_hook, daemon, taken) -> None:
    key = ready_key_of(run_hook, daemon)
    write_ready(daemon, key)
    connections = daemon.connections
    result = run_hook(MARKED)
    assert writes(result)["req_nodes"] == "n2,n4"
    assert writes(result)["admin_comment"] == "slurm-advisor:d-aaaaaaaaaaaa"
    assert daemon.connections == connections  # no exchange
    note = decode_request(taken.recv(65536))
    assert note["op"] == "taken" and note["answer"] == "d-aaaaaaaaaaaa" and note["seq"] == 1
    assert note["job"]["name"] == "train" and note["job"]["user_id"] == 1000  # the job's own fields
    assert isinstance(note["hook"], str) and note["hook"]


def test_after_a_take_the_hook_asks_again_until_the_file_counts_it(run_hook, daemon, taken, tmp_path) -> None:
    key = ready_key_of(run_hook, daemon)
    write_ready(daemon, key)
    daemon.reply_with(PLACE)
    connections = daemon.connections
    case = tmp_path / "burst.lua"
    case.write_text("return " + lua_literal(MARKED) + "\n")
    environ = {**os.environ, "SLURM_ADVISOR_SOCKET": daemon.path, "SLURM_ADVISOR_TIMEOUT": str(TIMEOUT_S),
               "SLURM_ADVISOR_KILL_SWITCH": str(tmp_path / "disabled")}
    proc = subprocess.run([LUA, str(DRIVER), "burst", str(HOOK), str(case), "3"], check=True,
                          capture_output=True, text=True, env=environ, timeout=60)
    calls = [dict(c) for c in json.loads(proc.stdout)["calls"]]
    # the first from the file; the file (never rewritten here) does not count that take: the socket
    assert [c["req_nodes"] for c in calls] == ["n2,n4", "n1,n3", "n1,n3"]
    assert daemon.connections == connections + 2


def test_a_ready_file_that_counts_the_hooks_takes_is_trusted_again(run_hook, daemon, taken, tmp_path) -> None:
    # one Lua state, as in slurmctld: take from the first file; the daemon rewrites it naming this
    # hook's instance with seen = 1 (it read the note); the next job takes from the new file
    key = ready_key_of(run_hook, daemon)
    write_ready(daemon, key)
    second = {**READY_PLACE, "decision": "d-bbbbbbbbbbbb", "nodes": "n3,n4"}
    template = tmp_path / "second.ready"
    write_ready(daemon, key, second, hook="INSTANCE", seen=1)
    template.write_text(Path(daemon.path + ".ready").read_text())
    write_ready(daemon, key)
    driver = tmp_path / "driver2.lua"
    driver.write_text(DRIVER.read_text().replace('elseif mode == "burst" then', f"""elseif mode == "two" then
    local w1, w2 = {{}}, {{}}
    slurm_job_submit(job_desc(copy(fields), w1), {{}}, 0)
    local f = io.open({lua_literal(str(template))}); local text = f:read("*a"); f:close()
    f = io.open({lua_literal(daemon.path + ".ready")}, "w")
    f:write((text:gsub('"INSTANCE"', '"' .. held.instance .. '"'))); f:close()
    slurm_job_submit(job_desc(copy(fields), w2), {{}}, 0)
    result.calls = {{w1, w2}}
elseif mode == "burst" then"""))
    case = tmp_path / "two.lua"
    case.write_text("return " + lua_literal(MARKED) + "\n")
    hook = tmp_path / "holding.lua"  # a site's script holding the module: the test reads its instance
    hook.write_text(f"held = dofile({lua_literal(str(MODULE))})\n"
                    "function slurm_job_submit(j, p, u) return held.job_submit(j, p, u) end\n"
                    "function slurm_job_modify() return slurm.SUCCESS end\n")
    environ = {**os.environ, "SLURM_ADVISOR_SOCKET": daemon.path, "SLURM_ADVISOR_TIMEOUT": str(TIMEOUT_S),
               "SLURM_ADVISOR_KILL_SWITCH": str(tmp_path / "disabled")}
    connections = daemon.connections
    proc = subprocess.run([LUA, str(driver), "two", str(hook), str(case)], check=True,
                          capture_output=True, text=True, env=environ, timeout=60)
    calls = [dict(c) for c in json.loads(proc.stdout)["calls"]]
    assert [c["admin_comment"] for c in calls] == ["slurm-advisor:d-aaaaaaaaaaaa", "slurm-advisor:d-bbbbbbbbbbbb"]
    assert daemon.connections == connections
    notes = [decode_request(taken.recv(65536)) for _ in range(2)]
    assert [(n["answer"], n["seq"]) for n in notes] == [("d-aaaaaaaaaaaa", 1), ("d-bbbbbbbbbbbb", 2)]
    assert notes[0]["hook"] == notes[1]["hook"]


@pytest.mark.parametrize("trouble", ["expired", "garbage", "no taken socket", "bad reply", "other key",
                                     "half written", "end of another generation"])
def test_a_ready_file_in_trouble_is_ignored_and_the_daemon_asked(run_hook, daemon, tmp_path, trouble) -> None:
    key = ready_key_of(run_hook, daemon)
    receiver = None
    if trouble != "no taken socket":
        receiver = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        receiver.bind(daemon.path + ".taken")
    try:
        if trouble == "expired":
            write_ready(daemon, key, expires=time.time() - 5)
        elif trouble == "garbage":
            write_ready(daemon, key, text='{"v":1,"expires":9999999999}\n{"key": oops\n' + "x" * 1000)
        elif trouble == "bad reply":
            write_ready(daemon, key, {**READY_PLACE, "nodes": "n1;rm -rf /"})
        elif trouble == "other key":
            write_ready(daemon, key + " ")
        elif trouble in ("half written", "end of another generation"):
            path = write_ready(daemon, key)
            lines = path.read_text().splitlines(keepends=True)
            path.write_text("".join(lines[:-1]) + ('{"end":2}\n' if trouble != "half written" else ""))
        else:
            write_ready(daemon, key)
        daemon.reply_with(PLACE)
        connections = daemon.connections
        result = run_hook(MARKED)
        assert writes(result)["req_nodes"] == "n1,n3"  # the daemon's answer over the socket
        assert daemon.connections == connections + 1
        if receiver is not None:
            receiver.settimeout(0.2)
            with pytest.raises(TimeoutError):
                receiver.recv(65536)  # no note: nothing was taken
    finally:
        if receiver is not None:
            receiver.close()


def test_what_follows_the_end_line_is_not_read(run_hook, daemon, taken) -> None:
    # rewritten in place over a longer file: the old tail after the new end line is no answer
    key = ready_key_of(run_hook, daemon)
    path = write_ready(daemon, key)
    old = {"key": key, "id": "d-cccccccccccc", "reply": json.dumps({**READY_PLACE, "decision": "d-cccccccccccc"})}
    path.write_text(path.read_text() + ready_line(old) + '{"end":1}\n')
    assert writes(run_hook(MARKED))["admin_comment"] == "slurm-advisor:d-aaaaaaaaaaaa"


def test_cli_filter_sends_no_ready_key(run_hook, daemon: FakeAdvisor) -> None:
    daemon.reply_with(NONE)
    run_hook(CLI_OPTIONS, "cli", CLI_FILTER)
    assert "ready_key" not in decode_request(daemon.requests[-1])
