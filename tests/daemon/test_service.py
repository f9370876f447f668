import pytest
from daemon_helpers import NODES, identity, marked

from slurm_advisor.advisor import Advisor
from slurm_advisor.daemon.protocol import ProtocolError
from slurm_advisor.daemon.service import AdviceService, job_from_request
from slurm_advisor.domain import ClusterSnapshot, Node, Resources
from slurm_advisor.policies.base import Hold
from slurm_advisor.policies.slurm_default import SlurmDefaultPolicy


class Holding:
    name = "holder"

    def place(self, snapshot, job, rng):
        return Hold("waiting for one switch", max_nodes=1)

    def score_nodes(self, snapshot, job):
        return {}


def service(policy=None, **kw):
    return AdviceService(Advisor(policy or SlurmDefaultPolicy()), identity, **kw)


def test_job_from_the_hooks_fields():
    job = job_from_request(marked(ps=1, workers=3, gpus=1, cpus=2, time_limit=90), "d-1")
    assert (job.type, job.num_ps, job.num_workers) == ("resnet50", 1, 3)
    assert job.worker_demand == job.ps_demand == Resources(2, 1, 2000)  # Slurm gives every task the same
    assert job.time_limit_s == 5400.0 and job.user == "1000"


@pytest.mark.parametrize(("fields", "message"), [
    ({"comment": "no marker here"}, "no 'slurm-advisor:' marker"),
    (marked(num_tasks=7), "num_tasks is 7 but the marker says ps=0 workers=2"),
    (marked(time_limit=-3), "time_limit"),
    (marked(comment=5), "job.comment must be a string"),
])
def test_bad_fields_are_named(fields, message):
    with pytest.raises(ProtocolError, match=message):
        job_from_request(fields, "d-1")


def test_advise_mode_places_and_records():
    reply, decision, job, placement = service().advise(ClusterSnapshot.empty(NODES), marked(workers=2), "advise")
    assert reply["action"] == "place" and reply["nodes"] == "n1"
    assert (reply["min_nodes"], reply["max_nodes"], reply["num_tasks"]) == (1, 1, 2)
    assert reply["layout"] == "worker=n1,n1"
    assert decision.layout == (("worker", "n1"), ("worker", "n1")) and decision.action == "place"
    assert placement is not None and decision.id == reply["decision"] == job.id


def test_observe_mode_changes_nothing_but_records_what_it_would_do():
    reply, decision, _, placement = service().advise(ClusterSnapshot.empty(NODES), marked(), "observe")
    assert reply["action"] == "observe" and "nodes" not in reply and "max_nodes" not in reply and placement is None
    assert decision.would == (("worker", "n1"), ("worker", "n1")) and decision.layout == ()


def test_a_job_that_cannot_start_now_is_left_to_slurm():
    full = ClusterSnapshot.empty(NODES).with_free(ClusterSnapshot.empty(NODES).free_array() * 0)
    reply, decision, _, placement = service().advise(full, marked(), "enforce")
    assert reply["action"] == "none" and placement is None and decision.reason


def test_hold_is_a_cap_only_in_enforce_mode():
    snap = ClusterSnapshot.empty(NODES)
    assert service(Holding()).advise(snap, marked(), "advise")[0]["action"] == "none"
    reply = service(Holding()).advise(snap, marked(), "enforce")[0]
    assert reply["action"] == "cap" and reply["max_nodes"] == 1 and reply["switches"] is None
    topo = service(Holding(), has_switches=True, hold_wait_s=300).advise(snap, marked(), "enforce")[0]
    assert (topo["switches"], topo["wait4switch_s"]) == (1, 300)


def test_a_layout_slurm_cannot_express_is_not_pinned():
    svc = AdviceService(Advisor(SlurmDefaultPolicy()), lambda s, j, p: None)
    reply, _, _, placement = svc.advise(ClusterSnapshot.empty(NODES), marked(), "advise")
    assert reply["action"] == "none" and "cannot lay" in reply["reason"] and placement is None


def test_decision_ids_are_unique_increasing_and_of_the_documented_form():
    import re

    from slurm_advisor.daemon.service import DecisionIds
    make = DecisionIds()
    ids = [make() for _ in range(20_000)]
    assert len(set(ids)) == len(ids) and ids == sorted(ids)
    assert all(re.fullmatch(r"d-[0-9a-f]{12}", i) for i in ids)
    assert DecisionIds()() > ids[0]  # a restarted daemon does not reuse the first ids


def test_under_block_topology_a_placement_is_a_node_count_cap_not_a_pin():
    svc = AdviceService(Advisor(SlurmDefaultPolicy()), identity, pins=False, has_switches=True)
    reply, decision, _, placement = svc.advise(ClusterSnapshot.empty(NODES), marked(workers=6), "advise")
    assert reply["action"] == "cap" and reply["max_nodes"] == 2 and "nodes" not in reply
    assert reply["switches"] is None  # not a hold: no switch wait
    assert placement is None and decision.would and decision.max_nodes == 2


def test_block_topology_is_read_from_slurms_config():
    from slurm_advisor.daemon.daemon import block_topology
    assert block_topology("SwitchType = switch/none\nTopologyPlugin          = topology/block\n")
    assert not block_topology("TopologyPlugin          = topology/tree\n")
    assert not block_topology("TopologyPlugin          = topology/default\n") and not block_topology(None)


def test_a_cap_the_job_can_never_meet_is_not_sent():
    # Slurm rejects at submission a job whose node cap no configuration meets: that would cost
    # the user the job. Four 4-GPU nodes: 8 one-GPU workers need two nodes even when empty.
    reply = service(Holding()).advise(ClusterSnapshot.empty(NODES), marked(workers=8), "enforce")[0]
    assert reply["action"] == "none"


PARTED = tuple(Node(f"n{i}", 8, 4, 32000, partitions=frozenset({"batch"} | ({"small"} if i <= 2 else set())))
               for i in range(1, 5))


def _busy_small_nodes():
    # n1 and n2 (the "small" partition) have 2 GPUs free, n3 and n4 all four
    snap = ClusterSnapshot.empty(PARTED)
    free = snap.free_array().copy()
    free[:2, 1] = 2
    return snap.with_free(free)


def test_a_job_is_placed_only_on_nodes_of_its_partition():
    snap = _busy_small_nodes()
    svc = service(default_partition="batch")
    assert svc.advise(snap, marked(workers=4), "advise")[0]["nodes"] == "n3"   # default partition: any node
    reply = svc.advise(snap, marked(workers=4, partition="small"), "advise")[0]
    assert reply["action"] == "place" and set(reply["nodes"].split(",")) <= {"n1", "n2"}


@pytest.mark.parametrize(("partition", "default", "why"), [
    ("small,batch", "batch", "several partitions"),
    (None, None, "default one is unknown"),
    ("gpu", "batch", "holds none of the nodes"),
])
def test_no_pin_when_the_partition_is_unclear(partition, default, why):
    reply = service(default_partition=default).advise(_busy_small_nodes(), marked(partition=partition), "advise")[0]
    assert reply["action"] == "none" and why in reply["reason"]
