"""The README's install section, run as written (paths moved under a temporary root): a venv,
pip install of this checkout, `slurm-advisor setup`, the hook's install.sh; then the installed
daemon starts in observe mode from the written config. The lines come from the README itself,
so the test fails when the README says something that does not work.

Twice: on this host (Debian 12), and on Debian trixie inside CI's trixie chroot (the modern pass
runs it there: it is marked ``slurm``), with trixie's own Python as ``python3`` (3.13, from
``python3.13-venv``, which .ci/slurm-chroot.sh installs in that chroot: a trixie site's
``apt install python3-venv`` gives the same interpreter).

Slow: pip installs the package and its dependencies into a fresh venv (from the package index or
pip's cache)."""
from __future__ import annotations

import os
import re
import select
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from slurm_advisor.daemon.client import call

REPO = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow


def readme_install_lines() -> list[str]:
    text = (REPO / "README.md").read_text()
    section = text[text.index("## Install on a real Slurm"):]
    block = re.search(r"```bash\n(.*?)```", section, re.DOTALL).group(1)
    return [line.split("  #")[0].strip() for line in block.splitlines()
            if line.strip() and not line.lstrip().startswith("#")]


def as_run_here(line: str, tmp: Path) -> str | None:
    """The README's line with its paths under ``tmp``; None for what needs systemd."""
    if line.startswith("systemctl"):
        return None
    line = line.replace("/opt/slurm-advisor", str(tmp / "opt/slurm-advisor"))
    line = line.replace("'slurm-advisor[postgres]'", f"'{REPO}[postgres]'")   # not on an index: this checkout
    line = line.replace("slurm-advisor setup", f"slurm-advisor setup --root {tmp / 'root'}")
    return line.replace(" /etc/slurm", f" {tmp / 'root/etc/slurm'}")


#: trixie's Python, in the trixie chroot (.ci/slurm-chroot.sh installs python3.13-venv there)
TRIXIE_PYTHON = Path("/usr/bin/python3.13")


def _codename() -> str:
    """This system's Debian codename (bookworm on the host, trixie in the chroot)."""
    try:
        text = Path("/etc/os-release").read_text()
    except OSError:
        return ""
    found = re.search(r"^VERSION_CODENAME=(\S+)", text, re.MULTILINE)
    return found.group(1) if found else ""


@pytest.mark.skipif(shutil.which("lua5.1") is None, reason="lua5.1 not installed")
def test_the_readmes_install_section_works_as_written(tmp_path):
    print(_install_and_serve(tmp_path))


@pytest.mark.slurm
@pytest.mark.skipif(_codename() != "trixie" or not TRIXIE_PYTHON.exists() or shutil.which("lua5.1") is None,
                    reason="runs in the trixie chroot with python3.13-venv (CI's modern pass: "
                           ".ci/slurm-chroot.sh run trixie ...)")
def test_the_readmes_install_section_works_on_debian_trixie(tmp_path):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "python3").symlink_to(TRIXIE_PYTHON)  # what `python3` is on a trixie site
    said = _install_and_serve(tmp_path, path_first=bindir)
    assert "(3.13)" in said, said
    print(said)


def _install_and_serve(tmp_path: Path, path_first: Path | None = None) -> str:
    """The README's lines run, the installed daemon started from the config they wrote; what
    the install weighs and the daemon's RSS, as a line. ``path_first`` is put first on PATH."""
    lines = readme_install_lines()
    assert lines[0].startswith("python3 -m venv /opt/slurm-advisor") and any("setup" in x for x in lines)
    (tmp_path / "root/etc/slurm").mkdir(parents=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_ADVISOR_", "VIRTUAL_ENV", "PYTHON"))}
    if path_first is not None:
        env["PATH"] = f"{path_first}:{env.get('PATH', '/usr/bin:/bin')}"
    for line in filter(None, (as_run_here(x, tmp_path) for x in lines)):
        proc = subprocess.run(["bash", "-c", line], check=False, cwd=tmp_path, env=env, capture_output=True, text=True,
                              timeout=900)
        assert proc.returncode == 0, f"{line}\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}"
    venv = tmp_path / "opt/slurm-advisor"
    assert (tmp_path / "root/etc/slurm/job_submit.lua").is_file()
    assert (tmp_path / "root/etc/systemd/system/slurm-advisor.service").read_text().count(f"{venv}/bin/slurm-advisor")
    rss = _serve_observing(tmp_path, venv, env)
    # a serving install: no torch in it
    no_torch = subprocess.run([str(venv / "bin/python"), "-c", "import torch"], check=False, capture_output=True,
                              env=env)
    assert no_torch.returncode != 0
    version = subprocess.run([str(venv / "bin/python"), "-c", "import sys; print(*sys.version_info[:2], sep='.')"],
                             check=True, capture_output=True, text=True, env=env).stdout.strip()
    return (f"\nserving install: {_size_mb(venv):.0f} MB ({version}); "
            f"daemon RSS {rss[0]:.0f} MB, its children {' + '.join(f'{m:.0f}' for m in rss[1:])} MB")


def _serve_observing(tmp_path: Path, venv: Path, env: dict[str, str]) -> list[float]:
    """The installed daemon, from the config setup wrote (its paths moved under tmp): it serves
    in observe mode; its RSS and its children's, MB."""
    sock = tmp_path / "advisor.sock"
    serve_env = {**env, "SLURM_ADVISOR_SOCKET": str(sock), "SLURM_ADVISOR_SOURCE": "simulated",
                 "SLURM_ADVISOR_DB": str(tmp_path / "advisor.db"),
                 "SLURM_ADVISOR_MODELS_DIR": str(tmp_path / "root/var/lib/slurm-advisor/models")}
    proc = subprocess.Popen([str(venv / "bin/slurm-advisor"), "serve", "--config",
                             str(tmp_path / "root/etc/slurm-advisor/config.toml")], env=serve_env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        status = _status_when_up(sock, proc)
        assert status["mode"] == "observe" and status["source"] == "simulated"
        return _rss_mb(proc.pid)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        proc.stderr.close()


def _status_when_up(sock: Path, proc: subprocess.Popen) -> dict:
    """The installed daemon's status once it logs that it serves (its log is on stderr): that
    line is the event waited on, read unbuffered, each wait bounded by what is left of 120 s."""
    deadline, seen, fd = time.monotonic() + 120, b"", proc.stderr.fileno()
    while (left := deadline - time.monotonic()) > 0:
        ready, _, _ = select.select([fd], [], [], left)
        chunk = os.read(fd, 65536) if ready else b""
        if not chunk:
            raise AssertionError(f"the installed daemon did not start serving: {seen[-2000:].decode(errors='replace')}")
        seen += chunk
        if b"serving on" in seen:
            return call(sock, "status", timeout_s=5.0)
    raise AssertionError("the installed daemon did not serve within 120 s")


def _rss_mb(pid: int) -> list[float]:
    """VmRSS of ``pid`` and of each of its children (the decision writer, the resource tracker), MB."""
    def rss(p: str) -> float:
        for line in Path(f"/proc/{p}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return 0.0
    children = [c for task in Path(f"/proc/{pid}/task").iterdir()
                for c in (task / "children").read_text().split()]
    return [rss(str(pid)), *(rss(c) for c in children)]


def _size_mb(path: Path) -> float:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink()) / 1e6
