"""Ready answers (daemon/ready.py): answers computed ahead for repeat requests, written next to
the socket; a datagram from the hook that used one records its decision and claims its nodes;
nothing published may overlap a decision the daemon made since."""
from __future__ import annotations

import json
import socket
import threading
import time
from pathlib import Path

import pytest
from daemon_helpers import make_daemon, marked, refreshed

from slurm_advisor.daemon.client import call
from slurm_advisor.daemon.evidence import layouts
from slurm_advisor.daemon.ready import key_problem, ready_path, taken_path
from slurm_advisor.daemon.server import AdvisorServer, ServerThread
from slurm_advisor.policies.spread import SpreadPolicy
from slurm_advisor.store import Store

KEY = '{"comment":"slurm-advisor: type=resnet50 ps=0 workers=2"}'  # any text the hook chose


def read_ready(path: Path) -> tuple[dict, dict[str, dict]] | None:
    """(header, answers by key) of a complete file; None for an empty (withdrawn) one or one
    caught half rewritten (the daemon's thread may be writing it: the hook's rule, in Python)."""
    try:
        lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    except (ValueError, FileNotFoundError):
        return None
    if len(lines) < 2 or lines[-1] != {"end": lines[0].get("generation")}:
        return None
    header, *answers, _ = lines
    return header, {a["key"]: {**a, "reply": json.loads(a["reply"])} for a in answers}


def wait_for(predicate, timeout_s: float = 10.0):
    deadline = time.monotonic() + timeout_s
    while not (found := predicate()):
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)
    return found


def published(daemon, generation_after: int = 0) -> tuple[dict, dict[str, dict]]:
    path = ready_path(daemon.config.socket)
    return wait_for(lambda: path.exists() and (got := read_ready(path)) and got[0]["generation"] > generation_after
                    and got)


def note(answer: str, job: dict, seq: int = 1, hook: str = "h1") -> bytes:
    return json.dumps({"v": 1, "op": "taken", "answer": answer, "hook": hook, "seq": seq, "job": job}).encode()


@pytest.fixture
def spread(tmp_path):
    """A daemon whose policy pins (SpreadPolicy: one worker per node, emptiest first; Slurm would
    pack), served with its taken socket."""
    daemon = make_daemon(tmp_path, policy=SpreadPolicy())
    daemon.start()
    server = AdvisorServer(daemon.config.socket, daemon.dispatcher(), 2.0, taken=True)
    with ServerThread(server):
        yield daemon
    daemon.stop()


@pytest.fixture
def by_hand(tmp_path):
    """The same daemon, its ready answers rebuilt only when the test says (no thread)."""
    daemon = make_daemon(tmp_path, policy=SpreadPolicy())
    daemon.ready._thread = threading.Thread(target=lambda: None)
    daemon.start()
    wait_for(lambda: daemon.state.snapshot() is not None)
    yield daemon
    daemon.stop()


def gpus_per_node(daemon) -> dict[str, int]:
    """GPUs the claims hold on each node."""
    held: dict[str, int] = {}
    for claim in daemon.state.claims._claims.values():
        for node, demand in zip(claim.nodes, claim.demand):
            held[node] = held.get(node, 0) + int(demand[1])
    return held


def test_a_repeat_request_gets_its_answer_computed_ahead(spread):
    over_socket = call(spread.config.socket, "advise", job=marked(workers=2, name="first"), ready_key=KEY)
    assert over_socket["action"] == "place" and over_socket["nodes"] == "n[1-2]"
    header, answers = published(spread)
    assert header["v"] == 1 and (header["hook"], header["seen"]) == ("", 0) and header["expires"] > time.time()
    ready = answers[KEY]["reply"]
    # computed with the first job's claim subtracted: the emptiest nodes are now n3 and n4
    assert ready["action"] == "place" and ready["nodes"] == "n[3-4]"
    assert ready["decision"] == answers[KEY]["id"] != over_socket["decision"]


def test_a_taken_answer_is_recorded_under_the_jobs_own_fields_and_claimed(spread):
    call(spread.config.socket, "advise", job=marked(workers=2, gpus=2), ready_key=KEY)
    header, answers = published(spread)
    answer = answers[KEY]
    second = marked(workers=2, gpus=2, name="second", user_id=1234)
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.sendto(note(answer["id"], second), str(taken_path(spread.config.socket)))
    wait_for(lambda: spread.state.counters.ready_taken == 1)
    assert gpus_per_node(spread) == {"n1": 2, "n2": 2, "n3": 2, "n4": 2}
    # the next file counts the take: the hook may trust it again (a rebuild for a refresh may
    # come first, with seen 0; the refresh runs every 50 ms here)
    path = ready_path(spread.config.socket)
    header2, _ = wait_for(lambda: (got := read_ready(path)) and got[0]["seen"] == 1 and got)
    assert header2["hook"] == "h1" and header2["generation"] > header["generation"]
    assert spread.evidence.drain(10)
    spread.writer.stop()
    with Store.open(spread.config.db, create=False) as store:
        decision = store.decision(answer["id"])
    assert decision.request["name"] == "second" and decision.user_id == 1234
    assert decision.action == "place" and decision.layout == (("worker", "n3"), ("worker", "n4"))
    assert decision.extra["ready"] is True
    # a taken answer is a decision, its evidence computed then; the answers never taken cost none
    assert layouts(decision.evidence)["advised"]["tasks"] == [["n3", 0, 1], ["n4", 0, 1]]
    assert spread.evidence.recorded == 2  # the request over the socket and the answer taken


def test_a_note_queued_before_a_request_is_read_before_it_is_answered(spread):
    call(spread.config.socket, "advise", job=marked(workers=2, gpus=3), ready_key=KEY)  # n1, n2
    _, answers = published(spread)
    assert answers[KEY]["reply"]["action"] == "observe"  # Slurm's own choice (n3, n4): claimed, not pinned
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.sendto(note(answers[KEY]["id"], marked(workers=2, gpus=3)), str(taken_path(spread.config.socket)))
    # at once: the server must read the note first, or this job would be given n3 and n4 too
    reply = call(spread.config.socket, "advise", job=marked(workers=2, gpus=3))
    assert reply["action"] == "observe" and reply["reason"].startswith("left to Slurm as submitted")
    assert max(gpus_per_node(spread).values()) <= 4


def test_a_burst_of_takes_and_requests_never_overcommits(by_hand):
    dispatcher = by_hand.dispatcher()
    taken = 0
    for i in range(12):  # 16 GPUs, 2 a job: 8 jobs fit, in answers taken or given over the socket
        if i % 2 == 0 and by_hand.ready.rebuild():
            _, answers = read_ready(ready_path(by_hand.config.socket))
            if answers[KEY]["reply"]["action"] != "none":
                taken += 1
                dispatcher.taken(note(answers[KEY]["id"], marked(workers=2), seq=taken), 0)
                continue
        by_hand.advise(marked(workers=2), ready_key=KEY)
        assert max(gpus_per_node(by_hand).values()) <= 4
    assert taken >= 3 and by_hand.state.counters.ready_taken == taken
    assert len(by_hand.state.claims) == 8 and gpus_per_node(by_hand) == {"n1": 4, "n2": 4, "n3": 4, "n4": 4}


def test_a_take_that_claims_nothing_recomputes_only_its_own_answer(by_hand):
    keys = {"none": marked(workers=2, gpus=8), "two": marked(workers=2), "one": marked(workers=1, gpus=2)}
    for key, fields in keys.items():  # 8 GPUs a task: no node has them
        by_hand.advise(fields, ready_key=key)
    computed = []
    compute = by_hand.ready.compute
    by_hand.ready.compute = lambda snapshot, fields, *a, **k: (computed.append(fields), compute(snapshot, fields, *a, **k))[1]
    path, dispatcher = ready_path(by_hand.config.socket), by_hand.dispatcher()
    assert by_hand.ready.rebuild() and len(computed) == 3
    _, before = read_ready(path)
    assert before["none"]["reply"]["action"] == "observe" and before["two"]["reply"]["action"] == "place"
    assert before["none"]["reply"]["reason"].startswith("left to Slurm as submitted")
    dispatcher.taken(note(before["none"]["id"], keys["none"]), 0)
    assert by_hand.state.counters.ready_taken == 1
    assert by_hand.ready.rebuild() and computed[3:] == [keys["none"]]
    header, after = read_ready(path)
    assert header["seen"] == 1 and after["none"]["id"] != before["none"]["id"]
    assert [after[k]["id"] for k in ("two", "one")] == [before[k]["id"] for k in ("two", "one")]
    # a take that claims nodes changes what every answer saw: all are computed again
    dispatcher.taken(note(after["two"]["id"], keys["two"], seq=2), 0)
    assert by_hand.ready.rebuild() and len(computed) == 7
    header, last = read_ready(path)
    assert header["seen"] == 2 and all(last[k]["id"] != after[k]["id"] for k in keys)


def test_a_claim_made_over_the_socket_withdraws_the_file_before_the_reply(by_hand):
    path = ready_path(by_hand.config.socket)
    by_hand.advise(marked(workers=2), ready_key=KEY)
    assert by_hand.ready.rebuild() and path.exists()
    assert by_hand.advise(marked(workers=2))["action"] == "place"
    assert path.read_text() == ""  # emptied before advise returned: its answer may have overlapped
    assert by_hand.ready.rebuild()
    assert read_ready(path)[1][KEY]["reply"]["action"] == "place"


def test_with_nothing_remembered_a_claim_costs_no_write_and_wakes_no_thread(by_hand, monkeypatch):
    """Every placed request withdraws the file: with no request remembered (a hook that sends no
    ready_key, or before the first) that must cost the request nothing but a counter."""
    writes = []
    monkeypatch.setattr("slurm_advisor.daemon.ready.os.pwrite", lambda fd, data, at: writes.append(data))
    by_hand.ready._wake.clear()
    assert by_hand.advise(marked(workers=2))["action"] == "place"
    assert writes == [] and not by_hand.ready._wake.is_set()
    assert not by_hand.ready.rebuild()  # and the thread, woken by a refresh, computes nothing


def test_a_file_withdrawn_once_is_not_written_again_until_answers_come(by_hand, monkeypatch):
    path = ready_path(by_hand.config.socket)
    by_hand.advise(marked(workers=2), ready_key=KEY)
    assert by_hand.ready.rebuild() and read_ready(path)
    writes = []
    real = by_hand.ready._write
    monkeypatch.setattr(by_hand.ready, "_write", lambda data: (writes.append(data), real(data)))
    for _ in range(3):
        assert by_hand.advise(marked(workers=2))["action"] == "place"
    assert writes == [b""] and path.read_text() == ""  # withdrawn by the first, then left empty
    assert by_hand.ready._wake.is_set()  # a key is remembered: its answer is computed again
    assert by_hand.ready.rebuild() and read_ready(path)[1][KEY]["reply"]["action"] == "place"


def test_a_mode_switch_withdraws_the_answers_of_the_old_mode(by_hand):
    path = ready_path(by_hand.config.socket)
    by_hand.advise(marked(workers=2), ready_key=KEY)
    assert by_hand.ready.rebuild() and read_ready(path)[1][KEY]["reply"]["action"] == "place"
    by_hand.switch_mode("observe")
    assert path.read_text() == ""
    assert by_hand.ready.rebuild() and read_ready(path)[1][KEY]["reply"]["action"] == "observe"


def test_a_note_from_another_user_or_for_an_unknown_answer_is_not_recorded(by_hand):
    by_hand.advise(marked(workers=2), ready_key=KEY)
    assert by_hand.ready.rebuild()
    _, answers = read_ready(ready_path(by_hand.config.socket))
    dispatcher = by_hand.dispatcher()
    dispatcher.taken(note(answers[KEY]["id"], marked(workers=2)), 1000)  # neither root nor slurm
    dispatcher.taken(note(answers[KEY]["id"], marked(workers=2)), None)  # no credentials
    dispatcher.taken(b'{"v":1,"op":"advise","job":{}}', 0)
    dispatcher.taken(b"\xff not json", 0)
    assert by_hand.state.counters.ready_refused == 4
    dispatcher.taken(note("d-000000000000", marked(workers=2)), 0)
    assert by_hand.ready.unknown == 1
    assert by_hand.state.counters.ready_taken == 0 and len(by_hand.state.claims) == 1
    # the answer is still there for the hook, once
    dispatcher.taken(note(answers[KEY]["id"], marked(workers=2)), 0)
    dispatcher.taken(note(answers[KEY]["id"], marked(workers=2), seq=2), 0)
    assert by_hand.state.counters.ready_taken == 1 and by_hand.ready.unknown == 2


def test_taken_is_refused_over_the_stream_socket(spread):
    reply = call(spread.config.socket, "taken", answer="d-000000000000", job=marked())
    assert reply["ok"] is False and "datagram" in reply["error"]


def test_keys_are_bounded_most_recent_kept(tmp_path):
    daemon = make_daemon(tmp_path, policy=SpreadPolicy(), ready_keys=2)
    daemon.ready._thread = threading.Thread(target=lambda: None)
    daemon.start()
    try:
        wait_for(lambda: daemon.state.snapshot() is not None)
        for i in range(4):
            daemon.advise(marked(workers=1, name=str(i)), ready_key=f"key-{i}")
        daemon.advise(marked(workers=1), ready_key="x" * 5000)  # too long: not remembered
        assert daemon.ready.rebuild()
        _, answers = read_ready(ready_path(daemon.config.socket))
        assert sorted(answers) == ["key-2", "key-3"]
    finally:
        daemon.stop()


def test_off_means_no_file_and_no_taken_socket(tmp_path):
    daemon = make_daemon(tmp_path, policy=SpreadPolicy(), ready_keys=0)
    daemon.start()
    server = AdvisorServer(daemon.config.socket, daemon.dispatcher(), 2.0, taken=daemon.ready is not None)
    with ServerThread(server):
        call(daemon.config.socket, "advise", job=marked(workers=2), ready_key=KEY)
        refreshed(daemon)  # when a file would have been written
    daemon.stop()
    assert daemon.ready is None and not ready_path(daemon.config.socket).exists()
    assert not taken_path(daemon.config.socket).exists()


def test_the_file_goes_when_the_daemon_stops(tmp_path):
    daemon = make_daemon(tmp_path, policy=SpreadPolicy())
    daemon.start()
    server = AdvisorServer(daemon.config.socket, daemon.dispatcher(), 2.0, taken=True)
    with ServerThread(server):
        call(daemon.config.socket, "advise", job=marked(workers=2), ready_key=KEY)
        published(daemon)
    daemon.stop()
    assert not ready_path(daemon.config.socket).exists()


@pytest.mark.parametrize("bad", ["\ud800", "a\udfffb", "é" * 2049, "", 7, None])
def test_a_key_that_is_not_bounded_utf8_text_never_stops_the_file(tmp_path, bad):
    """A lone surrogate (JSON "\\ud800") cannot be written as UTF-8: remembered, it stopped every
    rebuild until eight newer keys pushed it out. Such a key is ignored with a reason."""
    daemon = make_daemon(tmp_path, policy=SpreadPolicy(), ready_keys=8)
    daemon.ready._thread = threading.Thread(target=lambda: None)
    daemon.start()
    try:
        wait_for(lambda: daemon.state.snapshot() is not None)
        daemon.advise(marked(workers=1, name="good"), ready_key="good")
        daemon.advise(marked(workers=1, name="bad"), ready_key=bad)
        daemon.advise(marked(workers=1, name="after"), ready_key="after")
        assert daemon.ready.rebuild()
        _, answers = read_ready(ready_path(daemon.config.socket))
        assert sorted(answers) == ["after", "good"]
        assert daemon.ready.ignored_keys == (bad is not None)  # None: the hook sent no key
        assert bad is None or key_problem(bad)
    finally:
        daemon.stop()


def test_key_problem_names_what_is_wrong():
    assert "UTF-8" in key_problem("\ud800") and "bytes" in key_problem("é" * 2049)
    assert "string" in key_problem(7) and "empty" in key_problem("")
    assert key_problem(KEY) is None and key_problem("é" * 2048) is None
