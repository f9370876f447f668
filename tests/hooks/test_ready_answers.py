"""The real hook and the real daemon together: a burst of the same job in one Lua state (as
slurmctld calls the hook) takes ready answers where it may and asks over the socket otherwise;
every decision it wrote is recorded, and the daemon's claims never hold more than a node has."""
from __future__ import annotations

import json
import os
import subprocess
import time
from dataclasses import replace
from pathlib import Path

import pytest
from lua_driver import DRIVER, HOOK, LUA, lua_literal, lua_socket_missing

from slurm_advisor.advisor import Advisor
from slurm_advisor.daemon.config import DaemonConfig
from slurm_advisor.daemon.daemon import Daemon
from slurm_advisor.daemon.queue import NoQueue
from slurm_advisor.daemon.server import AdvisorServer, ServerThread
from slurm_advisor.daemon.service import AdviceService
from slurm_advisor.domain import ClusterSnapshot, Node
from slurm_advisor.policies.spread import SpreadPolicy
from slurm_advisor.store import Store

pytestmark = pytest.mark.skipif(bool(lua_socket_missing()), reason=lua_socket_missing() or "")

NODES = tuple(Node(f"n{i}", 8, 4, 32000) for i in range(1, 5))
JOB = {"comment": "slurm-advisor: type=resnet50 ps=0 workers=2", "name": "train", "user_id": 1000,
       "num_tasks": 2, "cpus_per_task": 1, "mem_per_cpu": 1000, "tres_per_task": "gres:gpu:1",
       "environment": {"HOME": "/home/u"}}


class Static:
    name = "static"

    def snapshot(self) -> ClusterSnapshot:
        return ClusterSnapshot.empty(NODES)


@pytest.mark.parametrize(("pause_s", "comment"), [
    (0.0, JOB["comment"]),  # back to back
    (0.05, JOB["comment"]),  # with time for the file to catch up
    (0.05, 'run "7"\tü\\ ' + JOB["comment"]),  # the key's JSON text, escapes and UTF-8, as both sides write it
])
def test_a_burst_takes_ready_answers_and_never_overcommits(tmp_path: Path, pause_s: float, comment: str) -> None:
    config = replace(DaemonConfig(), mode="advise", socket=tmp_path / "advisor.sock", db=str(tmp_path / "advisor.db"),
                     refresh_s=60.0, claim_ttl_s=600.0)
    daemon = Daemon(config, Static(), NoQueue(), AdviceService(Advisor(SpreadPolicy()), lambda s, j, p: p),
                    Store.open(config.db))
    daemon.start()
    case = tmp_path / "case.lua"
    case.write_text("return " + lua_literal({**JOB, "comment": comment}) + "\n")
    environ = {**os.environ, "SLURM_ADVISOR_SOCKET": str(config.socket), "SLURM_ADVISOR_TIMEOUT": "1",
               "SLURM_ADVISOR_KILL_SWITCH": str(tmp_path / "disabled")}
    try:
        with ServerThread(AdvisorServer(config.socket, daemon.dispatcher(), 2.0, taken=True)):
            proc = subprocess.run([LUA, str(DRIVER), "burst", str(HOOK), str(case), "12", str(pause_s)], check=True,
                                  capture_output=True, text=True, env=environ, timeout=60)
            time.sleep(0.2)
        calls = [dict(c) for c in json.loads(proc.stdout)["calls"]]
        held: dict[str, int] = {}
        for claim in daemon.state.claims._claims.values():
            for node, demand in zip(claim.nodes, claim.demand):
                held[node] = held.get(node, 0) + int(demand[1])
    finally:
        daemon.stop()
    stamped = [c["admin_comment"].split(":")[1] for c in calls if "admin_comment" in c]
    assert len(stamped) == 12  # every marked job leaves a record
    assert held == {"n1": 4, "n2": 4, "n3": 4, "n4": 4}
    assert daemon.ready.unknown == 0  # every answer the hook used was one the daemon held
    if pause_s:  # with time for the file to be rewritten (back to back, a busy machine may miss all)
        assert daemon.state.counters.ready_taken >= 2
    with Store.open(config.db, create=False) as store:
        recorded = {d.id: d for d in store.load_decisions()}
    assert set(stamped) <= set(recorded)  # every decision the hook wrote is the daemon's record
    assert all(recorded[i].request["name"] == "train" for i in stamped)
    # 16 GPUs, 2 a job: eight jobs advised, then none fit and the rest are left to Slurm, stamped
    left = [i for i in stamped if recorded[i].reason.startswith("left to Slurm as submitted")]
    assert len(left) == 4 and all(not recorded[i].layout for i in left)
