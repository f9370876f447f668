"""Serving installs without torch: the daemon (learned and search), the admin commands, `layout`,
`report` and the golden schedules run in processes where ``import torch`` fails, and the serving
modules never import torch even where it is installed (the import graph). `layout` and `report`
also run on a job's light install (click alone: no numpy, no store, no model)."""
from __future__ import annotations

import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from slurm_advisor.daemon.client import call
from slurm_advisor.models.meta import DEFAULT_MODEL_DIR

REPO = Path(__file__).resolve().parents[2]
NO_TORCH = "import sys; sys.modules['torch'] = None  # every import of torch or torch.* now fails\n"
CLI = NO_TORCH + "sys.argv[0] = 'slurm-advisor'\nfrom slurm_advisor.cli.main import main\nmain()\n"
JOB = {"comment": "slurm-advisor: type=resnet50 ps=1 workers=3", "num_tasks": 4, "cpus_per_task": 2,
       "tres_per_task": "gres:gpu:1", "user_id": 0}


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_ADVISOR_", "SLURM_"))}
    return {**env, "PYTHONPATH": str(REPO), **extra}


def _python(code: str, *args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code, *args], env=_env(**env), capture_output=True, text=True,
                          timeout=120, check=False)


def test_the_serving_modules_import_no_torch_where_it_is_installed(site_model_dir) -> None:
    """The import graph: every command registered, the daemon built and every policy it can serve
    made (the search over a site model too); torch, installed here, is never imported."""
    code = f"""
import sys, tempfile
from dataclasses import replace
from pathlib import Path
from slurm_advisor.cli import main
main._register()
from slurm_advisor.daemon.build import build_daemon
from slurm_advisor.daemon.config import DaemonConfig
from slurm_advisor.policies import POLICIES, PolicyContext, make_policy
import slurm_advisor.report, slurm_advisor.cli.admin_explain, slurm_advisor.models.served
for name in POLICIES:
    if name != "oracle":
        make_policy(name, PolicyContext(model_dir=Path({str(site_model_dir)!r}) if name == "search" else None))
work = Path(tempfile.mkdtemp())
daemon = build_daemon(replace(DaemonConfig(), source="simulated", socket=work / "a.sock", db=str(work / "a.db")))
assert daemon.status()["policy"] == "learned", daemon.status()
daemon.stop()
print(sorted(m for m in sys.modules if m == "torch" or m.startswith("torch.")))
"""
    done = _python(code)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "[]"


def _serve(tmp_path: Path, *args: str) -> subprocess.Popen:
    sock, db = tmp_path / "advisor.sock", tmp_path / "advisor.db"
    return subprocess.Popen([sys.executable, "-c", CLI, "serve", "--source", "simulated", "--socket", str(sock),
                             "--db", str(db), "--refresh-s", "0.2", *args], env=_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _serving(proc: subprocess.Popen, timeout_s: float = 60.0) -> list[str]:
    """Wait for the daemon's "serving on" line (logged once it listens); the lines read are
    returned, and the rest of its stderr is collected after it ends."""
    lines: queue.Queue[str | None] = queue.Queue()

    def pump() -> None:
        for line in proc.stderr:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=pump, daemon=True).start()
    seen = []
    while not seen or "serving on" not in seen[-1]:
        line = lines.get(timeout=timeout_s)
        assert line is not None, "the daemon ended before it served:\n" + "".join(seen)
        seen.append(line)
    proc.lines = lines  # type: ignore[attr-defined]  (the pump owns stderr from now on)
    return seen


def _stopped(proc: subprocess.Popen) -> str:
    """SIGTERM, then the daemon's stderr to its end."""
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=30)
    rest = []
    while (line := proc.lines.get(timeout=30)) is not None:  # type: ignore[attr-defined]
        rest.append(line)
    return "".join(rest)


@pytest.mark.parametrize("policy", ["learned", "search"])
def test_the_daemon_serves_without_torch(tmp_path, site_model_dir, policy) -> None:
    model = ["--model", str(site_model_dir)] if policy == "search" else []
    proc = _serve(tmp_path, "--policy", policy, *model)
    sock = tmp_path / "advisor.sock"
    try:
        _serving(proc)
        status = call(sock, "status")
        assert status["policy"] == policy and status.get("model_problem") is None  # not slurm-default's fallback
        reply = call(sock, "advise", job=JOB)
        assert reply["ok"] and reply["action"] in ("place", "observe")
        admin = _python(CLI, "status", "--db", str(tmp_path / "advisor.db"), "--socket", str(sock), "--json")
        assert admin.returncode == 0, admin.stderr
        assert json.loads(admin.stdout)["daemon"]["policy"] == policy
        explained = _python(CLI, "explain", reply["decision"], "--db", str(tmp_path / "advisor.db"), "--json",
                            "--cluster", str(REPO / "slurm_advisor" / "data" / "default_cluster.toml"))
        assert explained.returncode == 0, explained.stderr  # the judge: the packaged model's speed model, numpy
        assert json.loads(explained.stdout)["decision"] == reply["decision"]
    finally:
        err = _stopped(proc)
    assert proc.returncode == 0 and "stopped" in err, err


# a job's light install (README): the package and click, none of the serving dependencies
LIGHT = NO_TORCH + """for name in ("numpy", "sqlalchemy", "alembic", "matplotlib", "tqdm", "prometheus_client"):
    sys.modules[name] = None
sys.argv[0] = 'slurm-advisor'
from slurm_advisor.cli.main import main
main()
"""


def test_layout_and_report_run_on_a_light_install(tmp_path) -> None:
    layout = _python(LIGHT, "layout", SLURM_ADVISOR_LAYOUT="ps=n1;worker=n1,n3,n3", SLURM_JOB_NODELIST="n[1,3]",
                     SLURM_TASKS_PER_NODE="3,1")
    assert layout.returncode == 0, layout.stderr
    assert "export SLURM_ADVISOR_WORKER_HOSTS=n1,n3,n3" in layout.stdout
    report = _python(LIGHT, "report", "--iterations", "100", "--seconds", "2", "--verbose",
                     SLURM_JOB_ID="42", SLURM_ADVISOR_SOCKET=str(tmp_path / "none.sock"))
    assert (report.returncode, report.stdout) == (0, "") and "not reported" in report.stderr
    helped = _python(LIGHT, "--help")
    assert helped.returncode == 0 and "layout" in helped.stdout and "Not in this install" in helped.stdout
    serve = _python(LIGHT, "serve", "--source", "simulated")
    assert serve.returncode == 2 and "`slurm-advisor serve` needs numpy, which this install lacks" in serve.stderr


@pytest.mark.slow  # every learned golden schedule again, in a process of its own
def test_the_golden_schedules_of_the_learned_policy_without_torch() -> None:
    """The schedules pinned when torch served the model, made again with numpy alone."""
    code = NO_TORCH + f"""
import json
sys.path.insert(0, {str(REPO / "tests" / "sim")!r})
import test_golden_schedules as golden
pinned = json.loads(golden.GOLDEN.read_text())
for case in golden.CASES:
    got = golden.schedule(case, "learned")
    want = pinned[case]["learned"]
    assert got["records"] == want["records"] and got["holds"] == want["holds"], case
print("same", len(golden.CASES))
"""
    done = _python(code)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["same", "4"]


def test_a_model_without_weights_npz_names_the_export_command(tmp_path) -> None:
    model = Path(shutil.copytree(DEFAULT_MODEL_DIR, tmp_path / "model"))
    (model / "weights.npz").unlink()
    done = _python(NO_TORCH + "from slurm_advisor.models import served\nserved.load(sys.argv[1])", str(model))
    assert done.returncode == 1
    assert f"export it once where torch is installed: `slurm-advisor models export {model}`" in done.stderr
    export = _python(CLI, "models", "export", str(model))
    assert export.returncode == 2 and "pip install 'slurm-advisor[train]'" in export.stderr


def test_a_training_command_without_torch_says_how_to_install_it(tmp_path) -> None:
    done = _python(CLI, "demo", "--out", str(tmp_path / "demo"), "--episodes", "1")
    assert done.returncode == 2 and not (tmp_path / "demo").exists()
    assert "`slurm-advisor demo` needs torch, which this install lacks" in done.stderr
    assert "--index-url https://download.pytorch.org/whl/cpu" in done.stderr
