"""A speed report turned into a live speed sample: the job, where its tasks run, who runs beside it.

Pure: the snapshot at report time and the job's decision in, a :class:`SpeedSample` (source
"live", what the speed model trains on) or None out. The job is the one its decision describes and
its placement the decision's layout; a job the daemon did not place (observe mode, no advice)
but whose ``--comment`` carries the marker is taken as the snapshot shows it (Slurm's own
placement, tasks spread over its nodes as squeue lists them). Anything else gives no sample.
"""
from __future__ import annotations

import logging

from slurm_advisor.daemon.protocol import ProtocolError
from slurm_advisor.daemon.service import job_from_request
from slurm_advisor.domain import (
    ClusterSnapshot,
    Placement,
    Role,
    RunningJob,
    SpeedSample,
    TaskAssignment,
    switch_loads,
)
from slurm_advisor.domain.decision import Decision
from slurm_advisor.domain.observation import for_placement

log = logging.getLogger("slurm_advisor.daemon")


def live_sample(snapshot: ClusterSnapshot | None, job_id: str, when: float, speed: float,
                decision: Decision | None) -> SpeedSample | None:
    """The sample for job ``job_id`` running at ``speed`` it/s at ``when``; None without a placement."""
    if snapshot is None:
        return None
    subject = _subject(snapshot, job_id, decision)
    if subject is None:
        return None
    own = subject.placement.nodes()
    neighbours = {rj.job.id: rj for node in own for rj in snapshot.jobs_on(node) if rj.job.id != job_id}
    used = set(own).union(*(rj.placement.nodes() for rj in neighbours.values()))
    nodes = tuple(n for n in snapshot.nodes if n.name in used)
    loads = switch_loads(snapshot, {snapshot.node(n).switch for n in own})
    return SpeedSample(when, subject, tuple(neighbours.values()), nodes, speed, source="live",
                       switches=for_placement(loads, snapshot, subject.placement))


def _subject(snapshot: ClusterSnapshot, job_id: str, decision: Decision | None) -> RunningJob | None:
    running = snapshot.running_job(job_id)
    if decision is None or not decision.layout:
        return running
    try:
        job = job_from_request(decision.request, job_id)
    except (ProtocolError, ValueError) as exc:  # a decision recorded by an older release, say
        log.warning("decision %s: cannot rebuild its job (%s); using Slurm's view", decision.id, exc)
        return running
    placement = Placement(job_id, tuple(TaskAssignment(Role(role), node) for role, node in decision.layout))
    if len(placement.tasks) != job.num_tasks or any(n not in snapshot.layout.index for n in placement.nodes()):
        return running
    return RunningJob(job, placement, running.start_time if running else 0.0)
