"""What the daemon knows between requests: the snapshot, the claims, the mode — and the thread that
keeps them fresh.

Requests never wait on Slurm: while job_submit.lua runs, any call into slurmctld would wait for
the hook, so the snapshot is refreshed in the background and requests read the last one.
"""
from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from slurm_advisor.cluster.base import ClusterSource
from slurm_advisor.daemon.claims import Claims
from slurm_advisor.daemon.pins import Pin, stuck
from slurm_advisor.daemon.protocol import MODES
from slurm_advisor.daemon.queue import AdvisedJob, Listing, QueueError
from slurm_advisor.domain import ClusterSnapshot
from slurm_advisor.slurm.release import DEFAULT, Release

log = logging.getLogger("slurm_advisor.daemon")


@dataclass
class Counters:
    requests: int = 0
    decisions: int = 0
    placed: int = 0
    capped: int = 0
    slurms_choice: int = 0          # left to Slurm, unpinned: its own choice was the advice
    errors: int = 0
    released: int = 0               # pins and caps lifted, for either reason below
    released_taken: int = 0         # of which at once: the pinned nodes were taken (pins.stuck)
    claims_unseen_dropped: int = 0  # claims of jobs Slurm never listed (rejected, cancelled at once)
    refresh_failures: int = 0
    refreshes: int = 0              # refreshes done in full (snapshot, queue, releases, outcomes)
    reports: int = 0
    reports_refused: int = 0
    model_reloads: int = 0          # promoted models picked up without a restart
    model_reload_failures: int = 0  # models that did not load: at start (slurm-default serves) or
    #                                 promoted later (the current one kept)
    canary_promotions: int = 0      # canaries seen to end as the active model
    canary_rollbacks: int = 0       # canaries seen to end otherwise (rolled back by measured outcomes)
    ready_taken: int = 0            # decisions the hook took from the ready answers (no round trip)
    ready_refused: int = 0          # takes from a peer that may not ask for advice, or malformed
    connections_refused: int = 0    # over max_connections or a peer's quota: one error line, closed
    connections_dropped: int = 0    # past their deadline with a request unfinished or replies unread
    accept_failures: int = 0        # accept() failed (out of file descriptors): the listener rested


class DaemonState:
    def __init__(self, mode: str, claims: Claims):
        self.claims = claims
        self.counters = Counters()
        self._mode = mode
        self._snapshot: ClusterSnapshot | None = None
        self._snapshot_at = 0.0
        self._owners: dict[str, int] = {}       # Slurm job id -> uid, every started job
        self._decisions: dict[str, str] = {}    # Slurm job id -> decision id, advised jobs
        self._lock = threading.Lock()
        self.started_at = time.time()

    @property
    def mode(self) -> str:
        return self._mode

    def set_mode(self, mode: str) -> None:
        if mode not in MODES:
            raise ValueError(f"mode {mode!r}: expected one of {', '.join(MODES)}")
        self._mode = mode

    def publish(self, snapshot: ClusterSnapshot) -> None:
        with self._lock:
            self._snapshot, self._snapshot_at = snapshot, time.monotonic()

    def publish_jobs(self, listing: Listing) -> None:
        """Who owns each started job, and which decision each advised job runs under."""
        decisions = {j.job_id: j.decision for j in listing.advised}
        with self._lock:
            self._owners, self._decisions = listing.owners, decisions

    def job(self, job_id: str) -> tuple[int | None, str | None]:
        """(owner uid or None when the last refresh did not list it as started, decision id or None)."""
        with self._lock:
            return self._owners.get(job_id), self._decisions.get(job_id)

    def latest(self) -> ClusterSnapshot | None:
        """The latest snapshot as Slurm gave it (no claims subtracted)."""
        with self._lock:
            return self._snapshot

    def snapshot(self) -> ClusterSnapshot | None:
        """The latest snapshot less the claims of advised jobs not yet started."""
        with self._lock:
            snap = self._snapshot
        if snap is None:
            return None
        free = self.claims.apply(snap, time.monotonic())
        return snap if free is snap.free_array() else snap.with_free(free)

    def snapshot_age_s(self) -> float | None:
        with self._lock:
            return None if self._snapshot is None else time.monotonic() - self._snapshot_at


class Refresher:
    """Every ``period_s``: read the queue, then the cluster (so a job that started before the queue
    read is in the snapshot too), settle claims, release the pins that cannot hold their job, and
    hand the advised jobs to ``on_advised`` (the daemon records their outcomes).

    A pinned or capped job still pending is released (back to the user's own node counts) when
    its pin cannot hold it on the snapshot just read (``pins.stuck``), or else after
    ``pin_bound_s``, the bound that ``slurm-advisor release`` also keeps from cron while the daemon
    is down. The snapshot is read after the queue, so a job may have started in between and fill
    its own nodes: before releasing, the queue is read once more, and only the jobs still pending
    then are released (they were pending when the snapshot was read too). A job whose nodes are
    taken is thus released at the first refresh whose snapshot shows them taken: within one
    refresh period and the refresh's own time."""

    def __init__(self, state: DaemonState, source: ClusterSource, queue, *, period_s: float,
                 pin_bound_s: float, node_counts=lambda decision: (None, None),
                 pin_of=lambda decision: None, on_advised=lambda jobs: None, after_refresh=lambda: None):
        self.state, self.source, self.queue = state, source, queue
        self.period_s, self.pin_bound_s = period_s, pin_bound_s
        self.node_counts = node_counts  # decision id -> the user's own (min_nodes, max_nodes)
        self.pin_of: Callable[[str], Pin | None] = pin_of  # decision id -> what its pin needs, or None
        self.on_advised = on_advised
        self.after_refresh = after_refresh  # every refresh, failed or not (the daemon follows promotions)
        self._pins: dict[str, Pin | None] = {}  # decision -> its pin, for the jobs still waiting
        self._kept: set[str] = set()  # decisions whose exact pin was due but cannot be released
        self._stop = threading.Event()
        self._one_at_a_time = threading.Lock()  # the thread's refreshes and a direct call (tests, start)
        self._thread = threading.Thread(target=self._run, name="snapshot-refresh", daemon=True)

    def start(self) -> None:
        self.refresh_once()
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=self.period_s + 15)

    def _run(self) -> None:
        while not self._stop.wait(self.period_s):
            self.refresh_once()

    def refresh_once(self) -> None:
        with self._one_at_a_time:
            self._refresh()
            try:
                self.after_refresh()
            except Exception:  # never stop the refresh
                log.exception("after-refresh hook failed")

    def _refresh(self) -> None:
        read_at = time.monotonic()  # claims added after this could not be in the listing
        try:
            listing = self.queue.read()
            snapshot = self.source.snapshot()
        except Exception as exc:  # noqa: BLE001 -- a failed refresh keeps the last snapshot, logged
            self.state.counters.refresh_failures += 1
            log.error("snapshot refresh failed (%s); keeping the last one", exc)
            return
        self.state.publish(snapshot)
        self.state.publish_jobs(listing)
        advised = listing.advised
        now = time.monotonic()
        self.state.claims.settle((j.decision for j in advised if j.started), now)
        if listing.from_slurm:
            self._drop_unseen({j.decision for j in advised}, read_at, now)
        self._release(advised, snapshot)
        try:
            self.on_advised(advised)
        except Exception:  # outcomes are bookkeeping: never stop the refresh
            log.exception("recording outcomes failed")
        self.state.counters.refreshes += 1

    def _drop_unseen(self, listed: set[str], read_at: float, now: float) -> None:
        dropped = self.state.claims.drop_unseen(listed, read_at, now)
        if dropped:
            self.state.counters.claims_unseen_dropped += len(dropped)
            log.info("dropped the claims of %d decisions whose jobs Slurm never listed (rejected or "
                     "cancelled at submission): %s", len(dropped), ", ".join(dropped))

    def _release(self, advised: list[AdvisedJob], snapshot: ClusterSnapshot) -> None:
        now = time.time()
        pins, self._pins = self._pins, {}
        due: list[tuple[AdvisedJob, str | None]] = []  # (job, why its pin is stuck; None: the bound)
        stuck_now: dict[str, tuple[AdvisedJob, str]] = {}
        kept, self._kept = self._kept, set()
        for job in advised:
            if not job.waiting:
                continue
            pin = self._pin(job, pins)
            if pin is not None and pin.exact:
                self._keep_exact(job, now, kept)
                continue
            if now - job.submit_time > self.pin_bound_s:
                due.append((job, None))
                continue
            why = None if pin is None else stuck(snapshot, pin)
            if why is not None:
                stuck_now[job.job_id] = (job, why)
        if stuck_now:
            still = self._still_waiting()
            due += [(job, why) for job_id, (job, why) in stuck_now.items() if job_id in still]
        for job, why in due:
            try:
                self.queue.release(job, *self.node_counts(job.decision))
            except QueueError as exc:
                log.error("could not unpin job %s: %s", job.job_id, exc)
                continue
            self._pins.pop(job.decision, None)
            self.state.counters.released += 1
            self.state.counters.released_taken += why is not None
            log.info("unpinned job %s (decision %s): %s", job.job_id, job.decision,
                     why or f"pending {now - job.submit_time:.0f} s > {self.pin_bound_s:.0f} s")

    def _keep_exact(self, job: AdvisedJob, now: float, kept: set[str]) -> None:
        """An exact pin (-m arbitrary) is never released: Slurm refuses to change such a job's
        nodes. Said once, when its job has waited past the bound."""
        if now - job.submit_time <= self.pin_bound_s:
            return
        self._kept.add(job.decision)
        if job.decision not in kept:
            log.info("job %s (decision %s) pending %.0f s > %.0f s stays pinned: Slurm does not change "
                     "the nodes of a -m arbitrary job", job.job_id, job.decision, now - job.submit_time,
                     self.pin_bound_s)

    def _pin(self, job: AdvisedJob, known: dict[str, Pin | None]) -> Pin | None:
        """The job's pin, read once (a decision, parsed) and kept while its job waits."""
        if job.decision in self._pins:
            return self._pins[job.decision]
        if job.decision in known:
            pin = known[job.decision]
        else:
            try:
                pin = self.pin_of(job.decision)
            except Exception:  # an unreadable decision keeps the bound; never stop the refresh
                log.exception("cannot tell what the pin of job %s needs", job.job_id)
                pin = None
        self._pins[job.decision] = pin
        return pin

    def _still_waiting(self) -> set[str]:
        """The jobs still pending under a pin, read after the snapshot (none when the read fails)."""
        try:
            listing = self.queue.read()
        except Exception as exc:  # noqa: BLE001 -- no release this time; the next refresh tries again
            log.error("cannot read the queue again before releasing stuck pins (%s)", exc)
            return set()
        return {j.job_id for j in listing.advised if j.waiting}


class ModelFollower:
    """Follows retrain's promotions: when ``models_dir/active`` points at a version other than
    the one served, load it here (the refresher's thread, off the request path) and swap the
    service's advisor under the advise lock. A model that does not load is logged and counted,
    the current one kept, and not tried again until the pointer moves. ``active -> default``
    (a rollback past the first promotion) means ``default_model``: the config's ``model``, the
    packaged one unless set, as served before any promotion."""

    def __init__(self, models_dir: Path, service, lock: threading.Lock, counters: Counters, load=None,
                 policy: str = "learned", default_model: Path | None = None, canary_share: float = 0.0):
        self.models_dir, self.service, self.lock, self.counters = Path(models_dir), service, lock, counters
        # learned or learned-fast, with Slurm's own rule of the release the daemon read as fallback
        self._load = load or functools.partial(_learned_advisor, policy=policy, release=getattr(service, "release", None) or DEFAULT)
        self._tried: str | None = None  # the last version tried, loaded or not
        self.canary_share = canary_share  # 0: a canary pointer is ignored, the active model serves all
        self._canary_tried: str | None = None
        self._default_model = default_model
        self._default_version: str | None = None  # its hash, read once: the pointer is checked every refresh

    def check(self) -> bool:
        """Whether a new model was swapped in (the canary's comings and goings aside)."""
        from slurm_advisor.models.versions import DEFAULT, active_version

        target = active_version(self.models_dir)
        if target == DEFAULT:
            swapped = self._swap(self._default(), self._default_model, "the default model")
        else:
            swapped = target is not None and self._swap(target, self.models_dir / target,
                                                         f"promoted in {self.models_dir}")
        self._follow_canary()
        return swapped

    def _follow_canary(self) -> None:
        """Serve ``models_dir/canary`` to its share of the decisions while it exists; count how it ended."""
        from slurm_advisor.daemon.service import Canary
        from slurm_advisor.models.versions import canary_version

        target = canary_version(self.models_dir) if self.canary_share > 0 else None
        current = self.service.canary
        if target is None:
            self._canary_tried = None
            if current is not None:
                with self.lock:
                    self.service.canary = None
                promoted = current.version == self.service.model_version
                self.counters.canary_promotions += promoted
                self.counters.canary_rollbacks += not promoted
                log.info("canary %s ended: %s", current.version,
                         "it is the active model now" if promoted else f"rolled back, {self.service.model_version} serves all")
            return
        if (current is not None and current.version == target) or target == self._canary_tried:
            return
        self._canary_tried = target
        try:
            advisor = self._load(self.models_dir / target)
        except Exception as exc:  # noqa: BLE001 -- a canary that does not load serves nothing
            self.counters.model_reload_failures += 1
            log.error("canary %s does not load (%s); the active model serves every job", target, exc)
            return
        with self.lock:
            self.service.canary = Canary(target, advisor, self.canary_share)
        log.info("canary %s serves %.0f %% of the marked jobs", target, 100 * self.canary_share)

    def _default(self) -> str:
        from slurm_advisor.models.versions import model_version

        if self._default_version is None:
            self._default_version = model_version(self._default_model)
        return self._default_version

    def _swap(self, version: str, directory: Path | None, why: str) -> bool:
        if version in (self._tried, self.service.model_version):
            return False
        self._tried = version
        canary = self.service.canary
        try:  # a canary promoted is the model serving its share already
            advisor = canary.advisor if canary is not None and canary.version == version else self._load(directory)
        except Exception as exc:  # noqa: BLE001 -- any broken model: keep serving the current one
            self.counters.model_reload_failures += 1
            log.error("model %s (%s) does not load (%s); still serving %s", version, why, exc,
                      self.service.model_version)
            return False
        with self.lock:
            old, self.service.advisor, self.service.model_version = self.service.model_version, advisor, version
            self.service.model_problem = None
        self.counters.model_reloads += 1
        log.info("model %s -> %s (%s)", old, version, why)
        return True


def _learned_advisor(model_dir: Path, policy: str = "learned", release: Release = DEFAULT):
    from slurm_advisor.advisor import Advisor
    from slurm_advisor.policies.slurm_default import SlurmDefaultPolicy

    return Advisor(load_policy(policy, model_dir), fallback=SlurmDefaultPolicy(release),
                   predictor=speed_model_of(model_dir))


def speed_model_of(model_dir: Path | None):
    """The speed model of the model in ``model_dir`` (None: the packaged one), numpy only: what
    predicts each decision's evidence (daemon/evidence.py)."""
    from slurm_advisor.models import served

    return served.load(model_dir).speed_model


def load_policy(name: str, model_dir: Path | None):
    """The policy ``name`` from ``model_dir``, tried once on a probe job before it serves
    (``advisor.self_check``): any exception means the model is not served."""
    from slurm_advisor.advisor import self_check
    from slurm_advisor.policies import PolicyContext, make_policy

    policy = make_policy(name, PolicyContext(model_dir=model_dir))
    self_check(policy)
    return policy
