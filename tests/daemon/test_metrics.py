"""Prometheus metrics on the opt-in HTTP port, and the JSONL decision log."""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request

import pytest
from daemon_helpers import make_daemon, marked

from slurm_advisor.daemon.client import DaemonUnavailable, call
from slurm_advisor.daemon.config import load_config
from slurm_advisor.daemon.metrics import reason_class
from slurm_advisor.domain.codec import decision_from_dict
from slurm_advisor.errors import InputError
from slurm_advisor.store import Store


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def scrape(port: int) -> dict[str, float]:
    """Every sample line of /metrics as {'name{labels}': value}."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as reply:
        text = reply.read().decode()
    samples = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            key, value = line.rsplit(" ", 1)
            samples[key] = float(value)
    return samples


@pytest.fixture
def metered(tmp_path):
    daemon = make_daemon(tmp_path, metrics_port=free_port())
    daemon.start()
    yield daemon
    daemon.stop()


def test_metrics_are_served_and_an_advise_moves_them(metered):
    port = metered.metrics.port
    before = scrape(port)
    for name in ("slurm_advisor_requests_total", "slurm_advisor_reports_total", "slurm_advisor_refresh_failures_total",
                 "slurm_advisor_decisions_written_total", "slurm_advisor_decisions_spooled_total",
                 "slurm_advisor_reports_spool_failed_total", "slurm_advisor_policy_errors_total",
                 "slurm_advisor_claims", "slurm_advisor_snapshot_age_seconds",
                 'slurm_advisor_mode{mode="advise"}', 'slurm_advisor_active_model{policy="slurm-default",version=""}',
                 'slurm_advisor_models{status="active"}', "slurm_advisor_advice_latency_seconds_count"):
        assert name in before, name
    assert before["slurm_advisor_advice_latency_seconds_count"] == 0
    assert metered.advise(marked(workers=2))["action"] == "observe"  # slurm-default: Slurm's own choice
    assert metered.advise(marked(workers=3, gpus=5))["action"] == "observe"  # fits no node: left to Slurm, stamped
    after = scrape(port)
    assert after["slurm_advisor_requests_total"] == 2
    assert after["slurm_advisor_advice_latency_seconds_count"] == 2
    assert after['slurm_advisor_decisions_total{action="observe",mode="advise"}'] == 2
    # Slurm's own choice carries a reason but is advice, not a fallback
    assert [k for k in after if k.startswith("slurm_advisor_fallbacks_total")] == \
        ['slurm_advisor_fallbacks_total{reason="policy_no_placement"}']
    assert after['slurm_advisor_fallbacks_total{reason="policy_no_placement"}'] == 1
    assert after["slurm_advisor_claims"] == 1


def test_model_changes_and_a_mode_set_at_run_time_are_exported(metered):
    from slurm_advisor.domain.model_record import ModelRecord

    port = metered.metrics.port
    before = scrape(port)
    assert before['slurm_advisor_model_activations_total{action="rollback",forced="false"}'] == 0  # there from the start
    assert before["slurm_advisor_mode_overridden"] == 0 and before["slurm_advisor_model_reloads_total"] == 0
    metered.store.register_model(ModelRecord("a" * 12, "/m/a"))
    metered.store.activate("a" * 12, "promote", forced=True)
    metered.store.activate(None, "rollback")
    metered.switch_mode("observe")
    after = scrape(port)
    assert after['slurm_advisor_model_activations_total{action="promote",forced="true"}'] == 1
    assert after['slurm_advisor_model_activations_total{action="rollback",forced="false"}'] == 1
    assert after['slurm_advisor_models{status="retired"}'] == 1 and after["slurm_advisor_mode_overridden"] == 1


def test_each_daemon_has_its_own_registry(tmp_path, metered):
    other = make_daemon(tmp_path / "other", metrics_port=free_port())
    other.start()
    try:
        metered.advise(marked())
        assert scrape(other.metrics.port)["slurm_advisor_requests_total"] == 0
        assert scrape(metered.metrics.port)["slurm_advisor_requests_total"] == 1
    finally:
        other.stop()


def test_metrics_are_off_by_default_and_a_taken_port_is_one_line(tmp_path):
    assert make_daemon(tmp_path).metrics is None
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        daemon = make_daemon(tmp_path / "b", metrics_port=busy.getsockname()[1])
        with pytest.raises(InputError, match="cannot serve metrics on 127.0.0.1"):
            daemon.start()
        daemon.stop()


@pytest.mark.parametrize(("reason", "expected"), [
    ("no cluster snapshot yet", "no_snapshot"), ("learned found no placement", "policy_no_placement"),
    ("learned proposed an invalid placement", "policy_invalid"), ("does not fit now", "does_not_fit"),
    ("Slurm cannot lay the advised nodes out for this job now", "not_expressible"),
    ("partition 'x' holds none of the nodes the advisor knows", "partition"), ("waits for a switch", "other"),
])
def test_reason_classes(reason, expected):
    assert reason_class(reason) == expected


@pytest.mark.parametrize(("raw", "ok"), [("9100", 9100), (9100, 9100), ("x", None), (70000, None), (True, None)])
def test_metrics_port_setting(raw, ok):
    if ok is None:
        with pytest.raises(InputError, match="(?i)metrics_port"):
            load_config(None, {"SLURM_ADVISOR_METRICS_PORT": raw} if isinstance(raw, str) else {}, {"metrics_port": raw})
    else:
        assert load_config(None, {}, {"metrics_port": raw}).metrics_port == ok


def test_decision_log_gets_one_json_line_per_decision_and_one_per_evidence_after_it(tmp_path):
    log = tmp_path / "log" / "decisions.jsonl"
    daemon = make_daemon(tmp_path, decision_log=log)
    daemon.start()
    replies = [daemon.advise(marked(workers=w)) for w in (1, 2, 99)]
    daemon.stop()
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert [d["id"] for d in lines if "id" in d] == [r["decision"] for r in replies]
    evidence = {e["evidence_of"]: (at, e["evidence"]) for at, e in enumerate(lines) if "evidence_of" in e}
    assert set(evidence) == {r["decision"] for r in replies[:2]}  # 99 workers fit nowhere: nothing to weigh
    at, recorded = evidence[replies[1]["decision"]]
    decision = next(d for d in lines if d.get("id") == replies[1]["decision"])
    assert lines.index(decision) < at  # the evidence follows its decision
    with Store.open(daemon.config.db, create=False) as store:
        assert decision_from_dict({**decision, "evidence": recorded}) == store.decision(replies[1]["decision"])
    assert daemon.writer.logged == len(lines) == 5 and daemon.writer.log_errors == 0


def test_decision_log_without_a_store_and_an_unwritable_log_never_stop_the_writer(tmp_path):
    log = tmp_path / "decisions.jsonl"
    daemon = make_daemon(tmp_path, decision_log=log, store=False)
    daemon.start()
    daemon.advise(marked())
    assert daemon.evidence.drain(10)  # the decision's evidence follows it to the writer
    deadline = time.monotonic() + 10
    while daemon.writer.logged < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    log.unlink()
    log.mkdir()  # a directory where the file was: appends fail
    daemon.advise(marked())
    daemon.stop()
    assert (daemon.writer.logged, daemon.writer.log_errors) == (2, 2)  # each: a decision and its evidence


def serving(sock, proc) -> None:
    """Wait (up to a minute) for the daemon ``proc`` to answer on ``sock``."""
    for _ in range(600):
        if proc.poll() is not None:
            break
        try:
            call(sock, "health", timeout_s=1.0)
        except DaemonUnavailable:
            time.sleep(0.1)
        else:
            return
    raise AssertionError("the daemon did not start")


def test_serve_takes_the_metrics_port_and_the_decision_log_from_its_environment(tmp_path):
    sock, port, log = tmp_path / "advisor.sock", free_port(), tmp_path / "decisions.jsonl"
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("SLURM_ADVISOR_")},
           "SLURM_ADVISOR_METRICS_PORT": str(port), "SLURM_ADVISOR_DECISION_LOG": str(log)}
    proc = subprocess.Popen([sys.executable, "-m", "slurm_advisor.cli", "serve", "--source", "simulated",
                             "--policy", "slurm-default", "--mode", "advise", "--socket", str(sock), "--db", str(tmp_path / "a.db")],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        serving(sock, proc)
        reply = call(sock, "advise", job={**marked(), "user_id": 0})
        assert scrape(port)[f'slurm_advisor_decisions_total{{action="{reply["action"]}",mode="advise"}}'] == 1
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=30)
    assert proc.returncode == 0
    assert [json.loads(line).get("id") for line in log.read_text().splitlines()] == [reply["decision"], None]  # then its evidence
