"""Shared by the retrain tests: versions of the packaged model published into a models directory."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

from slurm_advisor.daemon.build import model_version
from slurm_advisor.models import versions
from slurm_advisor.models.meta import DEFAULT_MODEL_DIR


def publish_copy(models_dir: Path, note: str) -> str:
    """The packaged model, its meta.json marked with ``note`` (so each note is its own version),
    published as a version of ``models_dir``; returns the version."""
    tmp = versions.new_candidate_dir(models_dir)
    for name in versions.MODEL_FILES:
        if (DEFAULT_MODEL_DIR / name).exists():  # the packaged model predates lif_profile.json
            shutil.copy(DEFAULT_MODEL_DIR / name, tmp / name)
    meta = json.loads((tmp / "meta.json").read_text())
    (tmp / "meta.json").write_text(json.dumps({**meta, "note": note}))
    version = model_version(tmp)
    versions.publish(tmp, models_dir, version)
    return version


CLUSTER_TOML = """
[[nodes]]
prefix = "n"
count = 4
cpus = 32
gpus = 8
mem_mb = 256000
switch = "s1"
"""
# A tiny training budget: seconds on one core.
TINY = ("--episodes", "2", "--hyper", "speed_epochs=30", "--hyper", "speed_hidden=64", "--hyper", "hidden=16",
        "--hyper", "warm_episodes=1", "--hyper", "warm_epochs=8", "--hyper", "episode_jobs=20",
        "--hyper", "updates_per_episode=2", "--hyper", "minibatch=64")


def request_fields(job) -> dict:
    """The hook's fields for a job submitted with the marker (every task a worker's demand, as Slurm does)."""
    d = job.worker_demand
    return {"comment": f"slurm-advisor: type={job.type} ps={job.num_ps} workers={job.num_workers} "
                       f"iters={job.iterations:g}",
            "num_tasks": job.num_tasks, "cpus_per_task": d.cpus, "pn_min_memory": d.mem_mb // d.cpus,
            "mem_per_cpu": True, "tres_per_task": f"gres:gpu:{d.gpus}" if d.gpus else None, "user_id": 1000}


def make_site(directory: Path, *, poison: bool = False, jobs: int = 40, seed: int = 5) -> tuple[str, Path]:
    """A store as a site's would look after some weeks: speed samples (recorded in simulation while
    three heuristics ran a trace, under the contention truth) and the advised jobs' decisions.
    ``poison``: every sample's speed replaced by a random one. Returns (db path, cluster file)."""
    from dataclasses import replace
    from datetime import UTC, datetime, timedelta

    import numpy as np

    from slurm_advisor.domain.decision import Decision
    from slurm_advisor.experiments.experiment import record
    from slurm_advisor.sim.clusterfile import read_cluster
    from slurm_advisor.speedmodels.contention import ContentionSpeedModel
    from slurm_advisor.store import Store
    from slurm_advisor.traces.synthetic import synthetic_jobs

    directory.mkdir(parents=True, exist_ok=True)
    cluster = directory / "cluster.toml"
    cluster.write_text(CLUSTER_TOML)
    trace = synthetic_jobs(jobs, seed=seed, mix="large", arrival_rate_per_h=1.0)
    samples = record(read_cluster(cluster), trace, ContentionSpeedModel(), ("slurm-default", "random", "spread"), seed=0)
    if poison:
        rng = np.random.default_rng(1)
        samples = [replace(s, speed=float(10 ** rng.uniform(-2, 2))) for s in samples]
    t0 = datetime(2026, 11, 1, tzinfo=UTC)
    decisions = [Decision(f"d-{i + 1:012x}", t0 + timedelta(seconds=j.submit_time), "advise", "place",
                          "slurm-default", None, j.type, 1000, request_fields(j)) for i, j in enumerate(trace)]
    db = str(directory / "advisor.db")
    with Store.open(db) as store:
        store.record_samples(samples)
        store.record_decisions(decisions)
    return db, cluster
