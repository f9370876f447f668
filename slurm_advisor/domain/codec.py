"""Plain-dict forms of domain objects, shared by the store and the daemon protocol."""
from __future__ import annotations

from datetime import datetime

from slurm_advisor.domain.cluster import Node, RunningJob
from slurm_advisor.domain.decision import Decision
from slurm_advisor.domain.job import Job, Role
from slurm_advisor.domain.observation import SpeedSample, SwitchLoad
from slurm_advisor.domain.placement import Placement, TaskAssignment
from slurm_advisor.domain.resources import Resources


def resources_to_dict(r: Resources) -> dict:
    return {"cpus": r.cpus, "gpus": r.gpus, "mem_mb": r.mem_mb}


def resources_from_dict(d: dict) -> Resources:
    return Resources(int(d["cpus"]), int(d["gpus"]), int(d["mem_mb"]))


def job_to_dict(j: Job) -> dict:
    return {"id": j.id, "type": j.type, "num_ps": j.num_ps, "num_workers": j.num_workers,
            "ps": resources_to_dict(j.ps_demand), "worker": resources_to_dict(j.worker_demand),
            "iterations": j.iterations, "submit_time": j.submit_time, "user": j.user,
            "model_size_mb": j.model_size_mb, "batch_size": j.batch_size}


def job_from_dict(d: dict) -> Job:
    return Job(id=str(d["id"]), type=str(d["type"]), num_ps=int(d["num_ps"]),
               num_workers=int(d["num_workers"]), ps_demand=resources_from_dict(d["ps"]),
               worker_demand=resources_from_dict(d["worker"]), iterations=float(d["iterations"]),
               submit_time=float(d.get("submit_time", 0.0)), user=str(d.get("user", "")),
               model_size_mb=d.get("model_size_mb"), batch_size=d.get("batch_size"))


def placement_to_list(p: Placement) -> list[list[str]]:
    return [[t.role.value, t.node] for t in p.tasks]


def placement_from_list(job_id: str, items: list) -> Placement:
    return Placement(job_id, tuple(TaskAssignment(Role(r), str(n)) for r, n in items))


def running_to_dict(rj: RunningJob) -> dict:
    return {"job": job_to_dict(rj.job), "placement": placement_to_list(rj.placement),
            "start_time": rj.start_time}


def running_from_dict(d: dict) -> RunningJob:
    job = job_from_dict(d["job"])
    return RunningJob(job, placement_from_list(job.id, d["placement"]),
                      float(d.get("start_time", 0.0)))


def node_to_dict(n: Node) -> dict:
    return {"name": n.name, "cpus": n.cpus, "gpus": n.gpus, "mem_mb": n.mem_mb,
            "switch": n.switch, "features": sorted(n.features), "partitions": sorted(n.partitions)}


def node_from_dict(d: dict) -> Node:
    return Node(str(d["name"]), int(d["cpus"]), int(d["gpus"]), int(d["mem_mb"]),
                d.get("switch"), frozenset(d.get("features", ())), frozenset(d.get("partitions", ())))


def sample_to_dict(s: SpeedSample) -> dict:
    return {"time": s.time, "subject": running_to_dict(s.subject),
            "neighbours": [running_to_dict(n) for n in s.neighbours],
            "nodes": [node_to_dict(n) for n in s.nodes], "speed": s.speed, "source": s.source,
            **({"switches": [[w.switch, w.gpu_busy, w.crossing] for w in s.switches]} if s.switches else {})}


def sample_from_dict(d: dict) -> SpeedSample:
    return SpeedSample(float(d["time"]), running_from_dict(d["subject"]),
                       tuple(running_from_dict(n) for n in d["neighbours"]),
                       tuple(node_from_dict(n) for n in d["nodes"]), float(d["speed"]),
                       str(d.get("source", "sim")),  # samples logged before switch loads have none
                       tuple(SwitchLoad(str(w), float(b), int(c)) for w, b, c in d.get("switches", ())))


def decision_to_dict(d: Decision) -> dict:
    return {"id": d.id, "time": d.time.isoformat(), "mode": d.mode, "action": d.action, "policy": d.policy,
            "model_version": d.model_version, "job_type": d.job_type, "user_id": d.user_id,
            "request": d.request, "layout": [list(t) for t in d.layout], "would": [list(t) for t in d.would],
            "max_nodes": d.max_nodes, "latency_ms": d.latency_ms, "fallback": d.fallback,
            "reason": d.reason, "extra": d.extra, **({} if d.evidence is None else {"evidence": d.evidence})}


def decision_from_dict(d: dict) -> Decision:
    return Decision(d["id"], datetime.fromisoformat(d["time"]), d["mode"], d["action"], d["policy"],
                    d["model_version"], d["job_type"], d["user_id"], d["request"],
                    tuple((r, n) for r, n in d["layout"]), tuple((r, n) for r, n in d["would"]),
                    d["max_nodes"], d["latency_ms"], d["fallback"], d["reason"], d.get("extra", {}),
                    d.get("evidence"))
