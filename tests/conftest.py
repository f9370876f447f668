import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The public data sets the tests read: in the repository (examples/data, each with its source
    and license), or ``$SLURM_ADVISOR_DATA`` where that is set."""
    path = Path(os.environ.get("SLURM_ADVISOR_DATA", REPO / "examples" / "data"))
    assert path.is_dir(), f"public data not found at {path}; set SLURM_ADVISOR_DATA"
    return path


@pytest.fixture(scope="session")
def site_model_dir() -> Path:
    """The shipped model directory (its speed model the site ensemble, as every model's now)."""
    from slurm_advisor.models.meta import DEFAULT_MODEL_DIR

    return DEFAULT_MODEL_DIR


@pytest.fixture(scope="session")
def other_model_dir(tmp_path_factory) -> Path:
    """A small model directory whose speed model is not the shipped one: a site ensemble fitted on
    speeds logged on five nodes under contention (the network untrained), for tests that need two
    models that predict differently."""
    from dataclasses import replace

    from slurm_advisor.domain import Node
    from slurm_advisor.experiments.experiment import record
    from slurm_advisor.learned.hyper import Hyper
    from slurm_advisor.learned.policy.features import FeatureSchema
    from slurm_advisor.learned.policy.net import PolicyNet
    from slurm_advisor.learned.speed.fit import fit_site_model
    from slurm_advisor.speedmodels.contention import ContentionSpeedModel
    from slurm_advisor.traces.synthetic import synthetic_jobs
    from slurm_advisor.training import checkpoint

    nodes = (Node("a1", 32, 8, 256_000, "s1"), Node("a2", 32, 8, 256_000, "s1"), Node("a3", 16, 4, 128_000, "s1"),
             Node("b1", 32, 8, 256_000, "s2"), Node("b2", 32, 8, 256_000, "s2"))
    hp = replace(Hyper(seed=1), speed_epochs=15, speed_hidden=16, speed_members=3)
    samples = record(nodes, synthetic_jobs(30, seed=2, mix="large", arrival_rate_per_h=2.0),
                     ContentionSpeedModel(), ("slurm-default", "spread"), seed=0)
    speed, _ = fit_site_model(samples, hp)
    schema = FeatureSchema()
    return checkpoint.save(tmp_path_factory.mktemp("other-model"), PolicyNet(schema.node_dim, schema.global_dim, hp.hidden),
                           speed, schema, hp, {"deploy": "network"})


@pytest.fixture
def cli_env(monkeypatch) -> None:
    """The `slurm-advisor` command with its subcommands registered, run in-process with no
    ``SLURM_ADVISOR_*`` variable of the calling shell leaking into its config."""
    from slurm_advisor.cli.main import _register

    for key in [k for k in os.environ if k.startswith("SLURM_ADVISOR_")]:
        monkeypatch.delenv(key)
    _register()


# -- small clusters, traces and recorded speed samples (the learned parts' tests) ---------------
@pytest.fixture(scope="session")
def small_nodes():
    from small_cluster import make_nodes

    return make_nodes(4)


@pytest.fixture(scope="session")
def small_jobs():
    """Jobs of 1-16 workers on 32 GPUs: most span nodes, some queue."""
    from slurm_advisor.traces.synthetic import synthetic_jobs

    return synthetic_jobs(40, seed=5, mix="large", arrival_rate_per_h=1.0)


@pytest.fixture(scope="session")
def truth():
    from slurm_advisor.speedmodels.contention import ContentionSpeedModel

    return ContentionSpeedModel()


@pytest.fixture(scope="session")
def samples(small_nodes, small_jobs, truth):
    """What the store would hold: speeds logged while three heuristics ran the trace."""
    from slurm_advisor.experiments.experiment import record

    return record(small_nodes, small_jobs, truth, ("slurm-default", "random", "spread"), seed=0)
