"""What `slurm-advisor setup` lays out on a controller, around the installed package.

A site installs the package into a virtual environment (Debian 12 refuses a system-wide pip,
PEP 668), e.g. /opt/slurm-advisor, then runs that environment's `slurm-advisor setup` once, as
root. It writes:

- ``/etc/slurm-advisor/config.toml`` from the example (observe mode), only if there is none;
- the state directory ``/var/lib/slurm-advisor`` (the store, the spool, ``models/``), owned by the
  Slurm user, the daemon's user;
- the systemd units, or with ``cron`` the cron file, their commands pointing at this
  environment's ``slurm-advisor`` (never ``/usr/local/bin``);

and says what is left: the job submit hook (``hooks/install.sh``, shipped beside) and starting
the units. A file that exists and differs from what would be written is kept and reported, unless
``replace``: an admin's edits are never lost silently. ``root`` stages everything under another
directory (a package build, a test); the paths written into the files stay the target's.
"""
from __future__ import annotations

import grp
import os
import pwd
import sys
from dataclasses import dataclass
from pathlib import Path

from slurm_advisor.errors import InputError

#: Where the installed command lives in the shipped files, replaced by this environment's.
SHIPPED_COMMAND = "/usr/local/bin/slurm-advisor"
UNITS = ("slurm-advisor.service", "slurm-advisor-release.service", "slurm-advisor-release.timer",
         "slurm-advisor-retrain.service", "slurm-advisor-retrain.timer", "slurm-advisor-canary.service",
         "slurm-advisor-canary.timer")
CONFIG = Path("etc/slurm-advisor/config.toml")
STATE = Path("var/lib/slurm-advisor")
UNIT_DIR = Path("etc/systemd/system")
CRON = Path("etc/cron.d/slurm-advisor")


def shipped_files() -> Path:
    """The directory holding examples/ and hooks/ as shipped: under the environment's share/ for an
    installed package, the checkout itself for an editable one."""
    for base in (Path(sys.prefix) / "share" / "slurm-advisor", Path(__file__).resolve().parents[1]):
        if (base / "examples" / "systemd" / UNITS[0]).is_file():
            return base
    raise InputError(f"the shipped examples are missing (looked in {sys.prefix}/share/slurm-advisor "
                     "and beside the package): reinstall slurm-advisor")


def this_command() -> str:
    """The `slurm-advisor` of the running environment: what the units and cron lines run."""
    return str(Path(sys.prefix) / "bin" / "slurm-advisor")


@dataclass(frozen=True)
class Plan:
    root: Path
    slurm_user: str
    command: str
    cron: bool
    replace: bool


def rendered(text: str, plan: Plan) -> str:
    """A shipped file with this site's command and user."""
    text = text.replace(SHIPPED_COMMAND, plan.command)
    text = text.replace("User=slurm\n", f"User={plan.slurm_user}\n").replace("Group=slurm\n", f"Group={plan.slurm_user}\n")
    text = text.replace(" slurm /", f" {plan.slurm_user} /")                  # cron lines' user field
    return text.replace('slurm_user = "slurm"', f'slurm_user = "{plan.slurm_user}"')


def write(target: Path, text: str, *, replace: bool, mode: int = 0o644) -> str:
    """Write ``text`` to ``target`` unless something else is there; a line saying what happened."""
    if target.exists():
        if target.read_text(errors="replace") == text:
            return f"unchanged {target}"
        if not replace:
            return f"kept {target} (it differs from the shipped one; --replace writes it, keeping a .bak)"
        target.with_name(target.name + ".bak").write_bytes(target.read_bytes())
    target.parent.mkdir(parents=True, exist_ok=True)
    temporary = target.with_name(f".{target.name}.tmp.{os.getpid()}")
    temporary.write_text(text)
    temporary.chmod(mode)
    temporary.replace(target)
    return f"wrote {target}"


def state_directories(plan: Plan) -> list[str]:
    """The state directory and models/ in it, owned by the Slurm user when it exists here."""
    lines = []
    for directory in (plan.root / STATE, plan.root / STATE / "models"):
        existed = directory.is_dir()
        directory.mkdir(mode=0o750, parents=True, exist_ok=True)
        lines.append(f"{'kept' if existed else 'made'} {directory}")
        owner = _ids(plan.slurm_user)
        if owner is not None and os.geteuid() == 0:
            os.chown(directory, *owner)
    if _ids(plan.slurm_user) is None:
        lines.append(f"note: no user {plan.slurm_user!r} here: chown {plan.root / STATE} to the daemon's user")
    return lines


def _ids(user: str) -> tuple[int, int] | None:
    try:
        entry = pwd.getpwnam(user)
    except KeyError:
        return None
    try:
        return entry.pw_uid, grp.getgrnam(user).gr_gid
    except KeyError:
        return entry.pw_uid, entry.pw_gid


def lay_out(plan: Plan) -> list[str]:
    """Everything `setup` writes, in order; one line per file or directory."""
    shipped = shipped_files()
    examples = shipped / "examples"
    lines = [write(plan.root / CONFIG, rendered((examples / "etc" / "config.toml").read_text(), plan),
                   replace=plan.replace)]
    lines += state_directories(plan)
    if plan.cron:
        lines.append(write(plan.root / CRON, rendered((examples / "etc" / "cron").read_text(), plan),
                           replace=plan.replace))
    else:
        for unit in UNITS:
            lines.append(write(plan.root / UNIT_DIR / unit,
                               rendered((examples / "systemd" / unit).read_text(), plan), replace=plan.replace))
    return lines


def next_steps(plan: Plan) -> list[str]:
    hooks = shipped_files() / "hooks"
    start = ("the cron file runs release and retrain; start the daemon with: "
             f"{plan.command} serve --config /{CONFIG}" if plan.cron else
             "systemctl daemon-reload && systemctl enable --now slurm-advisor "
             "slurm-advisor-release.timer slurm-advisor-retrain.timer slurm-advisor-canary.timer")
    return [
        f"the hook: bash {hooks}/install.sh /etc/slurm   (a site's own job_submit.lua: add --chain; see --help)",
        start,
        ("the daemon starts in observe mode: it records what it would do and changes no job "
         "(slurm-advisor shadow; then slurm-advisor ctl mode advise)"),
    ]
