"""The cluster through pyslurm (Slurm's C API), for sites that would rather not fork commands.

pyslurm is built against one Slurm release and talks to that release only, so the source
refuses to start unless pyslurm imports and its major.minor matches ``sinfo --version``.
It reads pyslurm's dict API (``pyslurm.node().get()``, ``pyslurm.job().get()``), turns each
record into the shape of Slurm 22.05's JSON and reuses that parser, so both sources judge
node states and jobs by one set of rules. It is not exercised here (no pyslurm in CI); the
CLI source (``slurm``) is the default.
"""
from __future__ import annotations

import re
import subprocess
import time
from typing import Any

from slurm_advisor.cluster.base import SourceError
from slurm_advisor.cluster.slurm_cli import build_snapshot
from slurm_advisor.cluster.slurm_json import parse_sinfo, parse_squeue
from slurm_advisor.domain import ClusterSnapshot

_DEFAULT = "the CLI source ('slurm') is the default and needs no pyslurm"


class PyslurmSource:
    name = "pyslurm"

    def __init__(self, timeout_s: float = 10):
        try:
            import pyslurm
        except ImportError as exc:
            raise SourceError(f"pyslurm is not importable ({exc}); {_DEFAULT}") from None
        have, want = _major_minor(getattr(pyslurm, "__version__", "")), _slurm_version(timeout_s)
        if have is None or have != want:
            raise SourceError(f"pyslurm {getattr(pyslurm, '__version__', '?')} does not match Slurm "
                              f"{want[0]}.{want[1]:02d} (sinfo --version); {_DEFAULT}")
        self._pyslurm = pyslurm

    def snapshot(self) -> ClusterSnapshot:
        try:
            nodes = self._pyslurm.node().get()
            jobs = self._pyslurm.job().get()
        except (ValueError, RuntimeError, OSError) as exc:  # what pyslurm raises when Slurm refuses
            raise SourceError(f"pyslurm: {exc}") from None
        node_doc = {"nodes": [_node(n) for n in nodes.values()]}
        job_doc = {"jobs": [_job(j) for j in jobs.values()]}
        return build_snapshot(parse_sinfo(node_doc), parse_squeue(job_doc), {}, time.time())


def _node(n: dict[str, Any]) -> dict[str, Any]:
    state = str(n.get("state", "")).split("+")  # "IDLE+DRAIN"
    return {"name": n.get("name"), "cpus": n.get("cpus"), "real_memory": n.get("real_memory"),
            "gres": n.get("gres") or [], "gres_used": n.get("gres_used") or [],
            "alloc_cpus": n.get("alloc_cpus", 0), "alloc_memory": n.get("alloc_mem", 0),
            "state": state[:1], "state_flags": state[1:], "features": n.get("features_active") or ""}


def _job(j: dict[str, Any]) -> dict[str, Any]:
    cpus_on = j.get("cpus_allocated") or {}
    return {"job_id": j.get("job_id"), "job_state": j.get("job_state"), "nodes": j.get("nodes") or "",
            "comment": j.get("comment") or "", "user_name": j.get("user_name") or "",
            "cpus": j.get("num_cpus"), "tres_alloc_str": j.get("tres_alloc_str") or "",
            "start_time": j.get("start_time"), "time_limit": _minutes(j.get("time_limit")),
            "job_resources": {"nodes": {"allocation": [
                {"name": node, "cpus": {"count": c}, "memory": {"allocated": 0}} for node, c in cpus_on.items()]}}}


def _minutes(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None  # "UNLIMITED"


def _major_minor(version: str) -> tuple[int, int] | None:
    match = re.search(r"(\d+)\.(\d+)", version)
    return (int(match.group(1)), int(match.group(2))) if match else None


def _slurm_version(timeout_s: float) -> tuple[int, int]:
    try:
        out = subprocess.run(["sinfo", "--version"], capture_output=True, text=True, timeout=timeout_s,
                             check=False).stdout
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SourceError(f"sinfo --version: {exc}") from None
    found = _major_minor(out)
    if found is None:
        raise SourceError(f"sinfo --version: no version in {out.strip()!r}")
    return found
