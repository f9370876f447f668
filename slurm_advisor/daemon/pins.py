"""Whether a job the advisor pinned (or capped) can still start there. Pure: no I/O, no clock.

The hook pins a job to the nodes that were free in the daemon's view. When those nodes are taken
before Slurm starts the job (another job got there first, the view was stale, a node went down),
the pin can only make the job wait: Slurm will not start it elsewhere. The refresher asks
:func:`stuck` about every advised job still pending and releases the ones whose pin cannot hold
them now, rather than after ``pin_bound_s``.

"Cannot hold now" is judged on Slurm's own free capacity (sinfo, no claims subtracted) and per
node: a pin whose nodes are free enough is kept however long Slurm takes to start it (its main
scheduler may lag a refresh), so only a pin that is wrong is released.
"""
from __future__ import annotations

from dataclasses import dataclass

from slurm_advisor.domain import ClusterSnapshot, Job, Placement
from slurm_advisor.domain.decision import Decision
from slurm_advisor.domain.job import Role
from slurm_advisor.domain.placement import TaskAssignment
from slurm_advisor.slurm.cons_tres import select


@dataclass(frozen=True)
class Pin:
    """What an advised job needs to start under the advisor's constraint: its tasks on exactly
    ``placement``'s nodes (a pin), or at most ``max_nodes`` nodes that Slurm picks (a placement
    sent as a cap, under topology/block)."""

    job: Job
    placement: Placement | None = None
    max_nodes: int | None = None
    #: pinned task by task (-m arbitrary): Slurm refuses to change such a job's node list or node
    #: count ("Requested operation not supported", 24.11 testbed), so the pin cannot be released
    exact: bool = False


def pin_of(decision: Decision | None, job_of) -> Pin | None:
    """The pin or cap ``decision`` put on its job; None for a decision that constrained nothing,
    a hold (its cap is a deliberate wait: ``pin_bound_s`` bounds it), or a request that no longer
    parses. ``job_of(fields, job_id)`` is the daemon's own reading of the hook's fields (the
    job's per-task demand)."""
    if decision is None or decision.action not in ("place", "cap"):
        return None
    if decision.action == "cap" and not (decision.would and decision.max_nodes):
        return None  # a hold: no placement behind the cap
    if decision.action == "place" and not decision.layout:
        return None
    try:
        job = job_of(decision.request, decision.id)
        tasks = tuple(TaskAssignment(Role(role), node) for role, node in decision.layout)
    except ValueError:  # ProtocolError, a marker or role that no longer parses: keep the bound
        return None
    if decision.action == "cap":
        return Pin(job, max_nodes=decision.max_nodes)
    exact = isinstance(decision.request, dict) and decision.request.get("arbitrary") is True
    return Pin(job, placement=Placement(job.id, tasks), exact=exact)


def stuck(snapshot: ClusterSnapshot, pin: Pin) -> str | None:
    """Why ``pin`` cannot start on ``snapshot`` now (None: it can, or it is not for us to say)."""
    if pin.placement is not None:
        index = snapshot.layout.index
        free = snapshot.free_array()
        for node, need in pin.placement.demand_per_node(pin.job).items():
            i = index.get(node)
            if i is None:
                return f"node {node} is gone from the cluster"
            cpus, gpus, mem = free[i].tolist()
            if need.cpus > cpus or need.gpus > gpus or need.mem_mb > mem:
                return (f"node {node} has {cpus} CPUs, {gpus} GPUs, {mem} MB free; the pin needs "
                        f"{need.cpus}, {need.gpus}, {need.mem_mb} there")
        return None
    # a cap: any nodes, no switch rule, no minimum (the widest reading), so that only a cap that
    # no node set can meet now is released
    if pin.max_nodes is not None and select(snapshot, pin.job, max_nodes=pin.max_nodes) is None:
        return f"no set of at most {pin.max_nodes} nodes can hold it now"
    return None
