"""The daemon's replies for jobs submitted with -m arbitrary (``daemon/service.py``): the policy's
exact layout as ``task_nodes`` where the release allocates it, else the job left to Slurm."""
import pytest
from daemon_helpers import NODES, Fixed, Holding, marked

from slurm_advisor.advisor import Advisor
from slurm_advisor.daemon.service import ARBITRARY_TOPOLOGY, AdviceService
from slurm_advisor.domain import ClusterSnapshot, Node
from slurm_advisor.slurm.expressible import express
from slurm_advisor.slurm.release import Release

MODERN = Release(24, 11, 5)
EMPTY = ClusterSnapshot.empty(NODES)
# sbatch -m arbitrary -n 4 -w n1,n1,n1,n1 --comment "... nodes=any": the user's fallback layout
ARBITRARY = marked(ps=1, workers=3, gpus=0, req_nodes="n[1,1,1,1]", min_nodes=1, max_nodes=1, arbitrary=True,
                   comment="slurm-advisor: type=resnet50 ps=1 workers=3 nodes=any")


def service(policy, release=MODERN, **kw) -> AdviceService:
    return AdviceService(Advisor(policy), express, release=release, **kw)


def test_the_policys_layout_is_pinned_task_by_task() -> None:
    reply, decision, _, placement = service(Fixed("n3", "n1", "n3", "n3")).advise(EMPTY, ARBITRARY, "advise")
    assert reply["action"] == "place" and reply["task_nodes"] == "n3,n1,n3,n3"
    assert (reply["nodes"], reply["min_nodes"], reply["max_nodes"], reply["num_tasks"]) == ("n[1,3]", 2, 2, 4)
    assert reply["layout"] == "ps=n3;worker=n1,n3,n3"  # what `slurm-advisor layout` gives the job
    assert decision.layout == (("ps", "n3"), ("worker", "n1"), ("worker", "n3"), ("worker", "n3"))
    assert placement is not None and [(t.role.value, t.node) for t in placement.tasks] == list(decision.layout)


def test_without_arbitrary_the_same_layout_gets_slurms_counts() -> None:
    plain = {k: v for k, v in ARBITRARY.items() if k not in ("arbitrary", "req_nodes", "min_nodes", "max_nodes")}
    reply = service(Fixed("n3", "n1", "n3", "n3")).advise(EMPTY, plain, "advise")[0]
    assert reply["action"] == "place" and "task_nodes" not in reply
    assert reply["layout"] == "ps=n3;worker=n1,n1,n1"  # 3 on n1 (index order), 1 on n3: the PS stays


def test_slurms_own_choice_is_still_pinned_for_an_arbitrary_job() -> None:
    # all four on n1 is where cons_tres puts the job unpinned, but its -w list decides here
    reply = service(Fixed("n2", "n2", "n2", "n2")).advise(EMPTY, ARBITRARY, "advise")[0]
    assert reply["action"] == "place" and reply["task_nodes"] == "n2,n2,n2,n2"


@pytest.mark.parametrize("release", [Release(22, 5, 8), None])
def test_a_release_without_arbitrary_layouts_leaves_the_job_to_slurm(release) -> None:
    reply = service(Fixed("n3", "n1", "n3", "n3"), release=release).advise(EMPTY, ARBITRARY, "advise")[0]
    assert reply["action"] == "observe" and "exact layouts from 23.11" in reply["reason"]
    assert "22.05" in reply["reason"]


def test_under_a_topology_plugin_the_job_is_left_to_slurm() -> None:
    switched = tuple(Node(n.name, 8, 4, 32000, switch="s1") for n in NODES)
    reply = service(Fixed("n3", "n1", "n3", "n3"), has_switches=True).advise(
        ClusterSnapshot.empty(switched), ARBITRARY, "advise")[0]
    assert reply["action"] == "observe" and ARBITRARY_TOPOLOGY in reply["reason"]
    assert service(Fixed("n3", "n1", "n3", "n3"), pins=False).advise(EMPTY, ARBITRARY, "advise")[0]["action"] == "observe"


def test_without_nodes_any_the_list_is_required() -> None:
    kept = {**ARBITRARY, "comment": "slurm-advisor: type=resnet50 ps=1 workers=3"}
    reply = service(Fixed("n3", "n1", "n3", "n3")).advise(EMPTY, kept, "advise")[0]
    assert reply["action"] == "observe" and "2 nodes, outside the requested 1-1" in reply["reason"]
    reply = service(Fixed("n1", "n1", "n1", "n1")).advise(EMPTY, {**kept, "req_nodes": "n[1,1,1,1]"}, "advise")[0]
    assert reply["action"] == "place" and reply["task_nodes"] == "n1,n1,n1,n1"


def test_an_arbitrary_job_is_never_capped() -> None:
    reply = service(Holding()).advise(EMPTY, ARBITRARY, "enforce")[0]
    assert reply["action"] == "observe" and "max_nodes" not in reply
