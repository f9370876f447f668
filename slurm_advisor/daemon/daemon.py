"""The daemon, assembled: source + queue -> state (refreshed in the background) -> advice service
-> decisions store, served on a Unix socket; speed reports and job outcomes go to the store too.
``daemon/build.py`` wires the real parts from the config and serves them; tests pass their own
source, queue and store.
"""
from __future__ import annotations

import dataclasses
import logging
import math
import pwd
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from slurm_advisor.cluster.base import ClusterSource
from slurm_advisor.daemon.allocation import Allocations
from slurm_advisor.daemon.batches import BatchWriter, report_line, report_of_line
from slurm_advisor.daemon.claims import Claims
from slurm_advisor.daemon.config import DaemonConfig
from slurm_advisor.daemon.evidence_worker import EvidenceWorker
from slurm_advisor.daemon.gc_pauses import FrozenHeap
from slurm_advisor.daemon.jobcomp import JobCompFile
from slurm_advisor.daemon.metrics import DaemonMetrics
from slurm_advisor.daemon.mode_file import ModeKeeper, mode_file_path
from slurm_advisor.daemon.pins import pin_of
from slurm_advisor.daemon.protocol import MODES, ProtocolError, parse_report
from slurm_advisor.daemon.queue import AdvisedJob
from slurm_advisor.daemon.ready import ReadyAnswers
from slurm_advisor.daemon.samples import live_sample
from slurm_advisor.daemon.server import Dispatcher
from slurm_advisor.daemon.service import AdviceService, job_from_request
from slurm_advisor.daemon.spool import SpoolChannel
from slurm_advisor.daemon.state import DaemonState, ModelFollower, Refresher
from slurm_advisor.daemon.writer import decision_writer
from slurm_advisor.domain.decision import Decision
from slurm_advisor.domain.outcome import Outcome
from slurm_advisor.domain.speed_report import SpeedReport
from slurm_advisor.errors import InputError
from slurm_advisor.plausible_speeds import TYPE_MIN_KNOWN, TypeSpeeds
from slurm_advisor.policies import FROM_MODEL
from slurm_advisor.store import Store

log = logging.getLogger("slurm_advisor.daemon")
_RECENT = 10_000  # decisions kept in memory for unpinning (the user's node counts, what a pin needs) and reports
_SWITCH_INTERVAL_S = 0.0005  # the GIL's switch interval while serving (see start)
_SERVER_SPOOL = Path("/var/lib/slurm-advisor/spool")  # the spool of a PostgreSQL store, by default
_TRACKED = 100_000  # advised jobs whose last recorded state is remembered (an outcome per change)
_SEED_SAMPLES = 2_000  # the newest live samples that give each job type its known speeds at start


class Daemon:
    def __init__(self, config: DaemonConfig, source: ClusterSource, queue, service: AdviceService,
                 store: Store | None, jobcomp: JobCompFile | None = None):
        self.config, self.source, self.queue, self.service = config, source, queue, service
        self.state = DaemonState(config.mode, Claims(config.claim_ttl_s))
        # Acknowledged means on disk: the spool's files, drained by the writers (daemon/spool.py).
        spool = spool_directory(config, store)
        self.writer = decision_writer(store, config.decision_log, spool)
        self.reports = BatchWriter(None if store is None else self._write_reports, what="report",
                                   describe=lambda item: f"of job {item[0].job_id}",
                                   spool=spool and SpoolChannel(spool, "report", report_line, report_of_line))
        self.evidence = EvidenceWorker(self.writer.put, capacity=config.evidence_queue)  # after each reply
        self.outcomes = BatchWriter(None if store is None else store.record_outcomes, what="outcome",
                                    describe=lambda o: f"of job {o.job_id}")
        self.store, self.jobcomp = store, jobcomp
        self.mode_keeper = ModeKeeper(mode_file_path(config, store), config.mode)  # read at start()
        self._advise_lock = threading.Lock()  # claims: one decision at a time sees the previous ones
        self._heap = FrozenHeap()  # full garbage collections out of the requests' way (gc_pauses)
        self.models = ModelFollower(config.models_dir, service, self._advise_lock, self.state.counters,
                                    policy=config.policy, default_model=config.model,
                                    canary_share=config.canary_share) \
            if config.policy in FROM_MODEL else None  # retrain's promotions, picked up without a restart
        self.refresher = Refresher(self.state, source, queue, period_s=config.refresh_s,
                                   pin_bound_s=config.pin_bound_s, node_counts=self._user_node_counts,
                                   pin_of=lambda decision: pin_of(self._decision(decision), job_from_request),
                                   on_advised=self._track_outcomes, after_refresh=self._after_refresh)
        # Answers computed ahead for repeat requests (daemon/ready.py); they live a few refreshes.
        self.ready = ReadyAnswers(config.socket, config.ready_keys, max(10.0, 3 * config.refresh_s),
                                  self._advise_lock, service.decide, self._ready_state) \
            if config.ready_keys else None
        self._recent: dict[str, Decision] = {}
        self._recent_lock = threading.Lock()
        self._tracked: dict[str, tuple[str, float, float]] = {}  # job id -> (state, start, end) recorded
        self.allocations = Allocations(queue, _TRACKED)  # Slurm's per-node task counts of started jobs
        self._open: dict[str, str | None] = {}  # advised jobs not seen to end: job id -> decision id
        self._last_received = 0.0  # reports' receipt times, strictly increasing: a report's key in the store
        # The snapshot each report came in under, by receipt time, until written: the spool keeps
        # the report only, and a job gone by the write has no sample in the latest (the loop lost 29
        # of 31 samples so); a report replayed after a crash gets the latest.
        self._report_views: dict[float, Any] = {}
        self._report_views_lock = threading.Lock()
        self.metrics = DaemonMetrics(self) if config.metrics_port else None
        self.type_speeds = TypeSpeeds()  # the speeds reported since start, per job type (plausible_speeds)

    # -- requests ---------------------------------------------------------------------------
    def advise(self, fields: Any, ready_key: Any = None) -> dict[str, Any]:
        self.state.counters.requests += 1
        if not isinstance(fields, dict):
            raise ProtocolError("advise: 'job' must be an object")
        with self.evidence.answering():  # no evidence computed meanwhile (it would share the GIL)
            return self._advise(fields, ready_key)

    def _advise(self, fields: dict[str, Any], ready_key: Any) -> dict[str, Any]:
        with self._advise_lock:
            snapshot = self.state.snapshot()
            if snapshot is None:
                return self._measured({"ok": True, "decision": None, "mode": self.state.mode, "action": "none",
                                       "reason": "no cluster snapshot yet"}, None)
            decided = self.service.decide(snapshot, fields, self.state.mode)
            reply, decision = decided.reply, decided.decision
            if decided.claim is not None:
                self.state.claims.add(decision.id, snapshot, decided.job, decided.claim, time.monotonic())
                if self.ready is not None:
                    self.ready.withdraw()  # before the reply leaves: the file's answers may overlap
        if self.ready is not None and ready_key is not None:
            self.ready.remember(ready_key, fields)
        self._decided(reply, decision)
        if decided.evidence is not None:  # after the decision: spooled after it, never instead of it
            self.evidence.submit(decision.id, decided.evidence)
        return self._measured(reply, decision)

    def taken(self, request: dict[str, Any]) -> None:
        """The hook used a ready answer (a datagram; the peer already checked): recorded and
        claimed as if it had been given over the socket, under the job's own fields."""
        fields = request.get("job")
        if self.ready is None or not isinstance(fields, dict):
            self.state.counters.ready_refused += 1
            return
        with self._advise_lock:
            answer = self.ready.take(request.get("answer"), request.get("hook"), request.get("seq"))
            if answer is None:
                return
            if answer.claim is not None:
                self.state.claims.add(answer.id, answer.snapshot, answer.job, answer.claim, time.monotonic())
        user = fields.get("user_id")
        decision = dataclasses.replace(
            answer.decision, time=datetime.now(UTC), request=dict(fields),
            user_id=user if isinstance(user, int) and not isinstance(user, bool) else None,
            extra={**answer.decision.extra, "ready": True})
        self.state.counters.requests += 1
        self.state.counters.ready_taken += 1
        self._decided(answer.reply, decision)
        if answer.evidence is not None:  # only an answer taken is a decision: its evidence now
            self.evidence.submit(decision.id, answer.evidence)
        self._measured(answer.reply, decision)

    def _decided(self, reply: dict[str, Any], decision: Decision) -> None:
        self._remember(decision)
        self.writer.put(decision)  # on the spool, on disk, before the reply leaves: "acknowledged"
        counters = self.state.counters
        counters.decisions += 1
        counters.placed += reply["action"] == "place"
        counters.capped += reply["action"] == "cap"
        counters.slurms_choice += reply["action"] == "observe" and reply["mode"] != "observe"

    def _ready_state(self) -> tuple[Any, str] | None:
        """The ready answers' view, under the advise lock: (snapshot less claims, mode)."""
        snapshot = self.state.snapshot()
        return None if snapshot is None else (snapshot, self.state.mode)

    def _after_refresh(self) -> None:
        if self.models is not None:
            self.models.check()
        snapshot = self.state.latest()  # its running jobs are every request's (claims change free capacity only)
        if snapshot is not None:
            # In this thread, not the first request's: e.g. the running jobs' expected ends a hold
            # check reads (~0.2 s cold at 10,000 nodes), after a start, a model swap, new jobs.
            self.service.advisor.warm(snapshot)
            canary = self.service.canary
            if canary is not None:  # its share of the requests must not pay a cold cache either
                canary.advisor.warm(snapshot)
        self._heap.after_refresh()  # last: what the warm-up cached is frozen with the rest
        if self.ready is not None:
            self.ready.changed()

    def _measured(self, reply: dict[str, Any], decision: Decision | None) -> dict[str, Any]:
        if self.metrics is not None:
            self.metrics.observe(reply, decision)
        return reply

    def report(self, request: dict[str, Any], uid: int) -> dict[str, Any]:
        """A job's speed: checked, its owner checked against the last refresh, queued for the store."""
        self.state.counters.reports += 1
        try:
            parsed = parse_report(request)
            owner, decision = self.state.job(parsed.job_id)
            if owner is None:
                raise ProtocolError(f"report: job {parsed.job_id} is not running as far as the daemon knows "
                                    f"(it reads the queue every {self.config.refresh_s:g} s); retry later")
            if uid not in (0, owner):
                raise ProtocolError(f"report: uid {uid} is neither root nor the owner of job {parsed.job_id}")
            typed = self._typed_speed(parsed.job_id, parsed.iterations / parsed.seconds)
        except ProtocolError:
            self.state.counters.reports_refused += 1
            raise
        if typed is not None:
            self.type_speeds.add(*typed)
        now = self._last_received = max(time.time(), math.nextafter(self._last_received, math.inf))
        snapshot = self.state.latest()
        with self._report_views_lock:
            if len(self._report_views) >= _RECENT:  # the writer far behind: the oldest get the latest
                self._report_views.pop(next(iter(self._report_views)))
            self._report_views[now] = snapshot
        self.reports.put((SpeedReport(parsed.job_id, uid, parsed.iterations, parsed.seconds, now, decision, now),
                          snapshot))
        return {"ok": True}

    def _seed_type_speeds(self) -> None:
        """Each job type's known speeds from the store's newest live samples (a restart keeps
        judging reports by them); a store that cannot be read leaves only the absolute range."""
        if self.store is None:
            return
        try:
            newest = self.store.load_samples(source="live", limit=_SEED_SAMPLES, newest=True, skipped={})
        except InputError as exc:
            log.warning("known speeds not read (%s): reports are judged by the absolute range until "
                        "their types have %d", exc, TYPE_MIN_KNOWN)
            return
        self.type_speeds.seed(reversed(newest))

    def _typed_speed(self, job_id: str, speed: float) -> tuple[str, float] | None:
        """(job type, speed per worker) of a job the latest snapshot shows running; ProtocolError
        when the speed is implausible beside the type's known ones. None: no type to judge by."""
        snapshot = self.state.latest()
        running = None if snapshot is None else snapshot.running_job(job_id)
        if running is None:
            return None
        per_worker = speed / max(1, running.job.num_workers)
        problem = self.type_speeds.problem(running.job.type, per_worker)
        if problem is not None:
            raise ProtocolError(f"report: {problem}")
        return running.job.type, per_worker

    def switch_mode(self, mode: Any, reset: Any = False) -> dict[str, Any]:
        """Set ``mode``, kept across restarts; ``reset``: back to the config's, forgetting it."""
        if not isinstance(reset, bool):
            raise ProtocolError(f"mode: 'reset' must be true or false, not {reset!r}")
        if reset:
            mode = self.config.mode
        elif mode not in MODES:
            raise ProtocolError(f"mode: expected one of {', '.join(MODES)}, not {mode!r}")
        old = self.state.mode
        with self._advise_lock:
            self.state.set_mode(mode)
            if self.ready is not None:
                self.ready.withdraw()  # answers of the old mode must not be used
        warning = self.mode_keeper.keep(None if reset else mode)
        log.info("mode %s -> %s (%s)", old, mode, "the config's" if reset else "set at run time")
        keeper = self.mode_keeper.info()
        return {"ok": True, "mode": mode, "was": old, "mode_source": keeper["mode_source"],
                "mode_file": keeper["mode_file"], **({"warning": warning} if warning else {})}

    def health(self) -> dict[str, Any]:
        age = self.state.snapshot_age_s()
        return {"ok": True, "mode": self.state.mode, "snapshot_age_s": None if age is None else round(age, 3)}

    def _topology(self) -> dict[str, Any] | None:
        """The topology the source read last, with the blocks the advice follows (read at start)
        and how it sends a placement there: pins, pins in segments across blocks, or caps."""
        topo = getattr(self.source, "topology", None)
        service = self.service
        if service.blocks is None and service.pins:
            return topo
        rule = "caps: the blocks were not read" if not service.pins else (
            "pins within blocks, segments across them" if service.release and service.release.hook_sets_segment_size
            else "pins within blocks, caps across them")
        believed = service.blocks.describe() if service.blocks is not None else {"plugin": "block"}
        return {**(topo or {}), **believed, "placement": rule}

    def status(self) -> dict[str, Any]:
        snap = self.state.snapshot()
        return {**self.health(), **self.mode_keeper.info(), "policy": self.service.advisor.policy.name,
                "model": self.service.model_version, "model_problem": self.service.model_problem,
                "canary": self.service.canary and self.service.canary.version,
                "canary_share": self.service.canary and self.service.canary.share,
                "source": self.source.name,
                "slurm_release": None if self.service.release is None else str(self.service.release),
                "topology": self._topology(),
                "nodes": 0 if snap is None else len(snap.nodes), "claims": len(self.state.claims),
                "uptime_s": round(time.time() - self.state.started_at, 1),
                "decisions_written": self.writer.written, "decisions_dropped": self.writer.dropped,
                "decision_writer_restarts": self.writer.restarts,
                "reports_written": self.reports.written, "reports_dropped": self.reports.dropped,
                **{f"{what}_{count}": getattr(writer, count) for what, writer in
                   (("decisions", self.writer), ("reports", self.reports))
                   for count in ("spooled", "spool_failed", "spool_damaged")},
                **{f"evidence_{n}": getattr(self.evidence, n) for n in ("recorded", "dropped", "failed", "queued")},
                "outcomes_written": self.outcomes.written, "policy_errors": self.service.advisor.errors,
                **vars(self.state.counters),
                **({} if self.ready is None else {"ready_published": self.ready.published,
                                                  "ready_unknown": self.ready.unknown,
                                                  "ready_keys_ignored": self.ready.ignored_keys})}

    # -- life cycle -------------------------------------------------------------------------
    def start(self) -> None:
        # The request loop shares the GIL with other threads: the default 5 ms switch interval would let one hold it that long.
        sys.setswitchinterval(_SWITCH_INTERVAL_S)
        self.state.set_mode(self.mode_keeper.restore())  # a mode set at run time outlives a restart
        if self.store is not None and self.jobcomp is not None:
            try:  # advised jobs whose end a previous run did not see: the completion file may have it
                self._open.update((o.job_id, o.decision_id) for o in self.store.load_outcomes(final=False))
            except InputError as exc:
                log.error("cannot read open outcomes: %s", exc)
        if self.metrics is not None:
            self.metrics.start(self.config.metrics_address, self.config.metrics_port)
        self._seed_type_speeds()
        self.mode_keeper.start()
        for writer in (self.writer, self.reports, self.outcomes, self.evidence):
            writer.start()
        self.refresher.start()
        if self.ready is not None:
            self.ready.start()

    def stop(self) -> None:
        if self.ready is not None:
            self.ready.stop()
        self.refresher.stop()
        if self.metrics is not None:
            self.metrics.stop()
        for writer in (self.evidence, self.writer, self.reports, self.outcomes):  # evidence before its writer
            writer.stop()
        self.mode_keeper.stop()  # a switch just before the stop is on disk for the next start
        if self.store is not None:
            self.store.close()
        self._heap.release()

    def dispatcher(self) -> Dispatcher:
        munge_socket = None if self.config.munge_socket is None else str(self.config.munge_socket)
        return Dispatcher(self, admin_uids=_uids(self.config.slurm_user), munge_socket=munge_socket)

    def _remember(self, decision: Decision) -> None:
        with self._recent_lock:  # the request loop, the refresher and the report writer all use it
            if len(self._recent) >= _RECENT:
                self._recent.pop(next(iter(self._recent)))
            self._recent[decision.id] = decision

    def _decision(self, decision_id: str | None) -> Decision | None:
        """A recent decision from memory; one from before a restart from the decision log."""
        if decision_id is None:
            return None
        with self._recent_lock:
            found = self._recent.get(decision_id)
        if found is not None or self.store is None:
            return found
        try:
            found = self.store.decision(decision_id)
        except InputError:
            return None
        if found is not None:
            self._remember(found)  # a job reports many times: read its decision once
        return found

    def _user_node_counts(self, decision_id: str) -> tuple[int | None, int | None]:
        found = self._decision(decision_id)
        return (found.request.get("min_nodes"), found.request.get("max_nodes")) if found else (None, None)

    def _write_reports(self, batch: list[tuple[SpeedReport, Any]]) -> int:
        """The writer thread's work: each report with the live sample built from it (or none).
        A report read back from the spool has no snapshot with it: it gets the one it came in
        under, or, replayed after a crash, the latest."""
        with self._report_views_lock:
            views = [self._report_views.pop(r.received_at, None) for r, _ in batch]
        pairs = [(r, live_sample(snapshot or view or self.state.latest(), r.job_id, r.window_end, r.speed,
                                 self._decision(r.decision_id)))
                 for (r, snapshot), view in zip(batch, views, strict=True)]
        return self.store.record_reports(pairs, skip_stored=True)  # a replayed spool holds some stored

    def _track_outcomes(self, advised: list[AdvisedJob]) -> None:
        """The refresher's hook: an outcome row per advised job, updated whenever Slurm's view
        changes, with Slurm's per-node task counts once it has started."""
        self.allocations.refresh()
        for job in advised:
            seen = (job.state, job.start_time, job.end_time)
            if self._tracked.get(job.job_id) == seen:
                continue
            if len(self._tracked) >= _TRACKED:
                self._tracked.pop(next(iter(self._tracked)))
            self._tracked[job.job_id] = seen
            nodes, tasks, read_from = self.allocations.of(job)
            outcome = Outcome(job.job_id, job.state, job.decision, job.submit_time or None,
                              job.start_time or None, job.end_time or None, nodes, tasks, read_from)
            self.outcomes.put(outcome)
            if outcome.final:
                self._open.pop(job.job_id, None)
            elif len(self._open) < _TRACKED:
                self._open[job.job_id] = job.decision
        if self.jobcomp is not None and self._open:
            for outcome in self.jobcomp.ended(self._open):
                self._open.pop(outcome.job_id, None)
                self.outcomes.put(self.allocations.attached(outcome))


def spool_directory(config: DaemonConfig, store: Store | None) -> Path | None:
    """Where the spool lives: none without a store that outlives the process (none, or SQLite
    in memory); the configured directory; beside a SQLite file; else under /var/lib."""
    if store is None or store.url_for_another_process() is None:
        return None
    if config.spool_dir is not None:
        return config.spool_dir
    db = store.sqlite_file()
    return _SERVER_SPOOL if db is None else db.with_name(db.name + ".spool")


def _uids(user: str) -> frozenset[int]:
    try:
        return frozenset({pwd.getpwnam(user).pw_uid})
    except KeyError:
        log.warning("slurm_user %r does not exist here: only root may ask for advice", user)
        return frozenset()
