"""Where the benchmarks read the public data sets: ``$SLURM_ADVISOR_SHARED/data``, by default
``../shared/data`` beside the repository (the same rule as tests/conftest.py)."""
from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("SLURM_ADVISOR_SHARED", REPO.parent / "shared")) / "data"
