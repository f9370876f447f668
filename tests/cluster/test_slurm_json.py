"""Slurm's JSON into domain values: real 22.05 output from the testbed, 23.02 and 24.05 output
written from data_parser v0.0.39 and v0.0.41 (src/plugins/data_parser/*/parsers.c)."""
from __future__ import annotations

import pytest
from slurmctl import JobView

from slurm_advisor.cluster.base import SourceError
from slurm_advisor.cluster.slurm_cli import build_snapshot, running_job
from slurm_advisor.cluster.slurm_json import (
    describe_topology,
    expand_hostlist,
    gres_gpus,
    node_shares,
    number,
    parse_sinfo,
    parse_squeue,
    parse_topology,
    read_blocks,
)
from slurm_advisor.domain import Resources, Role

R = Resources


def layout(rj) -> list[tuple[str, str]]:
    return [(t.role.value, t.node) for t in rj.placement.tasks]


# -- Slurm 22.05, recorded on the testbed: n1, n2 busy, n3 down, n4 drained while idle --------
def test_2205_nodes_in_slurm_order_with_free_capacity(fixture_json):
    nodes = parse_sinfo(fixture_json("sinfo-22.05.json"))
    assert [r.node.name for r in nodes] == ["n1", "n2", "n3", "n4"]
    assert all(r.node.capacity == R(8, 4, 32000) for r in nodes)
    assert [r.free for r in nodes] == [R(4, 2, 28000), R(2, 1, 22000), R(), R()]


def test_2205_drained_idle_and_down_nodes_offer_nothing(fixture_json):
    n3, n4 = parse_sinfo(fixture_json("sinfo-22.05.json"))[2:]
    assert n3.states == {"DOWN"} and not n3.available
    assert n4.states == {"IDLE", "DRAIN"} and not n4.available  # "idle" in state, DRAIN only in state_flags


def test_2205_free_is_capacity_less_what_scontrol_says_jobs_hold(fixture_json, fixture_text):
    held: dict[str, R] = {}
    for line in fixture_text("scontrol-show-job-22.05.txt").splitlines():
        for node, res in JobView.parse(line).allocation.items():
            held[node] = held.get(node, R()) + res
    for reading in parse_sinfo(fixture_json("sinfo-22.05.json")):
        if reading.available:
            assert reading.free == reading.node.capacity - held.get(reading.node.name, R())


def test_2205_running_jobs_only(fixture_json):
    jobs = parse_squeue(fixture_json("squeue-22.05.json"))
    assert [j.job_id for j in jobs] == ["1", "2"]  # job 3 is pending
    marked, foreign = jobs
    assert (marked.nodes, marked.cpus, marked.gpus, marked.mem_mb) == (("n1", "n2"), 6, 3, 6000)
    assert marked.cpus_on == {"n1": 4, "n2": 2}
    assert foreign.comment == "" and (foreign.cpus, foreign.gpus, foreign.mem_mb) == (4, 2, 8000)


def test_2205_snapshot_with_topology(fixture_json, fixture_text):
    snap = build_snapshot(parse_sinfo(fixture_json("sinfo-22.05.json")),
                          parse_squeue(fixture_json("squeue-22.05.json")),
                          parse_topology(fixture_text("topology-tree.txt")), 5.0)
    assert [n.switch for n in snap.nodes] == ["s1", "s1", "s2", "s2"]
    assert snap.free["n2"] == R(2, 1, 22000) and snap.time == 5.0
    (rj,) = snap.running  # job 2 has no marker: it only consumes capacity
    job = rj.job
    assert (job.id, job.type, job.num_ps, job.num_workers, job.iterations) == ("1", "resnet50", 1, 2, 5000.0)
    assert job.ps_demand == job.worker_demand == R(2, 1, 2000)
    assert layout(rj) == [("ps", "n1"), ("worker", "n1"), ("worker", "n2")]
    assert snap.jobs_on("n2") == (rj,)


# -- Slurm 23.02 (v0.0.39): scontrol --json show nodes, number objects, state lists ----------
def test_2302_nodes(fixture_json):
    nodes = parse_sinfo(fixture_json("scontrol-nodes-23.02.json"))
    assert [r.node.name for r in nodes] == ["gpu01", "gpu02", "gpu03", "gpu04", "gpu05"]
    assert nodes[0].node.capacity == R(32, 8, 256000) and nodes[0].node.features == {"a100"}
    assert [r.free for r in nodes] == [R(20, 5, 208000), R(), R(), R(20, 5, 208000), R(32, 8, 256000)]
    assert nodes[1].states == {"IDLE", "DRAIN"} and nodes[2].states == {"DOWN", "NOT_RESPONDING"}


def test_2302_jobs_and_snapshot(fixture_json):
    jobs = parse_squeue(fixture_json("squeue-23.02.json"))
    assert [j.job_id for j in jobs] == ["101", "102"]
    assert jobs[0].cpus_on == {"gpu01": 12, "gpu04": 4} and jobs[0].time_limit_s == 86400.0
    assert running_job(jobs[1]) is None  # "slurm-advisor: ps=1" lacks a type: a foreign job
    rj = running_job(jobs[0])
    assert rj.job.worker_demand == R(4, 1, 16000)
    assert (rj.job.model_size_mb, rj.job.batch_size, rj.job.iterations) == (1300.0, 32, 1.0)
    assert layout(rj) == [("ps", "gpu01"), ("worker", "gpu01"), ("worker", "gpu01"), ("worker", "gpu04")]


def test_2302_grouped_sinfo_is_refused_naming_the_alternative(fixture_json):
    with pytest.raises(SourceError, match="scontrol --json show nodes"):
        parse_sinfo(fixture_json("sinfo-23.02.json"))


# -- Slurm 24.05 (v0.0.41): job_state lists, job_resources.nodes.allocation -----------------
def test_2405_nodes_and_jobs(fixture_json):
    nodes = parse_sinfo(fixture_json("scontrol-nodes-24.05.json"))
    assert [r.free for r in nodes] == [R(0, 2, 64000), R(4, 1, 80000), R(), R()]  # powered down, maintenance
    jobs = parse_squeue(fixture_json("squeue-24.05.json"))
    assert [j.job_id for j in jobs] == ["7", "8"]
    assert jobs[0].time_limit_s is None  # infinite
    rj = running_job(jobs[0])
    assert rj.job.is_allreduce and rj.job.worker_demand == R(8, 1, 32000) and rj.job.iterations == 20000.0
    assert layout(rj) == [("worker", "a1"), ("worker", "a1"), ("worker", "a2")]
    assert rj.placement.count("a1", Role.WORKER) == 2 and rj.start_time == 1796132000.0


# -- malformed documents name the field -------------------------------------------------------
@pytest.mark.parametrize(("doc", "field"), [
    ([], "JSON object"),
    ({"nodes": "n1"}, "nodes: expected a list"),
    ({}, "nodes: missing"),
    ({"nodes": [{"name": "n1", "real_memory": 1, "state": "idle"}]}, "node n1: cpus"),
    ({"nodes": [{"name": "n1", "cpus": {"set": True}, "real_memory": 1, "state": "idle"}]}, "node n1: cpus"),
    ({"nodes": [{"name": "n1", "cpus": 8, "real_memory": 1}]}, "node n1: state"),
    ({"nodes": [{"name": "n1", "cpus": 8, "real_memory": 1, "state": 3}]}, "node n1: state"),
    ({"nodes": [{"cpus": 8}]}, r"nodes\[0\].name"),
    ({"errors": [{"error": "Unable to contact slurm controller"}], "nodes": []}, "Unable to contact"),
    ({"nodes": [{"name": "n1", "cpus": 8, "real_memory": 1, "state": "idle"}] * 2}, "listed twice: n1"),
])
def test_malformed_nodes(doc, field):
    with pytest.raises(SourceError, match=field):
        parse_sinfo(doc)


@pytest.mark.parametrize(("doc", "field"), [
    ({"jobs": [{"job_state": "RUNNING", "nodes": "n1"}]}, r"jobs\[0\].job_id"),
    ({"jobs": [{"job_id": 4, "job_state": "RUNNING", "nodes": ""}]}, "job 4: nodes"),
    ({"jobs": [{"job_id": 4, "job_state": "RUNNING", "nodes": "n[1-"}]}, "unclosed"),
    ({"jobs": [{"job_id": 4, "job_state": "RUNNING", "nodes": "n1", "cpus": "x"}]}, "job 4: cpus"),
    ({"jobs": [{"job_id": 4, "job_state": ["RUNNING"], "nodes": "n1", "cpus": 2,
                "job_resources": {"allocated_nodes": [{"nodename": "n1", "sockets": []}]}}]}, "sockets"),
    ({"jobs": {}}, "jobs: expected a list"),
])
def test_malformed_jobs(doc, field):
    with pytest.raises(SourceError, match=field):
        parse_squeue(doc)


# -- the small readers ------------------------------------------------------------------------
def test_hostlists():
    assert expand_hostlist("n[1-3,5],m2") == ["n1", "n2", "n3", "n5", "m2"]
    assert expand_hostlist("gpu[08-10]-ib") == ["gpu08-ib", "gpu09-ib", "gpu10-ib"]
    assert expand_hostlist("r[1-2]n[1-2]") == ["r1n1", "r1n2", "r2n1", "r2n2"]
    assert expand_hostlist("") == []


@pytest.mark.parametrize(("gres", "gpus"), [
    ("gpu:4", 4), ("gpu:2(IDX:0-1)", 2), ("gpu:2(IDX:0,2)", 2), ("gpu:a100:2(S:0-1),gpu:v100:1", 3),
    ("gpu:a100:0(IDX:N/A)", 0), ("(null)", 0), ("", 0), ("nic:2,gpu:1", 1), (["gpu:2(IDX:0-1)", "gpu:1(IDX:0)"], 3),
])
def test_gres_gpus(gres, gpus):
    assert gres_gpus(gres) == gpus


def test_numbers():
    assert number(8, "x") == 8
    assert number({"set": True, "infinite": False, "number": 8}, "x") == 8
    assert number({"set": False, "infinite": True, "number": 0}, "x") is None
    assert number(None, "x", default=0) == 0


def test_topology_leaf_switch_and_none():
    text = ("SwitchName=spine Level=1 LinkSpeed=1 Nodes=n[1-4] Switches=s[1-2]\n"
            "SwitchName=s1 Level=0 LinkSpeed=1 Nodes=n[1-2]\nSwitchName=s2 Level=0 LinkSpeed=1 Nodes=n[3-4]\n")
    assert parse_topology(text) == {"n1": "s1", "n2": "s1", "n3": "s2", "n4": "s2"}
    assert parse_topology("") == {}
    assert parse_topology("scontrol: error: No topology information available\n") == {}
    with pytest.raises(SourceError, match="bad switch line"):
        parse_topology("SwitchName=s1 Level=x Nodes=n1")


def test_topology_blocks():
    # topology/block's lines as topology_block.c:_print_topo_record writes them (24.11, 26.05)
    text = ("BlockName=b1 BlockIndex=0 Nodes=n[1-2] BlockSize=2\n"
            "BlockName=b2 BlockIndex=1 Nodes=n[3-4] BlockSize=2\n"
            "AggregatedBlock=b[1-2] BlockIndex=2 Nodes=n[1-4] BlockSize=4\n")
    blocks = read_blocks(text)
    assert blocks.block_of() == {"n1": 0, "n2": 0, "n3": 1, "n4": 1}
    assert parse_topology(text) == {}  # no switches: blocks are not a tree
    assert read_blocks("SwitchName=s1 Level=0 LinkSpeed=1 Nodes=n[1-2]\n") is None
    assert describe_topology({}, blocks) == {
        "plugin": "block", "nodes": 4, "base_block_nodes": 2, "block_sizes": [2, 4],
        "blocks": [{"name": "b1", "nodes": "n[1-2]"}, {"name": "b2", "nodes": "n[3-4]"}]}
    assert describe_topology({"n1": "s1", "n2": "s2", "n3": "s2"}, None) == {
        "plugin": "tree", "nodes": 3, "switches": [{"name": "s1", "nodes": "n1"}, {"name": "s2", "nodes": "n[2-3]"}]}
    assert describe_topology({}, None) == {"plugin": "none"}
    with pytest.raises(SourceError, match="bad block line"):
        read_blocks("BlockName= BlockIndex=0 Nodes=n1 BlockSize=1")


def test_node_shares():
    assert node_shares(3, [4, 2]) == [2, 1]
    assert node_shares(4, [12, 4]) == [3, 1]
    assert node_shares(5, [1, 1]) == [3, 2]
    assert node_shares(2, [0, 0, 0]) == [1, 1, 0]
    assert sum(node_shares(7, [3, 3, 1])) == 7
