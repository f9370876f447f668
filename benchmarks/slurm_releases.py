"""The Slurm tests on three Slurm releases: 22.05 on this host, 24.11 and 26.05 in Debian chroots.

For each release: start its testbed with the advisor's job submit hook (``.ci/slurm-testbed.sh``
on the host; ``.ci/slurm-chroot.sh start trixie|sid``, which builds and caches the chroot on a
fresh machine), run ``pytest -m slurm`` over the integration tests (the live path, the request
differential, the pinned layouts, node choice, backfill) and the hook's and the source's live
tests with that release's commands, stop the testbed. Prints a table and writes JSON: per release its ``sinfo --version``, tests passed,
failed, errored and skipped, the seconds pytest took, and the pinned-layout test's agreement line.

The host testbed follows SLURM_ADVISOR_TESTBED_DIR, _PORT and _NODE_PORT as the testbed script
does; the chroots use their own defaults (ports 36817 and 56817, nodes from 37001 and 57001), so
that the three may run beside CI's. Runs as root, one release after the other.

    python benchmarks/slurm_releases.py [--releases host,trixie,sid] [--venv .venv] [--out PATH] [--json]
                                        [-- PYTEST ARGS (default: the Slurm tests, SLURM_TESTS)]
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from datetime import UTC, datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RELEASES = ("host", "trixie", "sid")
#: every test that talks to a real Slurm (tests/run.sh runs the same on its newer release)
SLURM_TESTS = ("tests/integration", "tests/hooks/test_job_submit_live.py", "tests/cluster/test_slurm_cli_live.py")
_TESTBED_ENV = ("SLURM_ADVISOR_TESTBED_DIR", "SLURM_ADVISOR_TESTBED_PORT", "SLURM_ADVISOR_TESTBED_NODE_PORT")


def environment(release: str, venv: Path) -> dict[str, str]:
    env = dict(os.environ, SLURM_ADVISOR_TESTBED_HOOK="hooks/job_submit.lua", SLURM_ADVISOR_VENV=str(venv))
    if release != "host":
        for key in _TESTBED_ENV:
            env.pop(key, None)
    return env


def commands(release: str) -> tuple[list[str], list[str], list[str]]:
    """(start, stop, prefix that runs a command with the release's Slurm)."""
    if release == "host":
        script = [str(REPO / ".ci" / "slurm-testbed.sh")]
        return [*script, "start"], [*script, "stop"], []
    script = [str(REPO / ".ci" / "slurm-chroot.sh")]
    return [*script, "start", release], [*script, "stop", release], [*script, "run", release]


def counts(junit: Path) -> dict[str, int]:
    suite = ET.parse(junit).getroot()
    suite = suite if suite.tag == "testsuite" else suite.find("testsuite")
    total, failed, errors, skipped = (int(suite.get(k, 0)) for k in ("tests", "failures", "errors", "skipped"))
    return {"passed": total - failed - errors - skipped, "failed": failed, "errors": errors, "skipped": skipped}


def run_release(release: str, venv: Path, pytest_args: list[str], workdir: Path) -> dict:
    env = environment(release, venv)
    start, stop, prefix = commands(release)
    started = subprocess.run(start, cwd=REPO, env=env, capture_output=True, text=True, check=False)
    if started.returncode != 0:
        return {"release": release, "version": None, "error": started.stderr.strip()[-2000:]}
    try:
        conf = re.search(r"SLURM_CONF=(\S+)", started.stdout)
        if conf and not prefix:
            env["SLURM_CONF"] = conf[1]
        version = subprocess.run([*prefix, "sinfo", "--version"], cwd=REPO, env=env, capture_output=True,
                                 text=True, check=False).stdout.strip()
        junit = workdir / f"{release}.xml"
        began = time.monotonic()
        proc = subprocess.run([*prefix, "env", "SLURM_ADVISOR_TEST_SLURM=1", str(venv / "bin" / "python"), "-m",
                               "pytest", "-q", "-s", "-m", "slurm", "-p", "no:cacheprovider", f"--junitxml={junit}",
                               *pytest_args], cwd=REPO, env=env, capture_output=True, text=True, check=False)
        seconds = round(time.monotonic() - began, 1)
        agree = re.search(r"Slurm \S+: \d+ of \d+ pinned jobs agree[^\n]*", proc.stdout)
        result = {"release": release, "version": version, "seconds": seconds, "exit": proc.returncode,
                  "pinned_layouts": agree[0] if agree else None}
        if junit.is_file():
            result.update(counts(junit))
        else:
            result["error"] = (proc.stderr or proc.stdout).strip()[-2000:]
        return result
    finally:
        subprocess.run(stop, cwd=REPO, env=env, capture_output=True, check=False)


def table(results: list[dict]) -> str:
    lines = [f"{'release':8} {'slurm':20} {'passed':>6} {'failed':>6} {'errors':>6} {'skipped':>7} {'s':>7}"]
    for r in results:
        lines.append(f"{r['release']:8} {r.get('version') or '-':20} {r.get('passed', '-'):>6} "
                     f"{r.get('failed', '-'):>6} {r.get('errors', '-'):>6} {r.get('skipped', '-'):>7} "
                     f"{r.get('seconds', '-'):>7}")
        if r.get("pinned_layouts"):
            lines.append(f"         {r['pinned_layouts']}")
        if r.get("error"):
            lines.append(f"         error: {r['error'].splitlines()[-1]}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--releases", default=",".join(RELEASES),
                        help="comma-separated, in order: host (22.05), trixie (24.11), sid (26.05)")
    parser.add_argument("--venv", type=Path, default=REPO / ".venv", help="the virtual environment pytest runs in")
    parser.add_argument("--out", type=Path, default=Path("slurm_releases.json"), help="where the JSON goes")
    parser.add_argument("--json", action="store_true", help="print the JSON instead of the table")
    parser.add_argument("pytest_args", nargs="*", default=list(SLURM_TESTS), help="what pytest runs")
    args = parser.parse_args(argv)
    releases = [r for r in args.releases.split(",") if r]
    unknown = sorted(set(releases) - set(RELEASES))
    if unknown:
        parser.error(f"unknown release(s) {unknown}; choose from {list(RELEASES)}")
    # inside the repository: the chroots see it at the same path (their /tmp is their own)
    with tempfile.TemporaryDirectory(prefix=".slurm-releases-", dir=REPO) as tmp:
        results = [run_release(r, args.venv.resolve(), args.pytest_args, Path(tmp)) for r in releases]
    doc = {"when": datetime.now(UTC).isoformat(timespec="seconds"), "results": results}
    args.out.write_text(json.dumps(doc, indent=2) + "\n")
    print(json.dumps(doc, indent=2) if args.json else table(results))
    return 0 if all(r.get("failed") == 0 and r.get("errors") == 0 and "error" not in r for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
