"""Whether to start a job now: hold it when the fitted speed model expects it to crawl.

Every placement rule starts a job as soon as it fits somewhere. When the cluster is busy,
"somewhere" can be a placement scattered over many shared nodes, on which the job runs a
fraction of its speed for its whole life, and slows its neighbours. Waiting for room that
holds it on few quiet nodes is often worth more than starting now (Slurm users do this by
hand with ``--nodes``).

``PatientPolicy`` wraps any placement rule (the network or a heuristic): it asks the fitted
speed model for the job's speed on the proposed placement and for its speed alone on its most
consolidated placement, and holds the job when the ratio is below ``patience``. It holds only
proposals that span more nodes than the job needs: on Slurm a hold is a node-count cap, which
can consolidate a job but cannot choose its neighbours (and the speed model's verdicts on
interference alone are the ones most prone to error). It never holds a job on an idle cluster
(nothing would free up), and it uses only the learned speed model, never the ground truth:
training picks ``patience`` by replaying the training trace.

A hold must also pay for the job itself: the time until running jobs are expected to leave
room for the consolidated placement, plus the run there, must be shorter than the run on the
proposal now. A running job is expected to end after its iterations at its predicted speed
alone (it is usually slower, so waits come out short: the check errs towards holding, which
``patience`` already bounds). Without this check a fixed threshold holds jobs just as long on
a cluster that frees up in minutes as on one that stays full for hours.
"""
from __future__ import annotations

import itertools
import math
import threading

import numpy as np

from slurm_advisor.domain import ClusterSnapshot, Job, Placement, RunningJob
from slurm_advisor.policies.base import Hold, Policy
from slurm_advisor.policies.load_index import LoadIndex
from slurm_advisor.policies.slurm_default import SlurmDefaultPolicy
from slurm_advisor.policies.speed import SpeedEnsemble, SpeedPredictor
from slurm_advisor.slurm import cons_tres

# Candidate patience levels training chooses from (0: never hold, the plain rule).
PATIENCE_LEVELS = (0.0, 0.3, 0.5, 0.7, 0.85)


class PatientPolicy:
    def __init__(self, inner: Policy, speed: SpeedPredictor, patience: float):
        self.inner, self.speed, self.patience = inner, speed, patience
        # asked once: a runtime protocol check walks the class's attributes, too slow per candidate
        self._predicts_after = isinstance(speed, SpeedEnsemble)
        self.name = inner.name
        self._alone: dict[tuple, tuple[float, int]] = {}
        self._empty_choice: dict[tuple, Placement | None] = {}  # job shape -> Slurm's choice on the empty cluster
        self._end_of: dict[int, float] = {}         # id(running job) -> expected end
        self._pinned: dict[int, RunningJob] = {}
        self._largest: tuple[object, np.ndarray] = (None, np.zeros(3, dtype=np.int64))  # (layout, its largest node)
        # The daemon's ready answers (daemon/ready.py) compute in a thread of their own beside the
        # requests: the caches keyed by id() must not be pruned while another thread fills them.
        self._cache_lock = threading.RLock()

    def place(self, snapshot: ClusterSnapshot, job: Job, rng: np.random.Generator) -> Placement | Hold | None:
        placement = self.inner.place(snapshot, job, rng)
        if self.patience <= 0 or not snapshot.running_jobs or isinstance(placement, Hold):
            return placement
        if placement is None:
            # The inner rule found nothing, so the advisor's fallback will start the job where
            # Slurm would: that placement gets the same check (None lets the fallback place it).
            fallback = SlurmDefaultPolicy().place(snapshot, job)
            return None if fallback is None else self.hold(snapshot, job, fallback)
        return self.hold(snapshot, job, placement) or placement

    def warm(self, snapshot: ClusterSnapshot) -> None:
        """Fill the caches a hold check reads for ``snapshot``'s running jobs (their expected
        ends): the daemon calls it from its refresh thread, so that no request pays them. Cold,
        a hold check that searches the running jobs' ends costs a speed prediction per running
        job shape: 86 ms at 1,000 nodes and 213 ms at 10,000 (``advice_latency.py --breakdown``) once
        after a start or a model swap, inside the hook's wait. The predictions run outside the
        cache lock, so a request meanwhile never waits for them."""
        if self.patience <= 0 or not snapshot.running:
            return
        known = self._end_of
        for rj in snapshot.running:
            if id(rj) not in known:
                self.alone(snapshot, rj.job)
        self._ends(snapshot)

    def hold(self, snapshot: ClusterSnapshot, job: Job, placement: Placement) -> Hold | None:
        """A Hold if waiting for a consolidated placement pays, else None (start on ``placement``)."""
        spans = len(placement.nodes())
        if spans <= self._fewest_possible(snapshot, job) or spans <= self.fewest(snapshot, job):
            return None  # already as consolidated as it can be: a node cap could not do better
        alone, fewest = self.alone(snapshot, job)
        if not math.isfinite(alone):
            return None
        now_speed = self.speed.predict(snapshot, job, placement)
        share = now_speed / alone
        if share >= self.patience:
            return None
        wait, later_speed = self.consolidated_later(snapshot, job, fewest)
        if not wait + job.iterations / later_speed < job.iterations / now_speed:
            return None  # waiting would not pay even for this job
        return Hold(f"predicted speed on {placement.node_list()} is {share:.0%} of the job's speed "
                    f"alone (patience {self.patience:.0%}); on {fewest} node(s) in about {wait / 60:.0f} min "
                    f"it would finish sooner: waits for that placement", max_nodes=fewest)

    def _fewest_possible(self, snapshot: ClusterSnapshot, job: Job) -> int:
        """A lower bound on the nodes any placement of the job needs (its total demand over the
        largest node's capacity, per resource). Slurm's choice on the empty cluster (``fewest``)
        uses at least as many, so a placement on no more nodes than this is never held, and the
        hold check skips that choice (a select over every node, as slurm-default's decision:
        0.1-0.3 ms at 1,000 nodes in ``decision_time.py``, for each job shape)."""
        layout, largest = self._largest
        if layout is not snapshot.layout:
            largest = snapshot.layout.capacity.max(axis=0) if len(snapshot.nodes) else np.zeros(3, dtype=np.int64)
            self._largest = (snapshot.layout, largest)
        total = job.total_demand()
        bound = 1
        for need, most in zip((total.cpus, total.gpus, total.mem_mb), largest.tolist()):
            if need > 0 and most > 0:
                bound = max(bound, -(-int(need) // int(most)))
        return bound

    def consolidated_later(self, snapshot: ClusterSnapshot, job: Job, fewest: int) -> tuple[float, float]:
        """How long until running jobs (in order of their expected ends) leave room for the job on
        ``fewest`` nodes, and its predicted speed there then.

        "Room" is what the hold's node cap asks of Slurm: slurm-default places the job with
        ``max_nodes=fewest``. The moment is searched on free-capacity arrays, never by removing
        running jobs one by one: first the end order is walked in growing chunks (numpy over the
        ended jobs' nodes) for the first moment at which the ``fewest`` nodes with the most task
        slots hold every task (a necessary condition), then slurm-default is asked at that
        moment, at later ones in growing steps, and by bisection in between. Both searches take
        room to grow as jobs end (free capacity only grows; Slurm's choice nearly always follows)."""
        running = snapshot.running
        if not running:
            return math.inf, 1.0
        ends = self._ends(snapshot)
        order = np.argsort(ends, kind="stable")  # stable: ties keep the running order, as sorted() did
        with LoadIndex.synced(snapshot) as load:
            entry = load.entry
            released = _Releases(snapshot.free_array(), lambda pos: entry(running[order[pos]]), len(order))
            step = released.first(lambda free: _slots_cover(free, job, fewest))
        if step is None:
            return math.inf, 1.0  # nothing running frees the room (other allocations hold it)
        slurm = SlurmDefaultPolicy()

        def placed(at: int) -> Placement | None:
            with LoadIndex.synced(snapshot):
                free = released.free_after(at)
            return slurm.place(snapshot.with_free(free), job, max_nodes=fewest)

        placement, fail, gap = placed(step), step - 1, 1
        while placement is None:  # gallop: Slurm's own choice needs more room than the slots say
            fail, step = step, min(len(order) - 1, step + gap)
            placement, gap = placed(step), 2 * gap
            if placement is None and step == len(order) - 1:
                return math.inf, 1.0
        while step - fail > 1:  # the first success after the last failure
            mid = (fail + step) // 2
            found = placed(mid)
            fail, step, placement = (fail, mid, found) if found is not None else (mid, step, placement)
        gone = [running[j] for j in order[:step + 1].tolist()]
        wait = max(0.0, float(ends[order[step]]) - snapshot.time)
        return wait, self._speed_after(snapshot, job, placement, gone)

    def _speed_after(self, snapshot: ClusterSnapshot, job: Job, placement: Placement,
                     gone: list[RunningJob]) -> float:
        if self._predicts_after:
            return self.speed.predict_after(snapshot, job, placement, gone)
        later = snapshot  # any other predictor: the snapshot itself, without the ended jobs
        for rj in gone:
            later = later.without_job(rj.job.id)
        return self.speed.predict(later, job, placement)

    def _ends(self, snapshot: ClusterSnapshot) -> np.ndarray:
        """``expected_end`` of every running job, in running order (cached per running job)."""
        running = snapshot.running
        with self._cache_lock:
            ends = np.array(list(map(self._end_of.get, map(id, running), itertools.repeat(math.nan))))
            for i in np.flatnonzero(np.isnan(ends)).tolist():
                rj = running[i]
                ends[i] = self._end_of[id(rj)] = self.expected_end(snapshot, rj)
                self._pinned[id(rj)] = rj  # keeps the id unique while it is cached
            if len(self._end_of) > 2 * len(running) + 1024:
                keep = set(map(id, running))
                self._end_of = {k: v for k, v in self._end_of.items() if k in keep}
                self._pinned = {k: v for k, v in self._pinned.items() if k in keep}
        return ends

    def expected_end(self, snapshot: ClusterSnapshot, rj: RunningJob) -> float:
        """When a running job should end: its iterations at its predicted speed alone."""
        return rj.start_time + rj.job.iterations / self.alone(snapshot, rj.job)[0]

    def alone(self, snapshot: ClusterSnapshot, job: Job) -> tuple[float, int]:
        """Predicted speed of the job by itself on an empty cluster, on as few nodes as possible,
        and that number of nodes."""
        key = _shape(job)
        found = self._alone.get(key)
        if found is None:
            placement = self._on_empty(snapshot, job, key)
            empty = ClusterSnapshot.empty(snapshot.nodes, snapshot.time)
            found = ((self.speed.predict(empty, job, placement), len(placement.nodes()))
                     if placement else (float("inf"), 0))
            self._alone[key] = found  # one dict write: another thread may have written the same
        return found

    def fewest(self, snapshot: ClusterSnapshot, job: Job) -> int:
        """``alone``'s node count without its speed prediction (0: the job fits nowhere): whether
        a placement is already as consolidated as Slurm's on the empty cluster asks no more, and
        a prediction of a large job is the costlier half of ``alone``."""
        key = _shape(job)
        found = self._alone.get(key)
        if found is not None:
            return found[1]
        placement = self._on_empty(snapshot, job, key)
        return 0 if placement is None else len(placement.nodes())

    def _on_empty(self, snapshot: ClusterSnapshot, job: Job, key: tuple) -> Placement | None:
        """Slurm's choice for the job on the empty cluster, cached per job shape."""
        if key not in self._empty_choice:  # one dict write, as in alone
            self._empty_choice[key] = SlurmDefaultPolicy().place(ClusterSnapshot.empty(snapshot.nodes, snapshot.time), job)
        return self._empty_choice[key]

    def score_nodes(self, snapshot: ClusterSnapshot, job: Job) -> dict[str, float]:
        return self.inner.score_nodes(snapshot, job)


def _shape(job: Job) -> tuple:
    """What ``alone`` depends on: jobs of the same shape run alike by themselves."""
    return (job.type, job.num_ps, job.num_workers, job.ps_demand, job.worker_demand, job.model_size_mb,
            job.batch_size)


class _Releases:
    """Free capacity after the first k running jobs (in a given order) have ended, on arrays."""

    def __init__(self, free: np.ndarray, entry_at, count: int):
        self.free = np.asarray(free, dtype=np.int64)
        self.entry_at, self.count = entry_at, count  # entry_at(position): that job's contribution
        self._nodes = self._demand = self._steps = None
        self._upto = 0  # entries concatenated so far
        self._base, self._base_free = 0, self.free  # free capacity once positions < _base ended

    def _grow(self, count: int) -> None:
        """Concatenated (node, demand, step) of the first ``count`` entries, built lazily."""
        if count <= self._upto:
            return
        block = [self.entry_at(p) for p in range(self._upto, count)]
        nodes = np.concatenate([e.nodes for e in block])
        demand = np.concatenate([e.rows[:, :3] for e in block])
        steps = np.repeat(np.arange(self._upto, count), [len(e.nodes) for e in block])
        if self._nodes is not None:
            nodes, demand = np.r_[self._nodes, nodes], np.concatenate([self._demand, demand])
            steps = np.r_[self._steps, steps]
        self._nodes, self._demand, self._steps, self._upto = nodes, demand, steps, count

    def free_after(self, step: int) -> np.ndarray:
        """Free capacity once the jobs at positions 0..step have ended (from the last checkpoint
        at or before it: a search forward adds only the entries it passes)."""
        self._grow(step + 1)
        base, free = (self._base, self._base_free) if step + 1 >= self._base else (0, self.free)
        start = int(np.searchsorted(self._steps, base, side="left"))
        upto = int(np.searchsorted(self._steps, step, side="right"))
        free = free.copy()
        np.add.at(free, self._nodes[start:upto], self._demand[start:upto])
        return free

    def _advance(self, position: int) -> None:
        self._base_free, self._base = self.free_after(position - 1), position

    def first(self, holds) -> int | None:
        """The first step after which ``holds(free)`` is true (taken to stay true), or None."""
        count, lo, chunk = self.count, 0, 16
        while lo < count:
            hi = min(count - 1, lo + chunk - 1)
            if holds(self.free_after(hi)):
                while lo < hi:
                    mid = (lo + hi) // 2
                    lo, hi = (lo, mid) if holds(self.free_after(mid)) else (mid + 1, hi)
                return lo
            self._advance(hi + 1)
            lo, chunk = hi + 1, 2 * chunk
        return None


def _slots_cover(free: np.ndarray, job: Job, fewest: int) -> bool:
    """Whether the ``fewest`` nodes with the most task slots for the job hold all its tasks:
    necessary for Slurm to place it on that few nodes."""
    slots = np.minimum(cons_tres.job_slots(free, job), job.num_tasks)
    top = np.partition(slots, len(slots) - fewest)[len(slots) - fewest:] if len(slots) > fewest else slots
    return int(top.sum()) >= job.num_tasks
