"""The pure domain model: no I/O, no torch, no ORM rows."""
from slurm_advisor.domain.cluster import ClusterSnapshot, Node, RunningJob
from slurm_advisor.domain.job import Job, Role
from slurm_advisor.domain.observation import SpeedSample, SwitchLoad, running_switch_loads, switch_loads
from slurm_advisor.domain.placement import Placement, TaskAssignment
from slurm_advisor.domain.request import JobRequest
from slurm_advisor.domain.resources import Resources

__all__ = ["ClusterSnapshot", "Job", "JobRequest", "Node", "Placement", "Resources", "Role", "RunningJob",
           "SpeedSample", "SwitchLoad", "TaskAssignment", "running_switch_loads",
           "switch_loads"]
