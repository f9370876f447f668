"""What a decision's pin needs, and whether the nodes can hold it now (literal snapshots)."""
from __future__ import annotations

from datetime import UTC, datetime

from daemon_helpers import NODES, marked

from slurm_advisor.daemon.pins import Pin, pin_of, stuck
from slurm_advisor.daemon.service import job_from_request
from slurm_advisor.domain import ClusterSnapshot, Job, Placement, Resources
from slurm_advisor.domain.decision import Decision

TIME = datetime(2026, 12, 1, tzinfo=UTC)


def decision(action: str, layout=(), would=(), max_nodes=None, fields=None) -> Decision:
    return Decision("d-0123456789ab", TIME, "advise", action, "spread", None, "resnet50", 1000,
                    fields if fields is not None else marked(ps=1, workers=2, gpus=1, cpus=2),
                    layout=layout, would=would, max_nodes=max_nodes)


LAYOUT = (("ps", "n1"), ("worker", "n1"), ("worker", "n2"))


def less(snapshot: ClusterSnapshot, node: str, cpus=0, gpus=0, mem=0) -> ClusterSnapshot:
    free = snapshot.free_array().copy()
    free[snapshot.index(node)] -= (cpus, gpus, mem)
    return snapshot.with_free(free)


def test_a_pin_is_the_layout_with_the_jobs_per_task_demand():
    pin = pin_of(decision("place", layout=LAYOUT), job_from_request)
    assert pin.max_nodes is None and pin.placement.per_node() == (("n1", 1, 1), ("n2", 0, 1))
    needs = pin.placement.demand_per_node(pin.job)
    assert (needs["n1"].cpus, needs["n1"].gpus, needs["n1"].mem_mb) == (4, 2, 4000)  # 2 tasks x 2 CPUs x 1000 MB


def test_only_pins_and_placements_sent_as_caps_are_judged():
    assert pin_of(decision("cap", would=LAYOUT, max_nodes=2), job_from_request).max_nodes == 2
    assert pin_of(decision("cap", max_nodes=1), job_from_request) is None  # a hold: a deliberate wait
    assert pin_of(decision("observe", would=LAYOUT), job_from_request) is None  # Slurm's own choice
    assert pin_of(decision("none"), job_from_request) is None
    assert pin_of(None, job_from_request) is None  # a decision the daemon no longer has
    assert pin_of(decision("place", layout=LAYOUT, fields={"comment": "no marker"}), job_from_request) is None


def test_a_pin_is_stuck_only_when_a_pinned_node_lacks_what_it_needs_there():
    pin = pin_of(decision("place", layout=LAYOUT), job_from_request)
    empty = ClusterSnapshot.empty(NODES)  # 8 CPUs, 4 GPUs, 32000 MB each
    assert stuck(empty, pin) is None
    assert stuck(less(empty, "n1", cpus=4), pin) is None  # exactly the 4 CPUs it needs left
    assert stuck(less(empty, "n3", cpus=8, gpus=4), pin) is None  # not its node
    assert stuck(less(empty, "n1", cpus=5), pin) == \
        "node n1 has 3 CPUs, 4 GPUs, 32000 MB free; the pin needs 4, 2, 4000 there"
    assert "node n2 has" in stuck(less(empty, "n2", gpus=4), pin)
    assert "node n2 has" in stuck(less(empty, "n2", mem=31000), pin)
    assert stuck(ClusterSnapshot.empty(NODES[:1]), pin) == "node n2 is gone from the cluster"


def test_a_placement_sent_as_a_cap_is_stuck_when_no_node_set_under_the_cap_holds_it():
    job = Job("d-0123456789ab", "bert", 0, 6, Resources(1, 0, 100), Resources(1, 0, 100), 1.0)
    pin = Pin(job, max_nodes=1)
    empty = ClusterSnapshot.empty(NODES)
    assert stuck(empty, pin) is None
    half = empty
    for node in ("n1", "n2", "n3"):
        half = less(half, node, cpus=4)
    assert stuck(half, pin) is None  # n4 still holds all six tasks
    assert stuck(less(half, "n4", cpus=4), pin) == "no set of at most 1 nodes can hold it now"
    assert stuck(less(half, "n4", cpus=4), Pin(job, max_nodes=2)) is None
    assert stuck(empty, Pin(job, placement=Placement.of(job, ["n1"] * 6))) is None
