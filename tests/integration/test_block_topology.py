"""topology/block on a real slurmctld: the advisor reads the blocks from the source the release
uses, never advises a pin Slurm refuses there, and says what it read in ``status``.

A second testbed with two base blocks (b1 = n[1-2], b2 = n[3-4], BlockSizes 2,4) is started
beside the one the other Slurm tests use (.ci/slurm-testbed.sh with SLURM_ADVISOR_TESTBED_TOPOLOGY:
topology.conf on 24.11, topology.yaml on 26.05, whose ``scontrol show config`` then says
topology/flat), on the testbed's ports + 50, with the job submit hook. Random marked jobs
(``differential.py``'s generator, the request-honouring check) go through the hook to a daemon in
enforce mode serving ``spread``, whose placements cross blocks: Slurm must accept every advised
job it accepts alone, and the advisor must have pinned within blocks, pinned in segments (26.05)
and capped (24.11) on the way. Needs Slurm 23.11+ (skipped on the host's 22.05). About 3 s a
case: :data:`CASES` random cases keep the module near a minute per release.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from differential import Differential, generate, session
from differential_check import TESTBED
from slurmctl import Slurm, run

from slurm_advisor.slurm.release import Release

pytestmark = pytest.mark.slurm

REPO = Path(__file__).resolve().parents[2]
SEED = 41
CASES = 20
BLOCK_TOPOLOGY_FROM = Release(23, 11)
YAML_FROM = Release(25, 5)
BLOCKS = [{"name": "b1", "nodes": "n[1-2]"}, {"name": "b2", "nodes": "n[3-4]"}]
#: the random cases run in this session (the last test reads their decisions)
RAN: list[str] = []


def _testbed_env(root: Path, kind: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("SLURM_ADVISOR_TESTBED_SOCKET", "SLURM_CONF")}
    return {**env, "SLURM_ADVISOR_TESTBED_DIR": str(root), "SLURM_ADVISOR_TESTBED_TOPOLOGY": kind,
            "SLURM_ADVISOR_TESTBED_PORT": str(int(os.environ.get("SLURM_ADVISOR_TESTBED_PORT", "16817")) + 50),
            "SLURM_ADVISOR_TESTBED_NODE_PORT": str(int(os.environ.get("SLURM_ADVISOR_TESTBED_NODE_PORT", "17001")) + 50),
            "SLURM_ADVISOR_TESTBED_HOOK": "hooks/job_submit.lua"}


@pytest.fixture(scope="module")
def block_testbed(slurm_reachable: None) -> Iterator[tuple[Path, Release, str]]:
    """(its directory, the release, block or block-yaml); SLURM_CONF names it meanwhile."""
    release = Slurm().release()
    if release < BLOCK_TOPOLOGY_FROM:
        pytest.skip(f"topology/block needs Slurm 23.11+; this testbed runs {release}")
    kind = "block-yaml" if release >= YAML_FROM else "block"
    root = Path(os.environ.get("SLURM_ADVISOR_TESTBED_DIR", "/tmp/slurm-advisor-testbed") + "-block")
    env = _testbed_env(root, kind)
    started = subprocess.run(["bash", ".ci/slurm-testbed.sh", "start"], cwd=REPO, env=env, capture_output=True,
                             text=True, timeout=120, check=False)
    old = os.environ.get("SLURM_CONF")
    try:
        if started.returncode != 0:
            pytest.fail(f"the block testbed did not start: {started.stderr[-2000:]}")
        os.environ["SLURM_CONF"] = str(root / "etc" / "slurm.conf")
        yield root, release, kind
    finally:
        if old is None:
            os.environ.pop("SLURM_CONF", None)
        else:
            os.environ["SLURM_CONF"] = old
        subprocess.run(["bash", ".ci/slurm-testbed.sh", "stop"], cwd=REPO, env=env, capture_output=True,
                       timeout=120, check=False)


@pytest.fixture(scope="module")
def differential(block_testbed, tmp_path_factory) -> Iterator[Differential]:
    root = block_testbed[0]
    with session(Slurm(), root, root / "advisor.sock", tmp_path_factory.mktemp("blocks")) as diff:
        yield diff


def test_the_testbed_has_blocks_from_the_releases_source(block_testbed) -> None:
    root, _, kind = block_testbed
    plugin = [line for line in run(["scontrol", "show", "config"]).splitlines() if line.startswith("TopologyPlugin")]
    assert (root / "etc" / ("topology.yaml" if kind == "block-yaml" else "topology.conf")).exists()
    # 26.05 reads topology.yaml and still says topology/flat: the daemon must not go by the config
    assert ("topology/block" in plugin[0]) == (kind == "block")
    assert "BlockName=b1" in run(["scontrol", "show", "topology"])


def test_status_shows_the_release_and_the_blocks_it_read(block_testbed, differential: Differential) -> None:
    _, release, _ = block_testbed
    status = differential.daemon.status()
    assert status["slurm_release"] == str(release)
    topology = status["topology"]
    assert topology["plugin"] == "block" and topology["blocks"] == BLOCKS and topology["block_sizes"] == [2, 4]
    assert topology["placement"] == ("pins within blocks, segments across them"
                                     if release.hook_sets_segment_size else "pins within blocks, caps across them")
    shown = subprocess.run([sys.executable, "-m", "slurm_advisor.cli", "status", "--socket",
                            str(differential.daemon.socket), "--db", str(differential.daemon.db)],
                           capture_output=True, text=True, timeout=60, check=True).stdout
    assert f"slurm: {release}, topology block ({topology['placement']}): b1 n[1-2], b2 n[3-4]" in shown
    as_json = subprocess.run([sys.executable, "-m", "slurm_advisor.cli", "status", "--json", "--socket",
                              str(differential.daemon.socket), "--db", str(differential.daemon.db)],
                             capture_output=True, text=True, timeout=60, check=True).stdout
    assert json.loads(as_json)["daemon"]["topology"]["blocks"] == BLOCKS


@pytest.mark.parametrize("case", generate(TESTBED, SEED, CASES), ids=lambda c: c.name)
def test_slurm_accepts_every_advised_job_under_block_topology(case, differential: Differential,
                                                              slurm: Slurm) -> None:
    result = differential.run(case)
    RAN.append(case.name)
    if result.failures(differential.cluster):
        pytest.fail(result.report(differential.cluster), pytrace=False)


def test_the_cases_went_through_each_block_path(block_testbed, differential: Differential) -> None:
    """Pins within blocks, and pins across blocks in segments (26.05) or caps (24.11) among the
    decisions the cases above left: else the rule was not tested."""
    _, release, _ = block_testbed
    if len(RAN) < CASES:
        pytest.skip("needs the cases above in the same run")
    differential.daemon.stop()  # every decision written
    decisions = differential.daemon.decisions().values()
    seen = Counter("segments" if d["action"] == "place" and "segments" in d["reason"] else
                   "across" if d["action"] == "cap" and "span blocks" in d["reason"] else d["action"]
                   for d in decisions)
    assert seen["place"] > 0, seen
    assert seen["segments" if release.hook_sets_segment_size else "across"] > 0, seen
    assert seen["across" if release.hook_sets_segment_size else "segments"] == 0, seen
