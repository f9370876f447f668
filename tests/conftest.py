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
def site_model_dir(tmp_path_factory) -> Path:
    """A small model directory whose speed model is the site ensemble, fitted on speeds logged on
    five nodes under contention (the network untrained: policies that weigh with the speed
    model, like ``search``, need such a model; the shipped default has the older one)."""
    from dataclasses import replace

    from slurm_advisor.domain import Node
    from slurm_advisor.learned import checkpoint
    from slurm_advisor.learned.experiment import record
    from slurm_advisor.learned.features import FeatureSchema
    from slurm_advisor.learned.hyper import Hyper
    from slurm_advisor.learned.policy_net import PolicyNet
    from slurm_advisor.learned.site_speed import fit_site_model
    from slurm_advisor.sim.converters.synthetic import synthetic_jobs
    from slurm_advisor.speedmodels.contention import ContentionSpeedModel

    nodes = (Node("a1", 32, 8, 256_000, "s1"), Node("a2", 32, 8, 256_000, "s1"), Node("a3", 16, 4, 128_000, "s1"),
             Node("b1", 32, 8, 256_000, "s2"), Node("b2", 32, 8, 256_000, "s2"))
    hp = replace(Hyper(seed=1), speed_epochs=15, speed_hidden=16, speed_members=3)
    samples = record(nodes, synthetic_jobs(30, seed=2, mix="large", arrival_rate_per_h=2.0),
                     ContentionSpeedModel(), ("slurm-default", "spread"), seed=0)
    speed, _ = fit_site_model(samples, hp)
    schema = FeatureSchema()
    return checkpoint.save(tmp_path_factory.mktemp("site-model"), PolicyNet(schema.node_dim, schema.global_dim, hp.hidden),
                           speed, schema, hp, {"deploy": "network"})


@pytest.fixture
def cli_env(monkeypatch) -> None:
    """The `slurm-advisor` command with its subcommands registered, run in-process with no
    ``SLURM_ADVISOR_*`` variable of the calling shell leaking into its config."""
    from slurm_advisor.cli.main import _register

    for key in [k for k in os.environ if k.startswith("SLURM_ADVISOR_")]:
        monkeypatch.delenv(key)
    _register()
