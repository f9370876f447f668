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
