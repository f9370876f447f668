import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The read-only public data sets beside the checkout (../shared/data)."""
    path = Path(os.environ.get("SLURM_ADVISOR_SHARED", REPO.parent / "shared")) / "data"
    assert path.is_dir(), f"shared data not found at {path}; set SLURM_ADVISOR_SHARED"
    return path
