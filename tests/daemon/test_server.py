"""The daemon on a real Unix socket: requests, claims, bad bytes, idle clients, peers, the store."""
from __future__ import annotations

import json
import os
import shutil
import socket
import tempfile
import time
from pathlib import Path

import pytest
from daemon_helpers import exchange_as_nobody, marked, raw_exchange

from slurm_advisor.daemon.client import Client, call
from slurm_advisor.policies.spread import SpreadPolicy
from slurm_advisor.store import Store


@pytest.mark.parametrize("policy", [SpreadPolicy()], ids=["spread"])
def test_health_status_and_advice(served):
    path = served.config.socket
    assert call(path, "health")["ok"] is True
    reply = call(path, "advise", job=marked(workers=2))
    assert reply["action"] == "place" and reply["layout"] == "worker=n1,n2"
    status = call(path, "status")
    assert status["decisions"] == 1 and status["placed"] == 1 and status["claims"] == 1 and status["nodes"] == 4
    assert status["slurms_choice"] == 0
    assert (status["decisions_spooled"], status["decisions_spool_failed"]) == (1, 0)  # on disk before the reply


def test_slurms_own_choice_is_stamped_counted_and_claimed(served):
    path = served.config.socket
    reply = call(path, "advise", job=marked(workers=2))
    assert reply["action"] == "observe" and reply["mode"] == "advise" and "slurm's own choice" in reply["reason"]
    status = call(path, "status")
    assert (status["decisions"], status["placed"], status["slurms_choice"], status["claims"]) == (1, 0, 1, 1)


def test_quick_submissions_do_not_share_free_gpus(served):
    # 4 nodes x 4 GPUs: four 4-GPU jobs in a row must go to four different nodes (claims), and a
    # fifth must not be placed anywhere (nothing is free in Slurm's view plus the claims). Each is
    # Slurm's own choice, so none is pinned, but each is claimed: until the next refresh shows the
    # job running, Slurm's view still shows its GPUs free.
    with Client(served.config.socket) as client:
        replies = [client.call("advise", job=marked(workers=4, gpus=1)) for _ in range(5)]
    assert [r["action"] for r in replies] == ["observe"] * 5
    assert replies[4]["reason"].startswith("left to Slurm as submitted")  # no room: stamped, not claimed
    assert [{n for _, n in served._decision(r["decision"]).would} for r in replies[:4]] == [{"n1"}, {"n2"},
                                                                                           {"n3"}, {"n4"}]


@pytest.mark.parametrize("policy", [SpreadPolicy()], ids=["spread"])
def test_quick_pinned_submissions_do_not_share_free_gpus(served):
    # spread puts each 4-GPU job on all four nodes, one GPU each (Slurm: one node): pinned and
    # claimed. With one GPU left on each node, Slurm too would take all four: the fourth is its own.
    with Client(served.config.socket) as client:
        replies = [client.call("advise", job=marked(workers=4, gpus=1)) for _ in range(5)]
    assert [r.get("nodes") for r in replies] == ["n[1-4]"] * 3 + [None, None]
    assert [r["action"] for r in replies] == ["place"] * 3 + ["observe", "observe"]
    assert replies[4]["reason"].startswith("left to Slurm as submitted")


@pytest.mark.parametrize(("policy", "workers", "action"), [(None, 16, "observe"), (SpreadPolicy(), 12, "place")],
                         ids=["slurms-choice", "pinned"])
def test_claims_end_after_their_bound(tmp_path, policy, workers, action):
    # 16 workers fill the cluster (Slurm's choice too); spread lays 12 out 3 per node (Slurm: 4 on n1-n3)
    from daemon_helpers import make_daemon

    from slurm_advisor.daemon.server import AdvisorServer, ServerThread
    daemon = make_daemon(tmp_path, claim_ttl_s=0.3, policy=policy)
    daemon.start()
    try:
        with ServerThread(AdvisorServer(daemon.config.socket, daemon.dispatcher(), 0.5)):
            first = call(daemon.config.socket, "advise", job=marked(workers=workers, gpus=1))
            assert first["action"] == action
            assert call(daemon.config.socket, "advise", job=marked(workers=workers, gpus=1))["reason"].startswith(
                "left to Slurm as submitted")
            # the job never ran: the bound passes (settled as a refresh would, that much later)
            daemon.state.claims.settle((), time.monotonic() + daemon.config.claim_ttl_s)
            assert daemon.status()["claims"] == 0
            assert call(daemon.config.socket, "advise", job=marked(workers=workers, gpus=1))["action"] == action
    finally:
        daemon.stop()


@pytest.mark.parametrize(("data", "message"), [
    (b"\xff\xfe\n", "not UTF-8"),
    (b"hello\n", "not JSON"),
    (b'{"v": 1, "op": "advise", "job": 3}\n', "'job' must be an object"),
    (b'{"v": 1, "op": "advise", "job": {"comment": "slurm-advisor: type=x ps=0 workers=-1"}}\n', "workers='-1' is out of range"),
    (b"x" * (70 * 1024) + b"\n", "longer than"),
])
def test_bad_messages_get_an_error_and_the_daemon_keeps_serving(served, data, message):
    reply = json.loads(raw_exchange(served.config.socket, data))
    assert reply["ok"] is False and message in reply["error"]
    assert call(served.config.socket, "health")["ok"] is True


def test_a_silent_client_does_not_block_others(served):
    idle = [socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) for _ in range(20)]
    for s in idle:
        s.connect(str(served.config.socket))
    try:
        started = time.perf_counter()
        assert call(served.config.socket, "advise", job=marked())["ok"] is True
        assert time.perf_counter() - started < 0.2
    finally:
        for s in idle:
            s.close()


def test_a_silent_client_is_dropped_after_the_timeout(served):
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(3)
        s.connect(str(served.config.socket))
        started = time.perf_counter()
        assert s.recv(10) == b""  # closed by the daemon
        assert time.perf_counter() - started < served.config.client_timeout_s + 1


def _as_nobody(path, op: str) -> dict:
    """The reply to ``op`` from a client process running as uid 65534 (nobody)."""
    return exchange_as_nobody(path, json.dumps({"v": 1, "op": op, "job": {}}).encode() + b"\n")


@pytest.mark.skipif(os.geteuid() != 0, reason="switching to another uid needs root")
def test_a_peer_that_is_neither_root_nor_slurm_is_refused():
    from daemon_helpers import make_daemon

    from slurm_advisor.daemon.server import AdvisorServer, ServerThread
    # nobody must be able to reach the socket for the daemon to refuse it (pytest's tmp is 0700)
    public = Path(tempfile.mkdtemp(prefix="advisor-peer-", dir="/tmp"))
    public.chmod(0o755)
    daemon = make_daemon(public, store=False)
    daemon.start()
    try:
        with ServerThread(AdvisorServer(daemon.config.socket, daemon.dispatcher(), 0.5)):
            def as_nobody(op):
                return _as_nobody(daemon.config.socket, op)
            assert "neither root nor the Slurm user" in as_nobody("advise")["error"]
            assert "neither root" in as_nobody("mode")["error"]
            assert as_nobody("health")["ok"] is True  # anyone may ask how it is
    finally:
        daemon.stop()
        shutil.rmtree(public, ignore_errors=True)


@pytest.mark.parametrize("policy", [SpreadPolicy()], ids=["spread"])
def test_mode_switches_at_run_time(served):
    path = served.config.socket
    assert call(path, "mode", mode="observe") == {"v": 1, "ok": True, "mode": "observe", "was": "advise",
                                                  "mode_source": "override",
                                                  "mode_file": f"{served.config.db}.mode.json"}
    assert call(path, "advise", job=marked())["action"] == "observe"
    assert call(path, "mode", mode="enforce")["mode"] == "enforce"
    assert call(path, "advise", job=marked())["action"] == "place"
    assert "expected one of" in call(path, "mode", mode="loud")["error"]


@pytest.mark.parametrize("policy", [SpreadPolicy()], ids=["spread"])
def test_every_decision_reaches_the_store(served, tmp_path):
    for _ in range(3):
        call(served.config.socket, "advise", job=marked())
    call(served.config.socket, "mode", mode="observe")
    call(served.config.socket, "advise", job=marked())
    served.stop()  # flushes the writer
    with Store.open(served.config.db, create=False) as store:
        decisions = store.load_decisions()
    assert [d.action for d in decisions] == ["observe", "place", "place", "place"]
    assert decisions[0].mode == "observe" and decisions[0].would and decisions[1].layout
    assert all(d.latency_ms > 0 and d.request["comment"].startswith("slurm-advisor:") for d in decisions)


def test_slurms_own_choices_reach_the_store_with_their_reason(served):
    for _ in range(3):
        call(served.config.socket, "advise", job=marked())
    served.stop()
    with Store.open(served.config.db, create=False) as store:
        decisions = store.load_decisions()
    assert [(d.mode, d.action) for d in decisions] == [("advise", "observe")] * 3
    assert all("slurm's own choice" in d.reason and d.would and not d.layout for d in decisions)
    # each saw the claims of the ones before: n1 twice (two GPUs each), then n2
    assert [{n for _, n in d.would} for d in reversed(decisions)] == [{"n1"}, {"n1"}, {"n2"}]


def test_a_bad_row_costs_only_itself(tmp_path):
    from datetime import UTC, datetime

    from slurm_advisor.daemon.writer import decision_writer
    from slurm_advisor.domain.decision import Decision
    store = Store.open(str(tmp_path / "w.db"))
    make = [Decision(f"d-00000000000{i}", datetime.now(UTC), "advise", "none", "p", None, "t", None, {})
            for i in range(3)]
    first = decision_writer(store)  # written alone first: a writer stopped writes what it was given
    first.start()
    first.put(make[0])
    first.stop()
    writer = decision_writer(store)
    writer.start()
    for d in make:   # then a batch holding a duplicate
        writer.put(d)
    writer.stop()
    assert (first.written + writer.written, writer.dropped) == (3, 1) and store.count_decisions() == 3
    store.close()
