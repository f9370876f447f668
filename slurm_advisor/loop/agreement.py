"""Job by job: what the loop ran (as the daemon recorded it from the queue) against what the
simulator plays for the same jobs (issue 40: "job by job on nodes").

A job is compared by its wait (start less submission: the loop's queue and the simulator run on
clocks with different origins) and its node set. Both sides run the jobs as submitted
(``loop.hook.as_submitted``), so the job ids are Slurm's on both.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from slurm_advisor.advisor import Advisor
from slurm_advisor.domain import Job, Node, SpeedSample
from slurm_advisor.sim.engine import Simulation
from slurm_advisor.sim.metrics import SimResult
from slurm_advisor.speedmodels.base import SpeedModel
from slurm_advisor.store import Store

SAME_START_S = 1.0  # waits closer than this are the same start (the loop's clock is epoch seconds)


@dataclass(frozen=True)
class Ran:
    wait: float               # seconds from submission to start
    nodes: frozenset[str]


def recorded(db: str) -> dict[str, Ran]:
    """Every job the daemon recorded a start of in the store ``db``, by Slurm job id."""
    with Store.open(db, create=False) as store:
        return {o.job_id: Ran(o.start_time - o.submit_time, frozenset(o.nodes)) for o in store.load_outcomes()
                if o.start_time is not None and o.submit_time is not None}


def simulated(nodes: Sequence[Node], jobs: Sequence[Job], advisor: Advisor, truth: SpeedModel,
              seed: int = 0) -> tuple[SimResult, dict[str, Ran]]:
    """The simulator's result for ``jobs`` and what each job ran on, by job id."""
    placed: dict[str, frozenset[str]] = {}
    result = Simulation(nodes, jobs, advisor, truth, seed=seed, recorder=_first_nodes(placed)).run()
    return result, {r.job_id: Ran(r.start - r.submit, placed[r.job_id]) for r in result.records}


def _first_nodes(placed: dict[str, frozenset[str]]) -> Callable[[list[SpeedSample]], None]:
    """A recorder that keeps each job's nodes from its first sample (taken when it starts)."""
    def record(samples: list[SpeedSample]) -> None:
        for s in samples:
            placed.setdefault(s.subject.job.id, frozenset(s.subject.placement.nodes()))
    return record


def agreement(loop: dict[str, Ran], sim: dict[str, Ran]) -> dict[str, float | int]:
    """Over the jobs both ran: how many, and the shares with the same nodes and the same start."""
    both = sorted(set(loop) & set(sim))
    same_nodes = sum(loop[j].nodes == sim[j].nodes for j in both)
    same_start = sum(abs(loop[j].wait - sim[j].wait) < SAME_START_S for j in both)
    n = len(both)
    return {"jobs": n, "same_nodes": round(same_nodes / n, 3) if n else float("nan"),
            "same_start": round(same_start / n, 3) if n else float("nan")}
