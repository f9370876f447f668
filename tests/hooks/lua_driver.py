"""What the Lua hook tests share: the hooks, the driver (tests/hooks/lua/driver.lua), lua5.1,
and Python values as Lua literals."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
HOOK = REPO / "hooks" / "job_submit.lua"          # the standalone script: loads MODULE beside it
MODULE = REPO / "hooks" / "slurm_advisor.lua"
DRIVER = Path(__file__).parent / "lua" / "driver.lua"
LUA = shutil.which("lua5.1")
TIMEOUT_S = 0.2


def lua_socket_missing() -> str | None:
    """Why the hooks cannot run here, or None."""
    if LUA is None:
        return "lua5.1 not installed (Debian: apt-get install lua5.1 lua-socket)"
    probe = subprocess.run([LUA, "-e", 'require("socket.unix")'], check=False, capture_output=True,
                           text=True)
    return None if probe.returncode == 0 else "lua-socket not installed (Debian: apt-get install lua-socket)"


def lua_literal(value: Any) -> str:
    """`value` as a Lua expression (None -> nil)."""
    if value is None:
        return "nil"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return '"' + "".join(chr(b) if 32 <= b < 127 and b not in (34, 92) else f"\\{b:03d}"
                             for b in value.encode()) + '"'
    if isinstance(value, dict):
        return "{" + ",".join(f"[{lua_literal(k)}]={lua_literal(v)}" for k, v in value.items()) + "}"
    raise TypeError(value)
