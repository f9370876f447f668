"""The example jobs (examples/jobs) on the real testbed: each task runs where the advised layout put it.

Both jobs are submitted as the advisor's hook would leave them: the layout's nodes requested
(``--nodelist``, ``--nodes``), ``--ntasks``, and SLURM_ADVISOR_LAYOUT / SLURM_ADVISOR_DECISION in the
environment that sbatch exports. The layouts are ones Slurm would not choose by itself (the PS, rank
0, on the second node; ranks interleaved over the nodes), so a task on its advised node shows that
the hostfile from ``slurm-advisor layout`` reached srun. The testbed's node names do not resolve:
the jobs' rendezvous falls back to 127.0.0.1 for ps_worker and is told so for allreduce.
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from slurmctl import ACTIVE, Slurm, run

JOBS = Path(__file__).resolve().parents[2] / "examples" / "jobs"
CASES = {  # script -> (advised layout, the node of each rank)
    "ps_worker.sbatch": ("ps=n3;worker=n1,n1,n3", ["n3", "n1", "n1", "n3"]),
    "allreduce.sbatch": ("worker=n4,n2,n2,n4", ["n4", "n2", "n2", "n4"]),
}
_TASK = re.compile(r"^role=(\w+) index=(\d+) rank=(\d+) node=(\S+) advised=(\S+) iterations/s=([\d.]+)",
                   re.MULTILINE)


def _submit(slurm: Slurm, monkeypatch: pytest.MonkeyPatch, script: str, layout: str, out: Path) -> str:
    nodes = sorted(set(re.split(r"[;,]", re.sub(r"\b(ps|worker)=", "", layout))))
    monkeypatch.setenv("SLURM_ADVISOR_LAYOUT", layout)
    monkeypatch.setenv("SLURM_ADVISOR_DECISION", f"d-test-{script.split('.')[0]}")
    job_id = run(["sbatch", "--parsable", f"--output={out}", f"--nodelist={','.join(nodes)}",
                  f"--nodes={len(nodes)}", "--ntasks=4", script]).strip().split(";")[0]
    slurm.submitted.append(job_id)  # the fixture cancels it whatever happens
    return job_id


@pytest.mark.slurm
def test_example_jobs_run_each_role_on_its_advised_node(slurm: Slurm, monkeypatch: pytest.MonkeyPatch,
                                                        tmp_path: Path) -> None:
    monkeypatch.chdir(JOBS)  # the scripts find their .py beside them through SLURM_SUBMIT_DIR
    monkeypatch.setenv("SLURM_ADVISOR_PYTHON", sys.executable)
    monkeypatch.setenv("SLURM_ADVISOR_ADDR_n4", "127.0.0.1")
    submitted = {script: _submit(slurm, monkeypatch, script, layout, tmp_path / f"{script}.out")
                 for script, (layout, _) in CASES.items()}
    for script, job_id in submitted.items():
        view = slurm.wait(job_id, lambda v: v.state not in ACTIVE, timeout_s=120, what="its end")
        output = (tmp_path / f"{script}.out").read_text()
        assert view.state == "COMPLETED", f"{script}: {view.state}\n{output}"
        assert "layout from advisor: " in output, output
        tasks = {int(rank): (role, node, advised, float(rate))
                 for role, _, rank, node, advised, rate in _TASK.findall(output)}
        expected = CASES[script][1]
        assert sorted(tasks) == list(range(len(expected))), output
        for rank, (role, node, advised, rate) in tasks.items():
            assert role == ("ps" if script.startswith("ps") and rank == 0 else "worker"), output
            assert node == advised == expected[rank], f"{script} rank {rank}: {output}"
            assert rate > 0, output
