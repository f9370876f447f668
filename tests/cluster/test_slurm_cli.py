"""SlurmCliSource against fake sinfo/squeue/scontrol on PATH that print the recorded fixtures."""
from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from slurm_advisor.cluster.base import SourceError
from slurm_advisor.cluster.slurm_cli import SlurmCliSource
from slurm_advisor.cluster.squeue_lines import RUNNING
from slurm_advisor.domain import Resources

FIXTURES = Path(__file__).resolve().parent / "fixtures"
SQUEUE = " ".join(RUNNING)  # as the fake logs it


@pytest.fixture
def fake_slurm(tmp_path, monkeypatch):
    """write(command, body): a fake `command` (sh) on a PATH that holds nothing else of Slurm's;
    every call is logged with its arguments and SLURM_CONF to ``tmp_path/calls``."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "calls"
    for tool in ("cat", "sleep"):  # all the fakes need; Slurm's real commands stay out of reach
        (bin_dir / tool).symlink_to(f"/bin/{tool}")
    monkeypatch.setenv("PATH", str(bin_dir))

    def write(command: str, body: str) -> None:
        path = bin_dir / command
        path.write_text(f'#!/bin/sh\necho "{command} $* SLURM_CONF=$SLURM_CONF" >> {log}\n{body}\n')
        path.chmod(path.stat().st_mode | stat.S_IXUSR)

    write.calls = lambda: log.read_text().splitlines() if log.exists() else []
    return write


def scontrol(nodes: str | None, topology: str) -> str:
    """A fake scontrol: `--json show nodes` prints ``nodes``, `show topology` runs ``topology``."""
    json_case = f'  "--json show nodes") cat {FIXTURES / nodes} ;;\n' if nodes else ""
    return f'case "$*" in\n{json_case}  "show topology") {topology} ;;\n  *) exit 9 ;;\nesac'


def test_slurm_2205_commands_and_conf(fake_slurm):
    fake_slurm("sinfo", f"cat {FIXTURES / 'sinfo-22.05.json'}")
    fake_slurm("squeue", f"cat {FIXTURES / 'squeue-running-22.05.txt'}")
    fake_slurm("scontrol", scontrol(None, f"cat {FIXTURES / 'topology-tree.txt'}"))
    snap = SlurmCliSource(slurm_conf="/etc/x/slurm.conf").snapshot()
    assert [n.name for n in snap.nodes] == ["n1", "n2", "n3", "n4"]
    assert [n.switch for n in snap.nodes] == ["s1", "s1", "s2", "s2"]
    assert snap.free["n1"] == Resources(4, 2, 28000) and snap.free["n4"] == Resources()
    assert [rj.job.id for rj in snap.running] == ["1"]
    assert fake_slurm.calls() == [f"{c} SLURM_CONF=/etc/x/slurm.conf" for c in
                                  ("sinfo --json", SQUEUE, "scontrol show topology")]


def test_slurm_2302_reads_scontrol_nodes_once_sinfo_answers_in_groups(fake_slurm):
    fake_slurm("sinfo", f"cat {FIXTURES / 'sinfo-23.02.json'}")
    fake_slurm("squeue", f"cat {FIXTURES / 'squeue-running-23.02.txt'}")
    fake_slurm("scontrol", scontrol("scontrol-nodes-23.02.json",
                                    'echo "scontrol: error: No topology information available" >&2; exit 1'))
    source = SlurmCliSource()
    first, second = source.snapshot(), source.snapshot()
    assert first == second.at(first.time)
    assert [n.switch for n in first.nodes] == [None] * 5
    assert [rj.job.id for rj in first.running] == ["101"]
    calls = [c.split(" SLURM_CONF")[0] for c in fake_slurm.calls()]
    assert calls == ["sinfo --json", "scontrol --json show nodes", SQUEUE, "scontrol show topology",
                     "scontrol --json show nodes", SQUEUE, "scontrol show topology"]


def test_no_topology_on_stderr_with_status_0(fake_slurm):
    fake_slurm("sinfo", f"cat {FIXTURES / 'sinfo-22.05.json'}")
    fake_slurm("squeue", f"cat {FIXTURES / 'squeue-running-22.05.txt'}")
    fake_slurm("scontrol", scontrol(None, 'echo "scontrol: error: No topology information available" >&2'))
    assert {n.switch for n in SlurmCliSource().snapshot().nodes} == {None}


@pytest.mark.parametrize(("sinfo", "squeue", "message"), [
    ('echo "sinfo: error: slurm_load_node: Unable to contact slurm controller" >&2; exit 1', None,
     "sinfo --json: exit 1: sinfo: error: slurm_load_node: Unable to contact"),
    ("echo '{\"nodes\": [' ", None, "sinfo --json: not JSON"),
    ("exec sleep 5", None, r"sinfo --json: no answer in 0.3 s"),
    (f"cat {FIXTURES / 'sinfo-22.05.json'}", "echo 'x|slurm-advisor: type=a ps=0 workers=1'",
     "squeue: expected 11 fields, got 2"),
    (f"cat {FIXTURES / 'sinfo-22.05.json'}", "echo 'oops' >&2; exit 1", "squeue --noheader: exit 1: oops"),
    (f"cat {FIXTURES / 'sinfo-22.05.json'}", None, "squeue: not found"),
])
def test_failures_are_one_line_source_errors(fake_slurm, sinfo, squeue, message):
    fake_slurm("sinfo", sinfo)
    if squeue is not None:
        fake_slurm("squeue", squeue)
    fake_slurm("scontrol", scontrol(None, "true"))
    with pytest.raises(SourceError, match=message) as caught:
        SlurmCliSource(timeout_s=0.3).snapshot()
    assert "\n" not in str(caught.value)


def test_topology_failure_other_than_none_is_an_error(fake_slurm):
    fake_slurm("sinfo", f"cat {FIXTURES / 'sinfo-22.05.json'}")
    fake_slurm("squeue", f"cat {FIXTURES / 'squeue-running-22.05.txt'}")
    fake_slurm("scontrol", scontrol(None, 'echo "Zero Bytes were transmitted" >&2; exit 1'))
    with pytest.raises(SourceError, match="scontrol show topology: exit 1: Zero Bytes"):
        SlurmCliSource().snapshot()


def test_environment_slurm_conf_is_kept_without_the_option(fake_slurm, monkeypatch):
    monkeypatch.setenv("SLURM_CONF", "/from/env.conf")
    assert SlurmCliSource().env["SLURM_CONF"] == "/from/env.conf"
    assert os.environ["SLURM_CONF"] == "/from/env.conf"
    with pytest.raises(SourceError, match="timeout_s"):
        SlurmCliSource(timeout_s=0)
