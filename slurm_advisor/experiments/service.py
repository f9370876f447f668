"""Train from a store, cluster file and trace, and write the model directory (I/O at this edge)."""
from __future__ import annotations

from pathlib import Path

from tqdm import tqdm

from slurm_advisor.errors import InputError
from slurm_advisor.experiments.plots import plot_learning_curve
from slurm_advisor.learned.hyper import Hyper
from slurm_advisor.retrain.data import training_samples
from slurm_advisor.sim.clusterfile import read_cluster
from slurm_advisor.sim.trace import read_trace
from slurm_advisor.store import Store
from slurm_advisor.training import checkpoint
from slurm_advisor.training.train import Ablation, train


def train_and_save(db_url: str, cluster: Path, trace: Path, out: Path, hp: Hyper,
                   ablation: Ablation | None = None, log=print, progress: bool = True) -> dict:
    nodes, jobs = read_cluster(cluster), read_trace(trace)
    with Store.open(db_url, create=False) as store:  # reading: a mistyped path is an error
        samples, skipped = training_samples(store, log)
    if len(samples) < 20:
        raise InputError(f"{db_url}: only {len(samples)} speed samples; record more with "
                         "`slurm-advisor simulate --record-to` or from the live cluster")
    with tqdm(total=hp.rl_episodes, desc="RL episodes", disable=not progress) as bar:
        report = train(samples, nodes, jobs, hp, ablation, log=log, bar=bar)
    meta = {
        "trained_on": {"db": _masked(db_url), "samples": len(samples), "skipped_samples": skipped,
                       "cluster": str(cluster),
                       "trace": str(trace), "jobs": len(jobs)},
        "speed_model": {"holdout_mape": report.speed_metrics["holdout_mape"],
                        "samples": report.speed_metrics["samples"]},
        **report.deployment_meta(),
        "ablation": vars(ablation or Ablation()),
        "curve": [{k: v for k, v in c.items()} for c in report.curve],
    }
    checkpoint.save(out, report.policy, report.speed, report.schema, hp, meta, lif_profile=report.lif_profile)
    plot_learning_curve(report.curve, report.teacher, report.teacher_scores[report.teacher][0],
                        Path(out) / "learning_curve.png")
    return meta


def _masked(url: str) -> str:
    from sqlalchemy.engine import make_url
    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:  # noqa: BLE001 -- a bare path is not a URL; it has no password either
        return url
