"""Fixtures of the Lua hook tests: a fake daemon, and one driver run of a hook against it."""
from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fake_advisor import FakeAdvisor
from lua_driver import DRIVER, HOOK, LUA, TIMEOUT_S, lua_literal


@pytest.fixture
def daemon(tmp_path: Path) -> Iterator[FakeAdvisor]:
    server = FakeAdvisor(tmp_path / "advisor.sock")
    yield server
    server.close()


@pytest.fixture
def run_hook(tmp_path: Path, daemon: FakeAdvisor):
    def run(fields: dict[str, Any], mode: str = "submit", hook: Path = HOOK, *extra: str,
            env: dict[str, str] | None = None) -> dict[str, Any]:
        case = tmp_path / "case.lua"
        case.write_text("return " + lua_literal(fields) + "\n")
        environ = {**os.environ, "SLURM_ADVISOR_SOCKET": daemon.path, "SLURM_ADVISOR_TIMEOUT": str(TIMEOUT_S),
                   "SLURM_ADVISOR_KILL_SWITCH": str(tmp_path / "disabled"), **(env or {})}
        proc = subprocess.run([LUA, str(DRIVER), mode, str(hook), str(case), *extra], check=False,
                              capture_output=True, text=True, env=environ, timeout=60)
        assert proc.returncode == 0, proc.stderr
        return json.loads(proc.stdout)
    return run
