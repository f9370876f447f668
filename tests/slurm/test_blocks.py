"""topology/block's rule for pins (slurm/blocks.py) against what real slurmctlds answered.

The fixtures are recorded on the testbeds (tests/cluster/fixtures/topology-block-*): each
``.txt`` is ``scontrol show topology`` as the release printed it, each ``.verdicts`` what
``sbatch -N <count> -w <nodes> [--segment=S]`` got for every set of the four nodes (``ok``: accepted;
``REFUSED``: refused at submission), with the hook's kill switch on. Configurations: 2 base
blocks of 2 nodes, BlockSizes 2,4, from topology.conf on 24.11.5 and from topology.yaml on
26.05.5 (topology-block-26.05.yaml); 4 base blocks of 1 node with BlockSizes 1,2,4 and with 1,4
(24.11.5).
"""
from __future__ import annotations

from pathlib import Path

import pytest

from slurm_advisor.slurm.blocks import Blocks
from slurm_advisor.slurm.release import Release

FIXTURES = Path(__file__).parent.parent / "cluster" / "fixtures"
CASES = [  # (topology printed, verdicts)
    ("topology-block-24.11.txt", "topology-block-24.11.verdicts"),
    ("topology-block-yaml-26.05.txt", "topology-block-yaml-26.05.verdicts"),
    ("topology-block-4x1-24.11.txt", "topology-block-4x1-24.11.verdicts"),
    ("topology-block-4x1-sizes-1-4-24.11.txt", "topology-block-4x1-sizes-1-4-24.11.verdicts"),
]


def _verdicts(name: str) -> list[tuple[list[str], int | None, bool]]:
    """(nodes, segment size or None, accepted) per recorded line "n1,n3 [seg=S] ok|REFUSED"."""
    out = []
    for line in (FIXTURES / name).read_text().splitlines():
        words = line.split()
        seg = next((w.partition("=")[2] for w in words if w.startswith("seg=")), "")
        out.append((words[0].split(","), int(seg) if seg else None, words[-1] == "ok"))
    return out


def test_the_recorded_outputs_parse_alike_on_24_11_and_26_05() -> None:
    conf = Blocks.parse((FIXTURES / "topology-block-24.11.txt").read_text())
    yaml = Blocks.parse((FIXTURES / "topology-block-yaml-26.05.txt").read_text())
    assert conf == yaml == Blocks(("b1", "b2"), (("n1", "n2"), ("n3", "n4")), 2, (0, 1))
    small = Blocks.parse((FIXTURES / "topology-block-4x1-24.11.txt").read_text())
    assert small.names == ("c1", "c2", "c3", "c4") and small.base_size == 1 and small.levels == (0, 1, 2)
    assert Blocks.parse((FIXTURES / "topology-block-4x1-sizes-1-4-24.11.txt").read_text()).levels == (0, 2)
    assert Blocks.parse((FIXTURES / "topology-tree.txt").read_text()) is None
    assert Blocks.parse("scontrol: error: No topology information available\n") is None


@pytest.mark.parametrize("printed, verdicts", CASES)
def test_a_pin_is_allowed_exactly_where_slurm_accepted_it(printed: str, verdicts: str) -> None:
    blocks = Blocks.parse((FIXTURES / printed).read_text())
    checked = 0
    for nodes, seg, accepted in _verdicts(verdicts):
        if seg is None:
            assert blocks.allows(nodes) == accepted, f"-w {','.join(nodes)}: Slurm {'accepted' if accepted else 'refused'}"
            checked += 1
    assert checked == 15  # every non-empty set of the four nodes


def test_segments_offered_only_where_26_05_accepted_them() -> None:
    blocks = Blocks.parse((FIXTURES / "topology-block-yaml-26.05.txt").read_text())
    recorded = {(tuple(nodes), seg): ok for nodes, seg, ok in _verdicts("topology-block-yaml-26.05.verdicts")}
    offered = 0
    for nodes, seg in recorded:
        if seg is None and not blocks.allows(nodes):
            size = blocks.segment(nodes)
            assert size is not None, f"-w {','.join(nodes)} refused whole, but 26.05 took it in segments"
            assert recorded[(nodes, size)], f"-w {','.join(nodes)} --segment={size}: 26.05 refused it"
            offered += 1
    assert offered == 4  # n1,n3 n1,n4 n2,n3 n2,n4: each as two 1-node segments
    assert blocks.segment(["n1", "n2", "n3", "n4"]) == 2 and blocks.segment(["n1", "n2", "n3"]) == 1
    assert blocks.segment(["n1"]) is None and blocks.segment(["n1", "n9"]) is None


def test_nodes_outside_every_block_are_never_pinned() -> None:
    blocks = Blocks.parse((FIXTURES / "topology-block-24.11.txt").read_text())
    assert not blocks.allows(["n1", "n9"]) and not blocks.allows([])


@pytest.mark.parametrize("line", [
    "BlockName= BlockIndex=0 Nodes=n1 BlockSize=1",
    "BlockName=b1 BlockIndex=x Nodes=n1 BlockSize=1",
    "BlockName=b1 BlockIndex=0 Nodes=n1",
    "AggregatedBlock=b[1-2] BlockIndex=2 Nodes=n[1-4 BlockSize=4",
])
def test_a_line_that_does_not_read_is_named(line: str) -> None:
    with pytest.raises(ValueError, match="bad block line"):
        Blocks.parse(line)


def test_describe_names_every_block_with_its_nodes() -> None:
    blocks = Blocks.parse((FIXTURES / "topology-block-24.11.txt").read_text())
    assert blocks.describe() == {"plugin": "block", "base_block_nodes": 2, "block_sizes": [2, 4],
                                 "blocks": [{"name": "b1", "nodes": "n[1-2]"}, {"name": "b2", "nodes": "n[3-4]"}]}


def test_only_26_05_hooks_set_segment_size() -> None:
    assert not Release(24, 11, 5).hook_sets_segment_size and Release(26, 5, 5).hook_sets_segment_size
