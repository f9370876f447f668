"""The Slurm release and topology the daemon read at start: the model of Slurm follows the
release, and ``status`` (JSON and text) shows both."""
from __future__ import annotations

from functools import partial

from daemon_helpers import NODES, StaticSource, make_daemon

from slurm_advisor.cli.admin import _slurm_line
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
    """A source whose last topology reading found two blocks (as SlurmCliSource.topology says)."""

    def __init__(self, snapshot: ClusterSnapshot):
        super().__init__(snapshot)
        self.topology = {"plugin": "block", "blocks": 2, "nodes": 4}


def test_status_shows_the_release_and_the_topology(tmp_path) -> None:
    daemon = make_daemon(tmp_path, store=False, source=BlockSource(ClusterSnapshot.empty(NODES)))
    assert daemon.status()["slurm_release"] is None and daemon.status()["topology"]["plugin"] == "block"
    daemon.service.release = Release(24, 11, 5)
    status = daemon.status()
    assert status["slurm_release"] == "24.11.5"
    assert _slurm_line(status) == "slurm: 24.11.5, topology block: 2 blocks over 4 nodes"
    assert _slurm_line({"topology": {"plugin": "tree", "switches": 2, "nodes": 4}}) == \
        "slurm: release not read (22.05 modelled), topology tree: 2 leaf switches over 4 nodes"
