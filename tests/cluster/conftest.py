"""tests/cluster: fixtures under ``fixtures/`` and, for the live test, the integration suite's
``slurm`` fixture (the testbed, empty before and after each test), shared rather than copied.
"""
from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
INTEGRATION = HERE.parent / "integration"
# slurmctl (the testbed's helpers) lives beside the integration tests, outside the package.
if str(INTEGRATION) not in sys.path:
    sys.path.insert(0, str(INTEGRATION))

_spec = importlib.util.spec_from_file_location("_integration_conftest", INTEGRATION / "conftest.py")
_integration = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_integration)
slurm_reachable = _integration.slurm_reachable
slurm = _integration.slurm


@pytest.fixture
def fixture_json():
    """The decoded JSON fixture of that name."""
    return lambda name: json.loads((HERE / "fixtures" / name).read_text())


@pytest.fixture
def fixture_text():
    return lambda name: (HERE / "fixtures" / name).read_text()
