"""`slurm-advisor demo`, the README's first command, end to end on the smallest budget."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from slurm_advisor.cli import main
from slurm_advisor.experiments.demo import BASELINES

if "demo" not in main.cli.commands:
    main._register()


@pytest.mark.slow
def test_demo_trains_compares_and_writes_results(tmp_path: Path) -> None:
    out = tmp_path / "demo-out"
    result = CliRunner().invoke(main.cli, ["demo", "--out", str(out), "--episodes", "1", "--jobs", "40"])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    head = next(i for i, line in enumerate(lines) if line.split()[:4] == ["policy", "avg", "JCT", "h"])
    rows = [line.split()[0] for line in lines[head + 2: head + 2 + len(BASELINES) + 1]]
    assert rows == [*BASELINES, "learned"]
    assert "speed model: mean absolute percentage error" in result.stdout
    assert re.search(r"learned deploys: (network|slurm-default|pack|spread|tetris)( \(patience 0\.\d+\))? ",
                     result.stdout)

    assert (out / "jct_cdf.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    data = json.loads((out / "results.json").read_text())
    assert list(data["policies"]) == [*BASELINES, "learned"]
    assert all(s["jobs"] == 40 - s["skipped"] for s in data["policies"].values())
    assert data["cluster"] == {"nodes": 8, "gpus": 64}
    assert set(data["deployed"]) == {"learned"}
    assert data["hyper"]["rl_episodes"] == 1
    # A fraction, not a percentage: 0.45 on this tiny budget (40 jobs); 0.75 still rules out a speed
    # model that learned nothing (the bound was 10, i.e. 1000 %, which no model could fail).
    assert 0 < data["speed_mape_unseen"] < 0.75
    assert {p.name for p in (out / "model" / "learned").iterdir()} == {"meta.json", "policy.pt", "speed.pt",
                                                                         "weights.npz", "lif_profile.json"}


def test_demo_rejects_a_zero_budget(tmp_path: Path) -> None:
    result = CliRunner().invoke(main.cli, ["demo", "--out", str(tmp_path), "--episodes", "0"])
    assert result.exit_code == 2 and "--episodes" in result.output


def test_default_cluster_is_shipped_with_the_package() -> None:
    from slurm_advisor.sim.clusterfile import default_cluster

    nodes = default_cluster()
    assert len(nodes) == 8 and {(n.cpus, n.gpus, n.mem_mb) for n in nodes} == {(48, 8, 384_000)}
    assert len({n.switch for n in nodes}) == 2


def test_the_quickstarts_help_is_its_own_and_runs_nothing() -> None:
    """`bash examples/quickstart.sh --help` once printed the demo's help, then ran the whole loop."""
    import subprocess

    script = Path(__file__).resolve().parents[2] / "examples" / "quickstart.sh"
    done = subprocess.run(["bash", str(script), "--help"], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("The first thing to run") and "== the learning loop" not in done.stdout
