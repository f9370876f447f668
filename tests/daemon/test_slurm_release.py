"""The Slurm release and topology the daemon read at start: the model of Slurm follows the
release, and ``status`` (JSON and text) shows both."""
from __future__ import annotations

from functools import partial

from daemon_helpers import NODES, StaticSource, make_daemon

from slurm_advisor.cli.admin import _slurm_line
from slurm_advisor.cluster.slurm_json import describe_topology, read_blocks
from slurm_advisor.daemon.build import _release
from slurm_advisor.daemon.queue import NoQueue, QueueError, SlurmQueue
from slurm_advisor.domain import ClusterSnapshot, Job, Placement, Resources
from slurm_advisor.slurm.expressible import express
from slurm_advisor.slurm.release import Release


class VersionQueue(SlurmQueue):
    """A Slurm queue whose ``sinfo --version`` answers ``answer`` (or raises it)."""

    def __init__(self, answer: str | Exception):
        super().__init__()
        self.answer = answer

    def _run(self, args: list[str]) -> str:
        assert args == ["sinfo", "--version"]
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


def test_the_release_is_read_from_sinfo_version() -> None:
    assert _release(VersionQueue("slurm-wlm 24.11.5\n")) == Release(24, 11, 5)
    assert _release(VersionQueue("slurm 22.05.8\n")) == Release(22, 5, 8)


def test_without_an_answer_the_default_release_is_modelled() -> None:
    assert _release(VersionQueue(QueueError("sinfo: exit 1"))) is None
    assert _release(VersionQueue("sinfo: unrecognized option\n")) is None
    assert _release(NoQueue()) is None


def test_the_express_step_follows_the_release() -> None:
    # -n 8 -c 2 --gpus-per-task=1 pinned to the four testbed nodes: 3,3,1,1 on 22.05, 4,2,1,1 on 24.11
    demand = Resources(2, 1, 2000)
    job = Job("j", "resnet50", 0, 8, demand, demand, 100.0)
    snap = ClusterSnapshot.empty(NODES)
    placement = Placement.of(job, [n.name for n in NODES for _ in range(2)])

    def per_node(p: Placement) -> list[int]:
        return [sum(t.node == n.name for t in p.tasks) for n in NODES]

    assert per_node(express(snap, job, placement)) == [3, 3, 1, 1]
    assert per_node(partial(express, release=Release(24, 11, 5))(snap, job, placement)) == [4, 2, 1, 1]


class BlockSource(StaticSource):
    """A source whose topology reading found the testbeds' two blocks (as SlurmCliSource reads them)."""

    def __init__(self, snapshot: ClusterSnapshot):
        super().__init__(snapshot)
        self.blocks = read_blocks("BlockName=b1 BlockIndex=0 Nodes=n[1-2] BlockSize=2\n"
                                  "BlockName=b2 BlockIndex=1 Nodes=n[3-4] BlockSize=2\n"
                                  "AggregatedBlock=b[1-2] BlockIndex=2 Nodes=n[1-4] BlockSize=4\n")
        self.topology = describe_topology({}, self.blocks)


def test_status_shows_the_release_and_the_topology(tmp_path) -> None:
    source = BlockSource(ClusterSnapshot.empty(NODES))
    daemon = make_daemon(tmp_path, store=False, source=source)
    assert daemon.status()["slurm_release"] is None and daemon.status()["topology"]["plugin"] == "block"
    daemon.service.release, daemon.service.blocks = Release(24, 11, 5), source.blocks
    status = daemon.status()
    assert status["slurm_release"] == "24.11.5"
    assert status["topology"]["blocks"] == [{"name": "b1", "nodes": "n[1-2]"}, {"name": "b2", "nodes": "n[3-4]"}]
    assert status["topology"]["placement"] == "pins within blocks, caps across them"
    assert _slurm_line(status) == \
        "slurm: 24.11.5, topology block (pins within blocks, caps across them): b1 n[1-2], b2 n[3-4]"
    daemon.service.release = Release(26, 5, 5)
    assert daemon.status()["topology"]["placement"] == "pins within blocks, segments across them"
    tree = {"topology": {"plugin": "tree", "nodes": 4, "switches": [{"name": "s1", "nodes": "n[1-2]"},
                                                                    {"name": "s2", "nodes": "n[3-4]"}]}}
    assert _slurm_line(tree) == "slurm: release not read (22.05 modelled), topology tree: s1 n[1-2], s2 n[3-4]"
