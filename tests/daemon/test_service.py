from collections import Counter

import pytest
from daemon_helpers import NODES, Fixed, Holding, identity, marked

from slurm_advisor.advisor import Advisor
from slurm_advisor.daemon.protocol import ProtocolError
from slurm_advisor.daemon.service import SLURMS_CHOICE, AdviceService, job_from_request, slurms_choice
from slurm_advisor.domain import ClusterSnapshot, Node, Placement, Resources
from slurm_advisor.policies.pack import PackPolicy
from slurm_advisor.policies.slurm_default import SlurmDefaultPolicy
from slurm_advisor.policies.spread import SpreadPolicy
from slurm_advisor.slurm.blocks import Blocks
from slurm_advisor.slurm.hostlist import compress
from slurm_advisor.slurm.release import Release


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
    # spread puts the two workers on two nodes; Slurm would put both on n1: a pin
    reply, decision, job, placement = service(SpreadPolicy()).advise(ClusterSnapshot.empty(NODES),
                                                                     marked(workers=2), "advise")
    assert reply["action"] == "place" and reply["nodes"] == "n[1-2]" and reply["reason"] == ""
    assert (reply["min_nodes"], reply["max_nodes"], reply["num_tasks"]) == (2, 2, 2)
    assert reply["layout"] == "worker=n1,n2"
    assert decision.layout == (("worker", "n1"), ("worker", "n2")) and decision.action == "place"
    assert placement is not None and decision.id == reply["decision"] == job.id


@pytest.mark.parametrize("mode", ["advise", "enforce"])
def test_slurms_own_choice_is_not_pinned_but_recorded_and_claimed(mode):
    # slurm-default's placement is what Slurm does with the request anyway: only the stamp
    reply, decision, _, placement = service().advise(ClusterSnapshot.empty(NODES), marked(workers=2), mode)
    assert reply["action"] == "observe" and SLURMS_CHOICE in reply["reason"]
    assert not {"nodes", "min_nodes", "max_nodes", "num_tasks", "layout"} & set(reply)
    assert decision.action == "observe" and decision.mode == mode and decision.reason == reply["reason"]
    assert decision.would == (("worker", "n1"), ("worker", "n1")) and decision.layout == ()
    assert placement is not None and placement.nodes() == ("n1",)  # claimed until the job shows up


def test_a_policy_that_agrees_with_slurm_is_not_pinned_either():
    # pack is no Slurm model, but on the empty cluster it chooses what Slurm chooses
    reply = service(PackPolicy()).advise(ClusterSnapshot.empty(NODES), marked(workers=3), "advise")[0]
    assert reply["action"] == "observe" and SLURMS_CHOICE in reply["reason"]
    # the same nodes with other per-node counts are another placement: pinned
    split = Fixed("n1", "n1", "n2", "n2")  # Slurm: n1 x 4 (the best-fitting single node)
    assert service(split).advise(ClusterSnapshot.empty(NODES), marked(workers=4), "advise")[0]["action"] == "place"


class Refusing:
    name = "refuser"

    def place(self, snapshot, job, rng):
        return None

    def score_nodes(self, snapshot, job):
        return {}


def test_a_fallback_that_is_slurms_choice_keeps_both_reasons():
    svc = AdviceService(Advisor(Refusing(), fallback=SlurmDefaultPolicy()), identity)
    reply, decision, _, placement = svc.advise(ClusterSnapshot.empty(NODES), marked(), "advise")
    assert reply["action"] == "observe" and decision.fallback and placement is not None
    assert reply["reason"] == f"refuser found no placement; {SLURMS_CHOICE}" == decision.reason


def test_ps_tasks_elsewhere_than_slurms_first_tasks_are_pinned():
    # Slurm's first task is the PS in an unpinned job (slurm-advisor layout): the PS on n2 is a pin
    snap = ClusterSnapshot.empty(NODES)
    assert service(Fixed("n1", "n1", "n2")).advise(snap, marked(ps=1, workers=2), "advise")[0]["action"] == "place"
    assert service(Fixed("n1", "n1", "n1")).advise(snap, marked(ps=1, workers=2), "advise")[0]["action"] == "observe"


@pytest.mark.parametrize("extra", [{"req_nodes": "n1"}, {"tres_per_node": "gres:gpu:2"},
                                   {"mem_per_cpu": False, "pn_min_memory": 4000}])
def test_slurms_choice_is_only_claimed_for_requests_it_models(extra):
    # -w, --gres per node and --mem per node: not modelled, so the placement is pinned as before
    reply = service().advise(ClusterSnapshot.empty(NODES), marked(workers=2, **extra), "advise")[0]
    assert reply["action"] == "place"


def test_slurms_choice_honours_the_users_node_counts():
    # -N 2: Slurm spreads the job over two nodes (n1, n2 in order) where it would have used one
    snap = ClusterSnapshot.empty(NODES)
    job = marked(workers=2, min_nodes=2, max_nodes=2)
    assert slurms_choice(snap, job_from_request(job, "d-1"), Placement.of(job_from_request(job, "d-1"), ["n1", "n2"]))
    reply = service().advise(snap, job, "advise")[0]  # slurm-default honours -N 2: Slurm's own choice
    assert reply["action"] == "observe" and SLURMS_CHOICE in reply["reason"]


def test_slurms_choice_follows_the_topology():
    # two leaf switches, s1 = n1, n2 and s2 = n3 alone, all empty. Without a topology Slurm puts a
    # 2-task job on the best-fitting single node (n1, the first); _eval_nodes_topo takes the leaf
    # with the fewest usable nodes (s2) and its nodes in order.
    nodes = tuple(Node(f"n{i}", 8, 4, 32000, switch="s1" if i < 3 else "s2") for i in range(1, 4))
    snap = ClusterSnapshot.empty(nodes)
    fields = marked(workers=2)
    job = job_from_request(fields, "d-1")
    on_n3 = Placement.of(job, ["n3", "n3"])
    assert slurms_choice(snap, job, on_n3, topology=True)
    assert not slurms_choice(snap, job, on_n3, topology=False)


def test_observe_mode_changes_nothing_but_records_what_it_would_do():
    reply, decision, _, placement = service().advise(ClusterSnapshot.empty(NODES), marked(), "observe")
    assert reply["action"] == "observe" and "nodes" not in reply and "max_nodes" not in reply
    assert decision.would == (("worker", "n1"), ("worker", "n1")) and decision.layout == ()
    assert SLURMS_CHOICE in decision.reason  # and whether it was Slurm's own choice
    assert placement is not None  # claimed as in advise mode: a burst's later jobs see it
    reply, decision, _, placement = service(SpreadPolicy()).advise(ClusterSnapshot.empty(NODES), marked(), "observe")
    assert reply["action"] == "observe" and decision.reason == ""
    assert placement is not None and {n for _, n in decision.would} == {"n1", "n2"}  # claimed as advise would pin
    assert decision.would == (("worker", "n1"), ("worker", "n2"))


def test_a_job_that_cannot_start_now_is_left_to_slurm():
    full = ClusterSnapshot.empty(NODES).with_free(ClusterSnapshot.empty(NODES).free_array() * 0)
    reply, decision, _, placement = service().advise(full, marked(), "enforce")
    assert reply["action"] == "observe" and placement is None  # stamped: its outcome links back
    assert decision.reason.startswith("left to Slurm as submitted: ")


def test_hold_is_a_cap_only_in_enforce_mode():
    snap = ClusterSnapshot.empty(NODES)
    assert service(Holding()).advise(snap, marked(), "advise")[0]["action"] == "observe"
    reply = service(Holding()).advise(snap, marked(), "enforce")[0]
    assert reply["action"] == "cap" and reply["max_nodes"] == 1 and reply["switches"] is None
    topo = service(Holding(), has_switches=True, hold_wait_s=300).advise(snap, marked(), "enforce")[0]
    assert (topo["switches"], topo["wait4switch_s"]) == (1, 300)


def test_a_layout_slurm_cannot_express_is_not_pinned():
    svc = AdviceService(Advisor(SpreadPolicy()), lambda s, j, p: None)  # spread: not Slurm's own choice
    reply, _, _, placement = svc.advise(ClusterSnapshot.empty(NODES), marked(), "advise")
    assert reply["action"] == "observe" and "cannot lay" in reply["reason"] and placement is None


def test_slurms_own_choice_is_compared_before_it_is_expressed():
    """Pinned, Slurm lays tasks out by its own rule for pinned nodes, which may not give the
    counts it chooses unpinned: an advice equal to its own choice is left to it, whatever the
    expressed layout would have been (here one it cannot express at all)."""
    svc = AdviceService(Advisor(SlurmDefaultPolicy()), lambda s, j, p: None)
    reply, decision, _, placement = svc.advise(ClusterSnapshot.empty(NODES), marked(workers=6), "advise")
    assert reply["action"] == "observe" and SLURMS_CHOICE in reply["reason"]
    assert placement is not None and decision.would  # claimed and recorded as Slurm will place it


def test_decision_ids_are_unique_increasing_and_of_the_documented_form():
    import re

    from slurm_advisor.daemon.service import DecisionIds
    make = DecisionIds()
    ids = [make() for _ in range(20_000)]
    assert len(set(ids)) == len(ids) and ids == sorted(ids)
    assert all(re.fullmatch(r"d-[0-9a-f]{12}", i) for i in ids)
    assert DecisionIds()() > ids[0]  # a restarted daemon does not reuse the first ids


def test_under_block_topology_a_placement_is_a_node_count_cap_not_a_pin():
    # the config says topology/block but no blocks were read: every placement is a cap
    svc = AdviceService(Advisor(SlurmDefaultPolicy()), identity, pins=False, has_switches=True)
    reply, decision, _, placement = svc.advise(ClusterSnapshot.empty(NODES), marked(workers=6), "advise")
    assert reply["action"] == "cap" and reply["max_nodes"] == 2 and "nodes" not in reply
    assert reply["switches"] is None  # not a hold: no switch wait
    assert placement is None and decision.would and decision.max_nodes == 2


#: The testbeds' blocks: b1 = n[1-2], b2 = n[3-4], BlockSizes 2,4 (tests/slurm/test_blocks.py).
BLOCKS = Blocks(("b1", "b2"), (("n1", "n2"), ("n3", "n4")), 2, (0, 1))


@pytest.mark.parametrize("release, nodes, action, segment", [
    (Release(24, 11, 5), ("n1", "n2"), "place", None),        # inside one block: Slurm takes the pin
    (Release(24, 11, 5), ("n2", "n3"), "cap", None),          # across blocks: refused as a pin, so a cap
    (Release(26, 5, 5), ("n2", "n3"), "place", 1),            # 26.05: the hook pins it in 1-node segments
    (Release(24, 11, 5), ("n1", "n2", "n3"), "place", None),  # 3 nodes: the 4-node block holds them
])
def test_under_block_topology_a_pin_goes_where_the_blocks_take_it(release, nodes, action, segment):
    svc = service(Fixed(*nodes), blocks=BLOCKS, release=release)
    reply, decision, _, placement = svc.advise(ClusterSnapshot.empty(NODES), marked(workers=len(nodes)), "advise")
    assert reply["action"] == action and reply.get("segment_size") == segment
    if action == "place":
        assert reply["nodes"] == compress(nodes) and placement is not None and decision.layout
        assert ("segments" in reply["reason"]) == (segment is not None)
    else:
        assert reply["max_nodes"] == len(nodes) and placement is None and decision.max_nodes == len(nodes)
        assert "span blocks" in reply["reason"] and decision.would


def test_under_block_topology_slurms_choice_is_pinned_not_assumed():
    # cons_tres's choice without blocks (n1, n1) is not what Slurm picks inside its blocks: no shortcut
    svc = service(blocks=BLOCKS, release=Release(24, 11, 5))
    reply, *_ = svc.advise(ClusterSnapshot.empty(NODES), marked(workers=2), "advise")
    assert reply["action"] == "place" and SLURMS_CHOICE not in reply["reason"]
    plain, *_ = service().advise(ClusterSnapshot.empty(NODES), marked(workers=2), "advise")
    assert plain["action"] == "observe" and SLURMS_CHOICE in plain["reason"]


def test_block_topology_is_read_from_slurms_config():
    from slurm_advisor.daemon.build import block_topology
    assert block_topology("SwitchType = switch/none\nTopologyPlugin          = topology/block\n")
    assert not block_topology("TopologyPlugin          = topology/tree\n")
    assert not block_topology("TopologyPlugin          = topology/default\n") and not block_topology(None)


def test_a_cap_the_job_can_never_meet_is_not_sent():
    # Slurm rejects at submission a job whose node cap no configuration meets: that would cost
    # the user the job. Four 4-GPU nodes: 8 one-GPU workers need two nodes even when empty.
    reply = service(Holding()).advise(ClusterSnapshot.empty(NODES), marked(workers=8), "enforce")[0]
    assert reply["action"] == "observe"


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
    svc = service(SpreadPolicy(), default_partition="batch")
    assert svc.advise(snap, marked(workers=4), "advise")[0]["nodes"] == "n[3-4]"   # default partition: any node
    reply = svc.advise(snap, marked(workers=2, partition="small"), "advise")[0]  # Slurm: n1 x 2
    assert reply["action"] == "place" and reply["nodes"] == "n[1-2]"


def test_slurms_choice_is_the_one_inside_the_jobs_partition():
    # Slurm puts 4 one-GPU workers on n3 (4 GPUs free) if the job may use any node; in "small"
    # (n1, n2: 2 GPUs free each) its own choice is n1 x 2 + n2 x 2, which slurm-default advises
    svc = service(default_partition="batch")
    _, anywhere, _, _ = svc.advise(_busy_small_nodes(), marked(workers=4), "advise")
    _, small, _, _ = svc.advise(_busy_small_nodes(), marked(workers=4, partition="small"), "advise")
    assert {n for _, n in anywhere.would} == {"n3"} and {n for _, n in small.would} == {"n1", "n2"}
    assert anywhere.action == small.action == "observe" and SLURMS_CHOICE in small.reason


@pytest.mark.parametrize(("partition", "default", "why"), [
    ("small,batch", "batch", "several partitions"),
    (None, None, "default one is unknown"),
    ("gpu", "batch", "no node of partition 'gpu'"),
])
def test_no_pin_when_the_partition_is_unclear(partition, default, why):
    reply = service(default_partition=default).advise(_busy_small_nodes(), marked(partition=partition), "advise")[0]
    assert reply["action"] == "observe" and why in reply["reason"]


def test_a_job_that_names_its_nodes_is_placed_on_them_as_slurm_lays_them_out():
    # -w n[1-4] -N 4 -n 8: slurm-default takes the required nodes first, each as _cpus_to_use allows
    # (the pinned layout of slurm/expressible.py: 5, 1, 1, 1), so the pin honours -w
    snap = ClusterSnapshot.empty(NODES)
    fields = marked(ps=1, workers=7, gpus=0, req_nodes="n[1-4]", min_nodes=4, max_nodes=4)
    reply, decision, _, _ = service().advise(snap, fields, "advise")
    assert reply["action"] == "place" and reply["nodes"] == "n[1-4]"
    assert Counter(n for _, n in decision.layout) == {"n1": 5, "n2": 1, "n3": 1, "n4": 1}
    # -w n4 -n 2: on n4 alone; -w beyond the -N range: no placement, the job is Slurm's
    assert {n for _, n in service().advise(snap, marked(req_nodes="n4"), "advise")[1].layout} == {"n4"}
    left = service().advise(snap, marked(req_nodes="n[1-3]", min_nodes=2, max_nodes=2), "advise")[0]
    assert left["action"] == "observe" and left["reason"].startswith("left to Slurm as submitted")


def test_a_job_beyond_max_tasks_or_the_whole_cluster_is_left_to_slurm_with_its_reason():
    """No comment makes the advisor weigh more tasks than the site allows or the cluster holds
    (issue 39: workers=10^8 cost 1.7 s a refresh); the job is stamped and left as submitted."""
    snapshot = ClusterSnapshot.empty(NODES)  # 32 CPUs, 16 GPUs
    for max_tasks, workers, why in ((6, 7, "at most 6 (max_tasks)"),
                                    (100, 17, "more than the whole cluster holds")):
        reply, decision, _job, placement = service(max_tasks=max_tasks).advise(
            snapshot, marked(workers=workers), "advise")
        assert reply["action"] == "observe" and why in reply["reason"] and placement is None
        assert decision.reason == reply["reason"] and "nodes" not in reply
    reply, _, _, placement = service(max_tasks=6).advise(snapshot, marked(workers=6), "advise")
    assert placement is not None and "max_tasks" not in reply["reason"]  # at the bound: advised as ever
