"""Search with the learned model: weigh whole candidate placements, and "hold", by what the fitted
speed ensemble predicts they cost, and take one only when every member of the ensemble agrees
it beats Slurm's own choice.

The network proposes one placement per job, task by task, and the holding rule
(``patience``) decides apart whether to start it. ``SearchPolicy`` instead puts every proposal
side by side -- Slurm's own choice (the base policy), the trained network's, every baseline's
(``slurm-topo``'s consolidation under the fewest switches, ``lif``, ``tetris``, ``pack``,
``spread``), the base with the job's PS tasks moved onto its busiest worker node, each only if
it spans no more nodes than the base -- and "hold"
(wait for the job's most consolidated placement, as ``PatientPolicy.consolidated_later``
estimates it), and scores each under every member ``m`` of the fitted ensemble by the job-time
it costs:

    cost_m(c) = iterations / s_m(job on c)
              + sum over running jobs n sharing a node with c:
                    remaining_n * (1 / s_m(n beside the job) - 1 / s_m(n now))
    cost_m(hold) = wait + iterations / s(job alone on its consolidated placement)

the first term is the job's own run time, the second what it adds to its neighbours' run
times (a running job's remaining iterations are its iterations less what it has done at its
predicted speed since it started: a live cluster logs no progress for every job). That is the
one-step rollout of Bertsekas' sense with the base policy as the heuristic: the job's start
and its neighbours' completions are projected, later arrivals are left to the base policy.
(A look-ahead over the later arrivals too, ``benchmarks/lookahead.py``, costs 40-300x the
time a decision and gained nothing consistent on validation traces.)
A candidate ``c`` replaces the base only if ``min_m (cost_m(base) - cost_m(c)) / own_m(base)``
exceeds ``margin`` (own_m: the job's own run time on the base under member m): a placement
only one fitted model likes is not taken, and under the model it uses the search is never
worse than its base. Holding is one candidate among the others, not a separate rule.

Cost per decision: the proposers' placements (each O(nodes touched) or, for the baselines
that scan the cluster, O(nodes)), one batch of the ensemble over the job's and its neighbours'
contexts (tens of rows), and the hold's wait search. It is the slower path (see
``benchmarks/decision_time.py``); the network alone is the cheaper one for sites whose
decision budget it does not fit.
"""
from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from slurm_advisor.domain import ClusterSnapshot, Job, Placement, Role, RunningJob, TaskAssignment
from slurm_advisor.policies.base import Hold, Policy
from slurm_advisor.policies.patience import PatientPolicy
from slurm_advisor.policies.speed import SpeedEnsemble, WhatIf

DEFAULT_MARGIN = 0.02  # the least relative gain on the job's own run time, under every member
PROPOSERS = ("slurm-topo", "lif", "tetris", "pack", "spread")  # beside Slurm's choice and the network's


def search_over(network: Policy, speed, lif_profile=None, *, hold: bool = True) -> SearchPolicy:
    """The search as deployed: slurm-default as the base; the trained network and every baseline
    of ``PROPOSERS`` (``lif`` with the profile fitted beside the model) as proposers."""
    from slurm_advisor.policies import make_policy
    from slurm_advisor.policies.lif import InterferenceProfile, LifPolicy
    from slurm_advisor.policies.slurm_default import SlurmDefaultPolicy

    proposers = [network, *(LifPolicy(lif_profile or InterferenceProfile()) if name == "lif" else make_policy(name)
                            for name in PROPOSERS)]
    return SearchPolicy(SlurmDefaultPolicy(), proposers, speed, hold=hold)


class SearchPolicy:
    name = "search"

    def __init__(self, base: Policy, proposers: Sequence[Policy], speed, *, margin: float = DEFAULT_MARGIN,
                 hold: bool = True):
        if not isinstance(speed, SpeedEnsemble):
            raise TypeError("search needs a speed ensemble (policies.speed.SpeedEnsemble)")
        self.base, self.proposers, self.speed, self.margin = base, tuple(proposers), speed, margin
        self.patience = PatientPolicy(base, speed, 1.0) if hold else None  # its wait estimate only
        self.last: dict[str, float] = {}  # the last decision's gain per candidate (explanations, tests)

    def warm(self, snapshot: ClusterSnapshot) -> None:
        if self.patience is not None:
            self.patience.warm(snapshot)  # the "hold" candidate's wait estimate
        # the running jobs by node and the jobs crossing each uplink, built over every running
        # job once here: the requests' snapshots (claims on top) patch them
        if snapshot.nodes:
            snapshot.jobs_on(snapshot.nodes[0].name)
        self.speed.warm(snapshot)

    def place(self, snapshot: ClusterSnapshot, job: Job, rng: np.random.Generator) -> Placement | Hold | None:
        base = self.base.place(snapshot, job, rng)
        if base is None or isinstance(base, Hold):
            return base
        named = self._candidates(snapshot, job, base, rng)
        costs, own_times = self.costs(snapshot, job, [p for _, p in named])  # [candidates, members]
        own = own_times[0]  # the job's own run time on the base (row 0), per member
        gain = (costs[0] - costs) / own
        hold = self._hold(snapshot, job, base, costs[0], own)
        worst = gain.min(axis=1)
        self.last = {name: float(w) for (name, _), w in zip(named, worst)}
        best = int(np.argmax(worst))
        if hold is not None:
            self.last["hold"] = hold[0]
            if hold[0] > max(self.margin, float(worst[best])):
                return hold[1]
        return named[best][1] if best and worst[best] > self.margin else base

    def score_nodes(self, snapshot: ClusterSnapshot, job: Job) -> dict[str, float]:
        return self.base.score_nodes(snapshot, job)

    # -- candidates --------------------------------------------------------------------------
    def _candidates(self, snapshot, job, base: Placement, rng) -> list[tuple[str, Placement]]:
        """(name, placement) for the base first, then each distinct proposal that honours the job's
        request (the advisor would refuse one that does not) on no more nodes than the base: a placement over more nodes than Slurm's leaves fragments that the jobs behind
        it queue for, which a one-step look-ahead does not see (on a validation trace, letting
        spread, tetris and lif spread jobs out made the search slower than slurm-default; a
        look-ahead of ten later arrivals with the true speeds spread jobs and lost too,
        ``benchmarks/lookahead.py``)."""
        out, seen = [(self.base.name, base)], {_shape(base)}
        proposals = [(p.name, p.place(snapshot, job, rng)) for p in self.proposers]
        proposals.append(("ps-beside-workers", _ps_beside_workers(snapshot, job, base)))
        width = len(base.nodes())
        for name, placement in proposals:
            if (isinstance(placement, Placement) and len(placement.nodes()) <= width
                    and _shape(placement) not in seen and snapshot.fits(job, placement)
                    and (job.request is None or not job.request.violations(snapshot, placement))):
                seen.add(_shape(placement))
                out.append((name, placement))
        return out

    def _hold(self, snapshot, job, base: Placement, base_cost: np.ndarray, own: np.ndarray):
        """(worst gain, Hold) for waiting for the job's consolidated placement, or None when the
        base is already as consolidated as a node cap can make it (or nothing frees the room)."""
        if self.patience is None or not snapshot.running_jobs:
            return None
        alone, fewest = self.patience.alone(snapshot, job)
        if not math.isfinite(alone) or len(base.nodes()) <= fewest:
            return None
        wait, later = self.patience.consolidated_later(snapshot, job, fewest)
        if not math.isfinite(wait):
            return None
        worst = float(((base_cost - (wait + job.iterations / later)) / own).min())
        return worst, Hold(f"search: waiting about {wait / 60:.0f} min for {fewest} node(s) beats "
                           f"{base.node_list()} under every fitted model", max_nodes=fewest)

    # -- costs -------------------------------------------------------------------------------
    def costs(self, snapshot: ClusterSnapshot, job: Job, placements: Sequence[Placement]
              ) -> tuple[np.ndarray, np.ndarray]:
        """[placements, members]: the job-seconds each placement costs (see the module doc), and
        the job's own run time on it."""
        now = snapshot.time
        per_candidate = [_sharing(snapshot, p, job.id) for p in placements]
        nbs = list({rj.job.id: rj for near in per_candidate for rj in near}.values())
        co_runners = {rj.job.id: _sharing(snapshot, rj.placement, rj.job.id) for rj in nbs}  # once each
        cases: list[WhatIf] = [((), [(rj, co_runners[rj.job.id]) for rj in nbs])]  # the neighbours now
        for p, near in zip(placements, per_candidate):  # the job started on p: it and its neighbours
            subject = RunningJob(job, p, now)
            cases.append(((subject,), [(subject, near), *((rj, [*co_runners[rj.job.id], subject]) for rj in near)]))
        speeds = np.maximum(np.exp(self.speed.log_speeds_what_if(snapshot, cases)), 1e-9)  # [members, asked]
        at = {rj.job.id: i for i, rj in enumerate(nbs)}
        remaining = np.stack([_remaining(rj, now, speeds[:, at[rj.job.id]]) for rj in nbs], 1) if nbs else None
        out, own, col = [], [], len(nbs)
        for near in per_candidate:
            own.append(job.iterations / speeds[:, col])
            cost = own[-1]
            for j, rj in enumerate(near, start=1):
                i = at[rj.job.id]
                cost = cost + remaining[:, i] * (1.0 / speeds[:, col + j] - 1.0 / speeds[:, i])
            out.append(cost)
            col += 1 + len(near)
        return np.stack(out), np.stack(own)


def _remaining(rj: RunningJob, now: float, speed: np.ndarray) -> np.ndarray:
    """A running job's iterations still to run, per member (at least a tenth: it has not ended)."""
    return np.maximum(0.1 * rj.job.iterations, rj.job.iterations - max(0.0, now - rj.start_time) * speed)


def _sharing(snapshot: ClusterSnapshot, placement: Placement, job_id: str) -> list[RunningJob]:
    """The running jobs other than ``job_id`` with a task on a node of ``placement``, once each."""
    return list({o.job.id: o for n in placement.nodes() for o in snapshot.jobs_on(n)
                 if o.job.id != job_id}.values())


def _shape(p: Placement) -> tuple:
    """What the speed model sees of a placement: its tasks per node (the order does not matter)."""
    return tuple(sorted(p.per_node()))


def _ps_beside_workers(snapshot: ClusterSnapshot, job: Job, base: Placement) -> Placement | None:
    """The base with every PS task moved onto the node holding most of its workers (when it has
    room): a PS apart from its workers sends every update over the network."""
    if not job.num_ps or len(base.nodes()) < 2:
        return None
    target = max(base.per_node(), key=lambda c: c[2])[0]
    moved = [TaskAssignment(t.role, target if t.role is Role.PS else t.node) for t in base.tasks]
    placement = Placement(job.id, tuple(moved))
    return placement if snapshot.fits(job, placement) else None
