"""Speed reports from other hosts: the daemon's TCP report port takes MUNGE-signed reports only,
the credential's uid decides who reported, and a forged, replayed or unsigned one is refused.
A private munged (conftest ``munged``) signs and checks, as the cluster's munged would."""
from __future__ import annotations

import json
import os
import socket
from dataclasses import replace

import pytest
from daemon_helpers import make_daemon
from test_reports import ListedQueue

from slurm_advisor.daemon import munge, protocol
from slurm_advisor.daemon.client import call
from slurm_advisor.daemon.config import load_config
from slurm_advisor.daemon.server import AdvisorServer, ServerThread
from slurm_advisor.errors import InputError
from slurm_advisor.report import Reporter, report, report_address, send
from slurm_advisor.store import Store

NOBODY = 65534


def payload(job_id="101", iterations=300, seconds=10.0, op="report") -> bytes:
    return protocol.encode({"op": op, "job_id": job_id, "iterations": iterations, "seconds": seconds}).rstrip(b"\n")


def signed_as_nobody(data: bytes, munge_socket: str) -> str:
    """A credential made by a process running as nobody (the fork drops root first)."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(read)
            os.setgid(NOBODY)
            os.setuid(NOBODY)
            os.write(write, munge.encode(data, munge_socket).encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        cred = pipe.read().decode()
    os.waitpid(pid, 0)
    return cred


@pytest.fixture
def remote(tmp_path, munged):
    """A daemon with its report port on an ephemeral localhost port; jobs 101 (uid 1000),
    102 (root) and 103 (nobody) are running."""
    queue = ListedQueue({"101": 1000, "102": 0, "103": NOBODY})
    daemon = make_daemon(tmp_path, queue=queue, munge_socket=munged)
    daemon.start()
    server = AdvisorServer(daemon.config.socket, daemon.dispatcher(), 2.0, report_listen=("127.0.0.1", 0))
    with ServerThread(server):
        yield daemon, server.report_address, munged
    daemon.stop()


def test_a_signed_report_is_taken_as_the_uid_that_signed_it(remote):
    daemon, address, sock = remote
    assert call(address, "report", credential=munge.encode(payload("102"), sock)) == {"v": 1, "ok": True}
    assert call(address, "report", credential=signed_as_nobody(payload("103"), sock))["ok"] is True
    # nobody signed, the job is uid 1000's: refused, whatever the sender claims
    theirs = call(address, "report", credential=signed_as_nobody(payload("101"), sock))
    assert not theirs["ok"] and "uid 65534 is neither root nor the owner of job 101" in theirs["error"]
    daemon.stop()
    with Store.open(daemon.config.db, create=False) as store:
        reports = {r.job_id: r for r in store.load_reports()}
    assert set(reports) == {"102", "103"} and reports["103"].uid == NOBODY and reports["102"].speed == 30.0


@pytest.mark.parametrize("request_fields, why", [
    ({"job_id": "102", "iterations": 5, "seconds": 1}, "only speed reports signed with MUNGE"),
    ({"credential": "MUNGE:not-a-credential:"}, "report: munge:"),
    ({"credential": "crédential"}, "not ASCII"),
    ({"credential": 42}, "only speed reports signed with MUNGE"),
])
def test_an_unsigned_or_forged_report_is_refused(remote, request_fields, why):
    _, address, _ = remote
    reply = call(address, "report", **request_fields)
    assert not reply["ok"] and why in reply["error"]


def test_an_altered_or_replayed_credential_is_refused(remote):
    daemon, address, sock = remote
    cred = munge.encode(payload("102"), sock)
    body = cred.split(":")[1]
    flipped = "A" if body[20] != "A" else "B"
    altered = cred.replace(body, body[:20] + flipped + body[21:])
    assert not call(address, "report", credential=altered)["ok"]
    assert call(address, "report", credential=cred)["ok"] is True
    again = call(address, "report", credential=cred)
    assert not again["ok"] and "Replayed credential" in again["error"]
    status = call(daemon.config.socket, "status")
    assert status["reports"] == 1  # only the good one reached the report handler


def test_nothing_but_reports_over_tcp(remote):
    _, address, sock = remote
    for op in ("advise", "mode", "status", "health"):
        reply = call(address, op, job={}, mode="observe")
        assert not reply["ok"] and "only speed reports signed with MUNGE" in reply["error"], op
    # a credential that carries another op is refused too
    reply = call(address, "report", credential=munge.encode(payload(op="mode"), sock))
    assert not reply["ok"] and "carries op 'mode'" in reply["error"]


def test_a_job_reports_through_the_address_and_never_fails(remote, monkeypatch):
    _, (host, port), sock = remote
    monkeypatch.setenv("MUNGE_SOCKET", sock)
    monkeypatch.setenv("SLURM_JOB_ID", "102")
    monkeypatch.setenv("SLURM_ADVISOR_REPORT_ADDRESS", f"{host}:{port}")
    monkeypatch.setenv("SLURM_ADVISOR_SOCKET", "/nonexistent/advisor.sock")  # not used with an address
    assert send(120, 4.0) is None
    reporter = Reporter(every=10)
    for _ in range(25):
        reporter.step()
    assert reporter.flush(timeout_s=5) is True and reporter.sent >= 1
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        closed = free.getsockname()[1]
    assert "cannot connect to 127.0.0.1" in send(1, 1.0, address=f"127.0.0.1:{closed}")
    assert report(1, 1.0, address=f"127.0.0.1:{closed}") is False
    monkeypatch.setenv("MUNGE_SOCKET", "/nonexistent/munge.socket")
    assert "Did you start munged?" in send(1, 1.0)
    assert "is not host:port" in send(1, 1.0, address="ctl1")


def test_report_address_parsing():
    assert report_address("ctl1.example:6831") == ("ctl1.example", 6831)
    assert report_address("[::1]:6831") == ("::1", 6831)
    for bad in ("ctl1", ":6831", "ctl1:http", "ctl1:0", "ctl1:70000"):
        with pytest.raises(ValueError, match="not host:port"):
            report_address(bad)


def test_report_port_is_a_checked_setting(tmp_path):
    assert load_config(None, {"SLURM_ADVISOR_REPORT_PORT": "6831"}).report_port == 6831
    with pytest.raises(InputError, match="report_port must be a TCP port"):
        load_config(None, {"SLURM_ADVISOR_REPORT_PORT": "70000"})
    config = tmp_path / "c.toml"
    config.write_text('munge_socket = "/run/munge/munge.socket.2"\nreport_listen = "10.0.0.1"\n')
    loaded = load_config(config, {})
    assert str(loaded.munge_socket) == "/run/munge/munge.socket.2" and loaded.report_listen == "10.0.0.1"


def test_the_report_port_in_use_is_one_message(tmp_path):
    from slurm_advisor.daemon.build import serve

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        cfg = load_config(None, {}, {"socket": tmp_path / "a.sock", "source": "simulated", "db": str(tmp_path / "a.db"),
                                     "policy": "slurm-default", "report_port": port})
        with pytest.raises(InputError, match=f"cannot listen on .*a.sock and 127.0.0.1:{port}"):
            serve(replace(cfg, report_listen="127.0.0.1"))
    assert not (tmp_path / "a.sock").exists()  # the Unix socket it had bound is gone again


def test_a_stored_report_is_the_credentials_payload_not_the_fields_beside_it(remote):
    """The stored report is the credential's payload, not anything outside it."""
    daemon, address, sock = remote
    line = json.dumps({"v": protocol.VERSION, "op": "report", "credential": munge.encode(payload("102", 50, 5.0), sock),
                       "job_id": "101", "iterations": 9e5, "seconds": 1})
    with socket.create_connection(address, timeout=2) as s:
        s.sendall(line.encode() + b"\n")
        reply = json.loads(s.makefile().readline())
    assert reply["ok"] is True
    daemon.stop()
    with Store.open(daemon.config.db, create=False) as store:
        (stored,) = store.load_reports()
    assert (stored.job_id, stored.speed) == ("102", 10.0)
