"""The admin commands in-process (CliRunner) against a store filled through the Store API, and
against a real daemon on a temporary socket for `status` and `mode`."""
from __future__ import annotations

import csv
import json
import shutil
import time
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from click.testing import CliRunner

from slurm_advisor.advisor import Advisor
from slurm_advisor.cli.admin import DAEMON_DOWN
from slurm_advisor.cli.admin_views import parse_since, scan_decisions, table
from slurm_advisor.cli.main import cli
from slurm_advisor.cluster.simulated import SimulatedSource
from slurm_advisor.daemon.config import DaemonConfig
from slurm_advisor.daemon.daemon import Daemon
from slurm_advisor.daemon.queue import NoQueue
from slurm_advisor.daemon.server import AdvisorServer, ServerThread
from slurm_advisor.daemon.service import AdviceService
from slurm_advisor.daemon.state import speed_model_of
from slurm_advisor.domain import ClusterSnapshot
from slurm_advisor.domain.model_record import ModelRecord
from slurm_advisor.domain.outcome import Outcome
from slurm_advisor.domain.speed_report import SpeedReport
from slurm_advisor.errors import InputError
from slurm_advisor.models.meta import DEFAULT_MODEL_DIR
from slurm_advisor.policies.pack import PackPolicy
from slurm_advisor.policies.slurm_default import SlurmDefaultPolicy
from slurm_advisor.policies.spread import SpreadPolicy
from slurm_advisor.sim.clusterfile import default_cluster
from slurm_advisor.slurm.expressible import express
from slurm_advisor.store import Store


def fields(workers: int = 3, ps: int = 1, gpus: int = 1) -> dict:
    return {"comment": f"slurm-advisor: type=resnet50 ps={ps} workers={workers}", "num_tasks": ps + workers,
            "cpus_per_task": 2, "pn_min_memory": 1000, "mem_per_cpu": True, "tres_per_task": f"gres:gpu:{gpus}",
            "user_id": 1000}


pytestmark = pytest.mark.usefixtures("cli_env")


@pytest.fixture
def site(tmp_path):
    """A store with decisions in every mode, outcomes, reports and three models; a config file that
    names it and the embedded simulated cluster (what explain and shadow judge layouts on)."""
    db = tmp_path / "advisor.db"
    config = tmp_path / "config.toml"
    config.write_text(f'db = "{db}"\nsource = "simulated"\nsocket = "{tmp_path / "none.sock"}"\n'
                      f'models_dir = "{tmp_path}"\n')
    snapshot = ClusterSnapshot.empty(default_cluster())
    speed = (speed_model_of(None), "pkg")  # predicts each decision's evidence, as the daemon's default model
    packer = AdviceService(Advisor(PackPolicy()), express, speed=speed)
    slurm = AdviceService(Advisor(SlurmDefaultPolicy()), express, speed=speed)
    # spread: not what Slurm would choose (one node), so it is pinned; pack's one node is Slurm's own choice
    spreader = AdviceService(Advisor(SpreadPolicy()), express, speed=speed)
    made = {}
    made["placed"] = spreader.advise(snapshot, fields(), "advise")[1]
    made["none"] = packer.advise(snapshot, fields(workers=200), "advise")[1]        # fits nowhere: a fallback
    made["observed"] = packer.advise(snapshot, fields(workers=7), "observe")[1]      # would: one node
    made["same"] = slurm.advise(snapshot, fields(workers=3), "observe")[1]
    made["old"] = replace(packer.advise(snapshot, fields(), "observe")[1],
                          time=datetime.now(UTC) - timedelta(days=3))
    with Store.open(str(db)) as store:
        store.record_decisions(made.values())
        slurm_nodes = tuple(n.name for n in default_cluster()[:4])  # Slurm spread it over four nodes
        store.record_outcomes([  # 501: Slurm's per-node counts as read from `scontrol show job -d`
            Outcome("501", "RUNNING", made["observed"].id, 1.0, 2.0, None, slurm_nodes, (2, 2, 2, 2),
                    "scontrol show job -d"),
            Outcome("502", "COMPLETED", made["same"].id, 1.0, 2.0, 9.0, made["same"].nodes),
            Outcome("503", "PENDING", made["placed"].id, 1.0, None, None, ()),
        ])
        now = time.time()
        store.record_reports([(SpeedReport("501", 1000, 100.0, 10.0, now, None, now), None),
                              (SpeedReport("501", 1000, 300.0, 10.0, now + 10, None, now + 10), None)])
        for version, status in (("aaa", "active"), ("bbb", "active"), ("ccc", "candidate")):
            shutil.copytree(DEFAULT_MODEL_DIR, tmp_path / version)
            store.register_model(ModelRecord(version, str(tmp_path / version), status, created_at=now))
    return {"db": db, "config": config, "decisions": made, "tmp": tmp_path}


def run(*args: str, code: int = 0) -> str:
    result = CliRunner().invoke(cli, list(args))
    assert result.exit_code == code, result.output
    return result.output


def test_decisions_filters_and_json(site):
    cfg = str(site["config"])
    rows = json.loads(run("decisions", "--config", cfg, "--json"))
    newest_first = sorted(site["decisions"].values(), key=lambda d: (d.time, d.id), reverse=True)
    assert [r["id"] for r in rows] == [d.id for d in newest_first]
    observed = json.loads(run("decisions", "--config", cfg, "--json", "--mode", "observe", "--since", "1h"))
    assert {r["id"] for r in observed} == {site["decisions"][k].id for k in ("observed", "same")}
    placed = json.loads(run("decisions", "--config", cfg, "--json", "--action", "place", "--limit", "1"))
    assert [r["id"] for r in placed] == [site["decisions"]["placed"].id] and placed[0]["layout"].startswith("ps=")
    text = run("decisions", "--db", str(site["db"]), "--limit", "2")
    assert text.splitlines()[0].split()[:3] == ["decision", "time", "mode"] and len(text.splitlines()) == 3


def test_observations_and_export(site):
    cfg = str(site["config"])
    data = json.loads(run("observations", "--config", cfg, "--json", "--job", "501"))
    assert [r["speed"] for r in data["reports"]] == [10.0, 30.0] and data["samples"] == []
    assert "reports (1):" in run("observations", "--config", cfg, "--limit", "1")
    for what, count in (("decisions", 5), ("observations", 2), ("outcomes", 3)):
        out = site["tmp"] / f"{what}.csv"
        assert f"wrote {count} {what}" in run("export", what, "--config", cfg, "--out", str(out))
        with out.open() as f:
            rows = list(csv.DictReader(f))
        assert len(rows) == count
    with (site["tmp"] / "outcomes.csv").open() as f:
        assert {r["job_id"]: r["state"] for r in csv.DictReader(f)}["502"] == "COMPLETED"


def test_a_failed_export_leaves_the_earlier_file_whole(site, monkeypatch):
    """export wrote the CSV in place: a write that failed half way left a truncated file."""
    from slurm_advisor.cli import admin

    class FullDisk(csv.DictWriter):
        def writerows(self, rows):
            self.writerow(rows[0])
            raise OSError(28, "No space left on device")

    out = site["tmp"] / "decisions.csv"
    out.write_text("the earlier export\n")
    monkeypatch.setattr(admin.csv, "DictWriter", FullDisk)
    text = run("export", "decisions", "--config", str(site["config"]), "--out", str(out), code=2)
    assert text == f"error: {out}: cannot write: No space left on device\n"
    assert out.read_text() == "the earlier export\n"
    assert not [p for p in site["tmp"].iterdir() if p.name.startswith(".decisions")]


def test_explain_an_observed_decision_by_job_id(site):
    """What the decision recorded then, and Slurm's layout as read from Slurm: 2 tasks on each of
    four nodes, a layout the decision did not weigh, so no speed is claimed for it."""
    data = json.loads(run("explain", "501", "--config", str(site["config"]), "--json"))
    observed = site["decisions"]["observed"]
    recorded = {e["name"]: e for e in observed.evidence["layouts"]}
    assert data["decision"] == observed.id and data["mode"] == "observe" and not data["advised"]
    assert data["evidence"] == "recorded" and data["speed_model"] == "model pkg, which decided"
    assert data["chosen"]["nodes"] == list(observed.nodes)
    assert data["chosen"]["predicted"] == recorded["advised"]["predicted"] > 0
    assert [a["name"] for a in data["alternatives"]] == [n for n in recorded if n != "advised"]
    assert data["alternatives"][0]["name"] == "slurm"
    assert all(a["predicted"] == recorded[a["name"]]["predicted"] for a in data["alternatives"])
    slurm_nodes = [n.name for n in default_cluster()[:4]]
    assert data["slurm"]["nodes"] == slurm_nodes and data["slurm"]["predicted"] is None
    assert data["slurm"]["layout"] == "ps=gpu01;worker=gpu01,gpu02,gpu02,gpu03,gpu03,gpu04,gpu04"
    assert "scontrol show job -d" in data["slurm"]["note"] and "not among" in data["slurm"]["note"]
    assert data["measured"]["reports"] == 2 and data["measured"]["mean_speed"] == pytest.approx(20.0)
    text = run("explain", observed.id, "--config", str(site["config"]))
    assert "would advise" in text and "evidence: recorded" in text and "reported: 20 it/s" in text


def test_explain_an_older_decision_says_its_evidence_was_not_recorded(site):
    """A decision from before evidence was stored is judged again now, and says so."""
    old = replace(site["decisions"]["observed"], id="d-0000000000aa", evidence=None)
    with Store.open(str(site["db"])) as store:
        store.record_decisions([old])
    data = json.loads(run("explain", old.id, "--config", str(site["config"]), "--json"))
    assert data["evidence"].startswith("not recorded") and data["speed_model"] == "active model bbb"
    assert "rebuilt now" in data["cluster_view"] and data["chosen"]["predicted"] > 0
    assert [a["name"] for a in data["alternatives"]] == ["slurm-default", "pack"] and data["slurm"] is None


def test_explain_names_what_is_missing(site):
    cfg = str(site["config"])
    assert "no decision d-000000000000" in run("explain", "d-000000000000", "--config", cfg, code=2)
    assert "job 999: no decision" in run("explain", "999", "--config", cfg, code=2)


def test_shadow_lists_every_observed_decision_and_counts_only_what_was_predicted_then(site):
    """501: Slurm ran 2,2,2,2 over four nodes, a layout nobody predicted at decision time: listed,
    not counted. 502: Slurm ran exactly the one-node layout advised: counted, not different."""
    data = json.loads(run("shadow", "--config", str(site["config"]), "--json", "--since", "1d"))
    rows = {r["job_id"]: r for r in data["jobs"]}
    assert data["decisions"] == 2 and data["with_slurm_placement"] == 2 and data["counted"] == 1
    assert rows["501"]["not_counted"].startswith("Slurm's layout was not among those predicted then")
    assert rows["501"]["slurm_read_from"] == "scontrol show job -d" and rows["501"]["differs"] is True
    assert rows["502"]["not_counted"] is None and rows["502"]["differs"] is False
    assert rows["502"]["slurm_as"] == "slurm" and rows["502"]["slurm_as_modelled"] is True
    assert rows["502"]["slurm_read_from"] == "node list"  # one node: its count needs no reading
    assert data["placed_differently"] == 0 and data["geomean_predicted_speedup"] is None
    assert rows["501"]["measured"]["mean_speed"] == pytest.approx(20.0) and data["measured_jobs"] == 1
    assert json.loads(run("shadow", "--config", str(site["config"]), "--json"))["decisions"] == 3
    text = run("shadow", "--config", str(site["config"]))
    assert "placed differently" in text and "not counted: Slurm's layout was not among" in text


def test_the_shadow_interval_is_a_seeded_bootstrap_around_the_geometric_mean():
    from slurm_advisor.cli.admin_evidence import bootstrap_ci
    speedups = [0.9, 1.1, 1.2, 1.3, 1.05, 0.95, 1.4]
    low, high = bootstrap_ci(speedups)
    geomean = float(np.exp(np.mean(np.log(speedups))))
    assert low < geomean < high and bootstrap_ci(speedups) == [low, high]
    assert bootstrap_ci([1.2] * 10) == [1.2, 1.2] and bootstrap_ci([1.1] * 4) is None


def test_models_list_promote_rollback(site):
    cfg = str(site["config"])
    listed = json.loads(run("models", "list", "--config", cfg, "--json"))
    assert {m["version"]: m["status"] for m in listed} == {"aaa": "retired", "bbb": "active", "ccc": "candidate",
                                                          "default": "standby"}
    assert "never judged ccc" in run("models", "promote", "ccc", "--config", cfg, code=2)  # registered by hand
    assert "active model: ccc (was bbb)" in run("models", "promote", "ccc", "--force", "--config", cfg)
    assert (site["tmp"] / "active").resolve() == (site["tmp"] / "ccc").resolve()  # what the daemon follows
    assert "active model: bbb (was ccc)" in run("models", "rollback", "--config", cfg)
    assert (site["tmp"] / "active").resolve() == (site["tmp"] / "bbb").resolve()
    assert "active model: aaa (was bbb)" in run("models", "rollback", "--config", cfg)  # back, not to and fro
    assert "active model: default (was aaa)" in run("models", "rollback", "--config", cfg)
    assert "nothing to roll back to" in run("models", "rollback", "--config", cfg, code=2)
    assert "no model 'zzz'" in run("models", "promote", "zzz", "--config", cfg, code=2)
    assert "ccc" in run("models", "list", "--config", cfg)


def test_status_without_a_daemon_shows_the_store_and_exits_3(site):
    out = run("status", "--config", str(site["config"]), "--json", code=DAEMON_DOWN)
    data = json.loads(out)
    assert data["daemon"] is None and "cannot connect" in data["daemon_error"]
    assert [f["id"] for f in data["fallbacks"]] == [site["decisions"]["none"].id]
    assert [(q["id"], q["job_id"], q["state"]) for q in data["queue"]] == [
        (site["decisions"]["placed"].id, "503", "PENDING")]
    assert data["active_model"]["version"] == "bbb"
    text = run("status", "--config", str(site["config"]), code=DAEMON_DOWN)
    assert "daemon: not answering" in text and "recent fallbacks (1)" in text and "advised, not started (1)" in text


def test_status_names_the_reporters_the_last_retrain_left_out(site):
    why = "4 of 4 checked jobs' reports predict 0.12x the run time Slurm measured (allowed 0.5-2x)"
    with Store.open(str(site["db"])) as store:
        store.register_model(ModelRecord("ddd", str(site["tmp"] / "ddd"), "candidate", created_at=time.time() + 5,
                                         metrics={"owners": {"discounted": {"1002": why}}}))
    data = json.loads(run("status", "--config", str(site["config"]), "--json", code=DAEMON_DOWN))
    assert data["discounted_reporters"] == {"1002": why}
    assert f"reports: uid 1002 left out by the last retrain: {why}" in run("status", "--config", str(site["config"]),
                                                                           code=DAEMON_DOWN)


def test_status_and_mode_against_a_live_daemon(site):
    config = replace(DaemonConfig(), socket=site["tmp"] / "advisor.sock", mode="observe", refresh_s=0.05,
                     db=str(site["db"]), policy="pack")
    daemon = Daemon(config, SimulatedSource(), NoQueue(), AdviceService(Advisor(PackPolicy()), express),
                    Store.open(config.db))
    daemon.start()
    try:
        with ServerThread(AdvisorServer(config.socket, daemon.dispatcher(), 2.0)):
            sock = str(config.socket)
            data = json.loads(run("status", "--config", str(site["config"]), "--socket", sock, "--json"))
            assert data["daemon"]["mode"] == "observe" and data["daemon"]["policy"] == "pack"
            assert "daemon: observe mode (the config's), policy pack" in run("status", "--config", str(site["config"]),
                                                              "--socket", sock)
            assert "mode: observe -> enforce" in run("mode", "enforce", "--socket", sock)
            assert daemon.state.mode == "enforce"
            assert json.loads(run("mode", "advise", "--socket", sock, "--json"))["was"] == "enforce"
    finally:
        daemon.stop()
    assert "cannot connect" in run("mode", "advise", "--socket", sock, code=2)


def test_a_missing_store_is_one_line(tmp_path):
    out = run("decisions", "--db", str(tmp_path / "nope.db"), code=2)
    assert "does not exist" in out and len(out.splitlines()) == 1


@pytest.mark.parametrize("since", ["99999999d", "9" * 400 + "h", "36501d"])
def test_a_since_beyond_a_century_is_one_line_not_an_overflow(site, since):
    out = run("decisions", "--config", str(site["config"]), "--since", since, code=2)
    assert out.startswith(f"error: --since '{since}': at most 36500d") and len(out.splitlines()) == 1


def test_since_and_scan_helpers(site):
    now = datetime(2026, 1, 31, 12, tzinfo=UTC)
    assert parse_since("2h", now) == now - timedelta(hours=2)
    assert parse_since("2026-01-30T00:00", now) == datetime(2026, 1, 30, tzinfo=UTC)
    with pytest.raises(InputError, match="--since 'soon'"):
        parse_since("soon")
    with Store.open(str(site["db"]), create=False) as store:
        assert len(scan_decisions(store, scan=2)) == 2
        assert len(scan_decisions(store, lambda d: d.mode == "observe")) == 3
    assert table(("a", "bb"), [(1.23456, None)]) == "a     bb\n1.23  -"


def test_status_with_no_store_says_so_and_exits_2(tmp_path):
    data = json.loads(run("status", "--db", str(tmp_path / "nope.db"), "--socket", str(tmp_path / "x.sock"),
                          "--json", code=2))
    assert data["daemon"] is None and "does not exist" in data["store_error"] and data["queue"] == []


def test_status_lists_a_pin_whose_job_slurm_never_showed_apart_not_as_waiting_for_good(site):
    spreader = AdviceService(Advisor(SpreadPolicy()), express)
    snapshot = ClusterSnapshot.empty(default_cluster())
    rejected = replace(spreader.advise(snapshot, fields(), "advise")[1], time=datetime.now(UTC) - timedelta(minutes=5))
    fresh = spreader.advise(snapshot, fields(), "advise")[1]  # its job may simply not be listed yet
    assert rejected.action == fresh.action == "place"
    with Store.open(str(site["db"])) as store:
        store.record_decisions([rejected, fresh])
    data = json.loads(run("status", "--config", str(site["config"]), "--json", code=DAEMON_DOWN))
    assert [(q["id"], q["state"]) for q in data["queue"]] == [
        (fresh.id, "not seen in squeue yet"), (site["decisions"]["placed"].id, "PENDING")]
    assert data["never_seen"]["count"] == 1 and [r["id"] for r in data["never_seen"]["recent"]] == [rejected.id]
    text = run("status", "--config", str(site["config"]), code=DAEMON_DOWN)
    assert "advised, not started (2)" in text
    assert f"never seen in squeue 60 s on (rejected by Slurm or cancelled at once; 1): {rejected.id}" in text
