"""Evidence on the real testbed: observe-mode decisions record what was predicted then, the daemon
reads where Slurm put each job from Slurm itself, and `shadow` gives the same figure before and
after a promotion, counting no layout that was impossible for the job as submitted."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time

import pytest
from slurmctl import Slurm
from test_live_path import daemons, hooked, refreshed, start  # noqa: F401 -- fixtures and helpers

from slurm_advisor.daemon.allocation import SCONTROL
from slurm_advisor.domain.model_record import ModelRecord
from slurm_advisor.models.meta import DEFAULT_MODEL_DIR
from slurm_advisor.store import Store

pytestmark = pytest.mark.slurm

# (marker, sbatch options, CPUs per task): sequential, each on the cluster as the previous left it
JOBS = (
    ("type=resnet50 ps=1 workers=11", ["-n", "12"], 1),                           # Slurm: 8 on n1, 4 on n2
    ("type=bert ps=0 workers=4", ["-n", "4", "--gpus-per-task=1"], 1),            # Slurm: all on n1
    ("type=vgg16 ps=1 workers=5", ["-n", "6", "-c", "2"], 2),                      # Slurm: 4 on n1, 2 on n2
    ("type=resnet50 ps=1 workers=1", ["-N", "2", "-n", "2"], 1),                  # -N 2: one on each of two
    ("type=bert ps=0 workers=2", ["-n", "2", "-w", "n3"], 1),                     # -w n3
    ("type=resnet50 ps=1 workers=9", ["-n", "10", "-c", "1", "--mem-per-cpu=1000"], 1),
    ("type=bert ps=0 workers=6", ["-n", "6", "--gpus-per-task=1"], 1),             # GPUs: 4 on n1, 2 on n2
    ("type=resnet50 ps=1 workers=3", ["-n", "4", "-c", "2", "--gpus-per-task=1"], 2),
    ("type=vgg16 ps=2 workers=6", ["-n", "8"], 1),
    ("type=bert ps=0 workers=3", ["-N", "3", "-n", "3"], 1),                      # -N 3
    ("type=resnet50 ps=1 workers=15", ["-n", "16"], 1),                           # two whole nodes
)


def shadow(db, models_dir) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_ADVISOR_")}
    out = subprocess.run([sys.executable, "-m", "slurm_advisor.cli", "shadow", "--db", str(db), "--json"],
                         env={**env, "SLURM_ADVISOR_MODELS_DIR": str(models_dir)}, capture_output=True,
                         text=True, timeout=120, check=True).stdout
    return json.loads(out)


def test_shadow_counts_only_possible_layouts_predicted_then_and_survives_a_promotion(
        slurm: Slurm, daemons, tmp_path, site_model_dir):  # noqa: F811
    d = start(daemons, tmp_path, "--policy", "spread", "--mode", "observe")
    counts = {}
    for marker, options, cpus_per_task in JOBS:
        job = slurm.submit(["--comment", f"slurm-advisor: {marker}", *options], 1)
        view = slurm.wait(job, lambda v: v.state == "RUNNING", timeout_s=30)
        counts[job] = {node: r.cpus // cpus_per_task for node, r in view.allocation.items()}
        slurm.wait_gone(job)
        refreshed(2)  # the daemon saw it run and end before the next one is decided
    d.stop()
    models = tmp_path / "models"
    shutil.copytree(DEFAULT_MODEL_DIR, models / "aaa")
    shutil.copytree(site_model_dir, models / "ccc")  # another speed model altogether
    with Store.open(str(d.db), create=False) as store:
        outcomes = {job: store.outcome(job) for job in counts}
        for version in ("aaa", "ccc"):
            store.register_model(ModelRecord(version, str(models / version), "active" if version == "aaa"
                                             else "candidate", created_at=time.time()))
    for job, per_node in counts.items():  # what the daemon stored is Slurm's own allocation
        outcome = outcomes[job]
        assert dict(zip(outcome.nodes, outcome.tasks)) == per_node, (job, outcome)
        assert outcome.tasks_from == (SCONTROL if len(per_node) > 1 and len(per_node) < sum(per_node.values())
                                      else "node list")
    before = shadow(d.db, models)
    print("\nshadow before the promotion:", json.dumps({k: v for k, v in before.items() if k != "jobs"}))
    for row in before["jobs"]:
        print(row["job_id"], row["advisor_tasks"], row["slurm_tasks"], row["advisor_predicted"],
              row["slurm_predicted"], row["not_counted"])
    assert before["decisions"] >= 4 and before["with_slurm_placement"] == before["decisions"]
    assert all(r["impossible"] is None and r["evidence"] == "recorded" for r in before["jobs"])
    assert not any(k.startswith("impossible") for k in before["not_counted"])
    assert before["counted"] >= 6 and before["placed_differently"] >= 5
    assert before["geomean_predicted_speedup_ci95"] is not None
    subprocess.run([sys.executable, "-m", "slurm_advisor.cli", "models", "promote", "ccc", "--force", "--db",
                    str(d.db)], env={**{k: v for k, v in os.environ.items() if not k.startswith("SLURM_ADVISOR_")},
                                     "SLURM_ADVISOR_MODELS_DIR": str(models)},
                   capture_output=True, text=True, timeout=120, check=True)
    after = shadow(d.db, models)
    print("shadow after promoting ccc:", json.dumps({k: v for k, v in after.items() if k != "jobs"}))
    assert after == before
