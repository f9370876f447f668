"""Plain-dict forms of domain objects: every object survives dict -> JSON -> dict."""
import json

import pytest

from slurm_advisor.domain import Job, Node, Placement, Resources, RunningJob, SpeedSample, SwitchLoad, codec

FULL = Job("j1", "vgg16", 1, 2, Resources(4, 0, 16_000), Resources(4, 1, 24_000), 1234.5,
           submit_time=17.25, user="alice", model_size_mb=553.6, batch_size=32)
BARE = Job("j2", "my-model", 0, 1, Resources(), Resources(2, 1, 1000), 10.0)
NODES = (Node("n1", 32, 8, 256_000, "s1", frozenset({"v100", "ib"})), Node("n2", 32, 8, 256_000))


def through_json(d):
    return json.loads(json.dumps(d))


@pytest.mark.parametrize("job", [FULL, BARE])
def test_job_round_trip(job: Job) -> None:
    back = codec.job_from_dict(through_json(codec.job_to_dict(job)))
    assert back == job
    assert back.total_demand() == job.total_demand()


def test_resources_round_trip() -> None:
    r = Resources(3, 1, 999)
    assert codec.resources_from_dict(through_json(codec.resources_to_dict(r))) == r


def test_placement_round_trip_keeps_roles_and_order() -> None:
    p = Placement.of(FULL, ["n2", "n1", "n2"])
    items = through_json(codec.placement_to_list(p))
    assert items == [["ps", "n2"], ["worker", "n1"], ["worker", "n2"]]
    assert codec.placement_from_list("j1", items) == p


@pytest.mark.parametrize("node", NODES)
def test_node_round_trip(node: Node) -> None:
    d = codec.node_to_dict(node)
    assert d["features"] == sorted(node.features)
    assert codec.node_from_dict(through_json(d)) == node


def test_running_round_trip() -> None:
    rj = RunningJob(FULL, Placement.of(FULL, ["n1", "n1", "n2"]), 99.5)
    assert codec.running_from_dict(through_json(codec.running_to_dict(rj))) == rj


def test_speed_sample_round_trip() -> None:
    subject = RunningJob(FULL, Placement.of(FULL, ["n1", "n1", "n2"]), 5.0)
    neighbour = RunningJob(BARE, Placement.of(BARE, ["n2"]), 1.0)
    loads = (SwitchLoad("s1", 0.75, 2), SwitchLoad("s2", 0.0, 0))
    for sample in (SpeedSample(12.5, subject, (neighbour,), NODES, 3.25, "live"),
                   SpeedSample(0.0, subject, (), NODES[:1], 0.5),
                   SpeedSample(1.0, subject, (), NODES, 0.5, "live", loads)):
        back = codec.sample_from_dict(through_json(codec.sample_to_dict(sample)))
        assert back == sample


def test_optional_fields_may_be_absent_from_dicts() -> None:
    d = codec.job_to_dict(BARE)
    for key in ("submit_time", "user", "model_size_mb", "batch_size"):
        del d[key]
    assert codec.job_from_dict(d) == BARE
    assert codec.node_from_dict({"name": "x", "cpus": 1, "gpus": 0, "mem_mb": 5}) == Node("x", 1, 0, 5)
    sample = codec.sample_to_dict(SpeedSample(1.0, RunningJob(BARE, Placement.of(BARE, ["n1"])), (),
                                              NODES, 2.0))
    del sample["source"]
    assert codec.sample_from_dict(sample).source == "sim"
    assert "switches" not in sample and codec.sample_from_dict(sample).switches == ()  # logged before them
