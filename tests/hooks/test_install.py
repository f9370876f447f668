"""hooks/install.sh: the module and the standalone script into a fresh directory, an upgrade of
its own script, and a site's own job_submit.lua never replaced or edited without a backup; the
chained site script then runs the site's code first and the advisor after it, under the driver."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from fake_advisor import PLACE
from lua_driver import MODULE, REPO, lua_socket_missing

INSTALL = REPO / "hooks" / "install.sh"
STANDALONE = REPO / "hooks" / "job_submit.lua"
MARKED = {"comment": "slurm-advisor: type=resnet50 ps=1 workers=3", "name": "train", "user_id": 1000,
          "num_tasks": 4, "cpus_per_task": 1, "environment": {"HOME": "/home/u"}}

# A site's script as sites write them: routing in slurm_job_submit, a final `return`.
SITE = """-- site policy: jobs without a partition go to gpu; the user 666 is refused
function slurm_job_submit(job_desc, part_list, submit_uid)
    if job_desc.user_id == 666 then return slurm.ERROR end
    if job_desc.partition == nil then job_desc.partition = "gpu" end
    return slurm.SUCCESS
end

function slurm_job_modify(job_desc, job_rec, part_list, modify_uid)
    return slurm.SUCCESS
end

return slurm.SUCCESS
"""

pytestmark = pytest.mark.skipif(bool(lua_socket_missing()), reason=lua_socket_missing() or "")


def install(*args: str | Path, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run(["bash", str(INSTALL), *map(str, args)], check=False, capture_output=True, text=True,
                          timeout=60)
    if check:
        assert proc.returncode == 0, proc.stderr
    return proc


def files(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())}


def site_dir(tmp_path: Path, script: str = SITE) -> Path:
    etc = tmp_path / "etc"
    etc.mkdir()
    (etc / "job_submit.lua").write_text(script)
    return etc


def test_a_fresh_directory_gets_the_module_and_the_standalone_script(tmp_path, run_hook, daemon):
    etc = tmp_path / "etc"
    etc.mkdir()
    install(etc)
    assert files(etc) == {"job_submit.lua": STANDALONE.read_bytes(), "slurm_advisor.lua": MODULE.read_bytes()}
    daemon.reply_with(PLACE)
    result = run_hook(MARKED, "submit", etc / "job_submit.lua")
    assert dict(result["writes"])["req_nodes"] == "n1,n3" and daemon.connections == 1


def test_its_own_script_is_upgraded_in_place_without_a_backup(tmp_path):
    # the single-file hook of earlier releases counts as the advisor's own
    etc = site_dir(tmp_path, "--[[\nslurm-advisor's job_submit.lua (Slurm's job_submit/lua plugin; Lua 5.1)\n]]\n")
    install(etc)
    assert files(etc) == {"job_submit.lua": STANDALONE.read_bytes(), "slurm_advisor.lua": MODULE.read_bytes()}


def test_a_sites_own_script_is_refused_and_nothing_is_written(tmp_path):
    etc = site_dir(tmp_path)
    before = files(etc)
    proc = install(etc, check=False)
    assert proc.returncode == 1 and proc.stdout == ""
    assert "is the site's own; nothing installed" in proc.stderr
    assert f'dofile("{etc}/slurm_advisor.lua").chain()' in proc.stderr  # the line to add
    assert files(etc) == before


def test_chain_keeps_a_backup_and_runs_the_site_first_then_the_advisor(tmp_path, run_hook, daemon):
    etc = site_dir(tmp_path)
    proc = install("--chain", etc)
    backups = sorted(etc.glob("job_submit.lua.bak.*"))
    assert len(backups) == 1 and backups[0].read_text() == SITE and "kept the site's script" in proc.stdout
    script = (etc / "job_submit.lua").read_text()
    assert script.startswith(SITE.removesuffix("return slurm.SUCCESS\n"))
    assert script.endswith("tostring(err)) end\nreturn slurm.SUCCESS\n")  # the line went before the return
    daemon.reply_with(PLACE)
    result = run_hook(MARKED, "submit", etc / "job_submit.lua")
    written = dict(result["writes"])
    assert result["rc"] == 0 and written["partition"] == "gpu" and written["req_nodes"] == "n1,n3"
    assert [name for name, _ in result["writes"]].index("partition") == 0  # the site's write came first
    assert b'"partition":"gpu"' in daemon.requests[0]                      # and the advisor saw it


def test_a_job_the_site_refuses_is_never_advised(tmp_path, run_hook, daemon):
    etc = site_dir(tmp_path)
    install("--chain", etc)
    result = run_hook({**MARKED, "user_id": 666}, "submit", etc / "job_submit.lua")
    assert result["rc"] == -1 and result["writes"] == [] and daemon.connections == 0


def test_chain_twice_adds_the_line_once_and_touches_the_script(tmp_path, run_hook, daemon):
    etc = site_dir(tmp_path)
    install("--chain", etc)
    chained = (etc / "job_submit.lua").read_text()
    proc = install("--chain", etc)
    assert "already calls the module" in proc.stdout
    assert (etc / "job_submit.lua").read_text() == chained and chained.count(".chain()") == 1
    assert len(list(etc.glob("job_submit.lua.bak.*"))) == 1
    # the same line pasted twice by hand still asks the daemon once per job
    body, line = chained.removesuffix("return slurm.SUCCESS\n"), chained.splitlines()[-2]
    (etc / "job_submit.lua").write_text(f"{body}{line}\nreturn slurm.SUCCESS\n")
    daemon.reply_with(PLACE)
    run_hook(MARKED, "submit", etc / "job_submit.lua")
    assert daemon.connections == 1


def test_replace_keeps_a_backup(tmp_path):
    etc = site_dir(tmp_path)
    install("--replace", etc)
    assert (etc / "job_submit.lua").read_bytes() == STANDALONE.read_bytes()
    assert [p.read_text() for p in etc.glob("job_submit.lua.bak.*")] == [SITE]


@pytest.mark.parametrize("broken", ["module", "site"])
def test_nothing_is_written_when_a_file_would_not_load(tmp_path, broken):
    source = tmp_path / "src"
    source.mkdir()
    (source / "job_submit.lua").write_bytes(STANDALONE.read_bytes())
    module = MODULE.read_text()
    (source / "slurm_advisor.lua").write_text(module.replace("return advisor\n", "return 42\n") if broken == "module"
                                              else module)
    etc = site_dir(tmp_path, SITE if broken == "module" else SITE.replace("return slurm.SUCCESS\nend", "end end", 1))
    before = files(etc)
    proc = install("--chain", etc, source / "job_submit.lua", check=False)
    assert proc.returncode == 1 and "nothing installed" in proc.stderr
    assert files(etc) == before


def test_the_standalone_script_without_its_module_loads_and_passes_every_job(tmp_path, run_hook, daemon):
    etc = tmp_path / "etc"
    etc.mkdir()
    (etc / "job_submit.lua").write_bytes(STANDALONE.read_bytes())
    result = run_hook(MARKED, "submit", etc / "job_submit.lua")
    assert result["rc"] == 0 and result["writes"] == [] and daemon.connections == 0
    assert any("cannot load" in line and "every job passes unmodified" in line for line in result["logs"])


@pytest.mark.parametrize(("conf", "said"), [
    ("ClusterName=c\n", "add the line JobSubmitPlugins=lua"),
    ("ClusterName=c\njobsubmitplugins = pbs  # routing\n", "add lua to the existing line: JobSubmitPlugins=pbs,lua"),
    ("JobSubmitPlugins=pbs,lua\n", "already includes lua"),
])
def test_slurm_conf_is_read_and_never_edited(tmp_path, conf, said):
    etc = tmp_path / "etc"
    etc.mkdir()
    (etc / "slurm.conf").write_text(conf)
    assert said in install(etc).stdout
    assert (etc / "slurm.conf").read_text() == conf


def test_chain_and_replace_together_are_a_usage_error(tmp_path):
    proc = install("--chain", "--replace", tmp_path, check=False)
    assert proc.returncode == 2 and "usage" in proc.stderr
