"""Same seed, same result, whatever the process's string-hash seed (sets must not order floats)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SCRIPT = """
import json, sys
from slurm_advisor.sim.clusterfile import read_cluster
from slurm_advisor.traces.synthetic import synthetic_jobs
from slurm_advisor.sim.runner import compare
from slurm_advisor.speedmodels import load_speed_model
nodes = read_cluster(sys.argv[1])
jobs = synthetic_jobs(60, seed=5, mix="large", arrival_rate_per_h=3.0)
out = {}
for spec in ("contention", "gavel:" + sys.argv[2]):
    res = compare(nodes, jobs, load_speed_model(spec), ["oracle", "slurm-default"], seed=0)
    out[spec.split(":")[0]] = {k: v.summary()["avg_jct"] for k, v in res.items()}
print(json.dumps(out))
"""


def _run(hash_seed: str, gavel: Path) -> dict:
    env = {**os.environ, "PYTHONHASHSEED": hash_seed}
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(REPO / "examples/clusters/16x8.toml"), str(gavel)],
                          env=env, capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def test_results_do_not_depend_on_the_hash_seed(shared_data) -> None:
    gavel = shared_data / "gavel" / "simulation_throughputs.json"
    assert _run("1", gavel) == _run("2", gavel)
