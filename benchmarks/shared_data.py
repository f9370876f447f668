"""Where the benchmarks read the public data sets: ``examples/data`` in the repository (each with
its source and license), or ``$SLURM_ADVISOR_DATA`` where that is set (the same rule as
tests/conftest.py)."""
from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("SLURM_ADVISOR_DATA", REPO / "examples" / "data"))
