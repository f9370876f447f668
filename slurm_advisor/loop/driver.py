"""The loop's cycles: one per trace, through a real daemon on a Unix socket.

A cycle runs its trace in the simulator with ``DaemonPolicy`` deciding through the daemon's
``advise`` op (the daemon serves slurm-default until retrain promotes a model, then follows the
``active`` pointer as on a site), replays the jobs' speed reports through the ``report`` op and
their ends through the queue (outcomes), waits until the daemon's writers have stored them,
runs slurm-default on the same jobs in the plain simulator, scores the active speed model on
the cycle's live samples, and retrains (``slurm_advisor.retrain``): promote or keep.

Clocks: the daemon stamps decisions and reports with the wall clock, while a trace of days runs
in seconds, so the retrain's job mix (``retrain.data.recent_jobs``: the stored decisions, their
lengths from reports x outcomes) gets its arrival times back from the simulated clock. Traces
follow each other on one simulated clock (each starts when the previous one's last job ended).
"""
from __future__ import annotations

import math
import os
import pwd
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from slurm_advisor.advisor import Advisor
from slurm_advisor.daemon.client import Client
from slurm_advisor.daemon.config import DaemonConfig
from slurm_advisor.daemon.daemon import Daemon
from slurm_advisor.daemon.server import AdvisorServer
from slurm_advisor.daemon.service import AdviceService
from slurm_advisor.daemon.state import load_policy
from slurm_advisor.domain import Job, Node
from slurm_advisor.errors import InputError
from slurm_advisor.learned.hyper import Hyper
from slurm_advisor.loop.hook import DaemonPolicy, as_submitted
from slurm_advisor.loop.site import LoopQueue, LoopSource
from slurm_advisor.loop.timeline import Phase, Timeline, replay
from slurm_advisor.models import versions
from slurm_advisor.models.versions import model_version
from slurm_advisor.policies.slurm_default import SlurmDefaultPolicy
from slurm_advisor.sim.engine import Simulation
from slurm_advisor.sim.runner import build_advisor
from slurm_advisor.slurm.expressible import express
from slurm_advisor.speedmodels.base import SpeedModel
from slurm_advisor.store import Store

_NEVER_S = 86400.0  # the refresher's own period and the pin bound (a day: longer than any loop, within the
#                   config's ranges): the loop refreshes at every change
_FLUSH_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class LoopSettings:
    mode: str = "advise"            # the daemon's mode: advise, or enforce (holds become caps)
    seed: int = 0
    sample_noise: float = 0.02      # measurement noise of the reported speeds (log-normal sigma)
    margin: float = 0.02            # retrain's settings, as `slurm-advisor retrain` takes them
    holdout_fraction: float = 0.2
    holdout_max: int = 5000
    max_mape: float = 0.5
    recent_jobs: int = 300
    hyper: Hyper = field(default_factory=Hyper)
    retrain: bool = True            # False: serve and record only (slurm-default through the daemon throughout)
    model: Path | None = None       # serve this model directory from the start (as a site's config `model`)


class LoopDaemon:
    """The daemon assembled as ``build_daemon`` does, on the loop's source and queue, serving a
    temporary socket from a thread. It starts on slurm-default and follows promotions."""

    def __init__(self, nodes: Sequence[Node], db: str, models_dir: Path, mode: str, socket_dir: Path,
                 model: Path | None = None):
        self.source, self.queue = LoopSource(nodes), LoopQueue(origin=time.time())
        self.uid = os.getuid()
        config = DaemonConfig(socket=socket_dir / "advisor.sock", mode=mode, source="simulated", db=db,
                              models_dir=models_dir, policy="learned", refresh_s=_NEVER_S, pin_bound_s=_NEVER_S,
                              claim_ttl_s=_NEVER_S, client_timeout_s=600.0,
                              slurm_user=pwd.getpwuid(self.uid).pw_name).validated()
        # The loop's Slurm is the simulator's slurm-default: select/cons_tres without
        # topology/tree, so the daemon must compare with, and cap for, that Slurm.
        advisor, version = (Advisor(SlurmDefaultPolicy()), None) if model is None else \
            (Advisor(load_policy("learned", model), fallback=SlurmDefaultPolicy()), model_version(model))
        service = AdviceService(advisor, express, model_version=version, has_switches=False)
        self.daemon = Daemon(config, self.source, self.queue, service, Store.open(db))
        self.server = AdvisorServer(config.socket, self.daemon.dispatcher(), config.client_timeout_s)
        self.daemon.start()
        self._thread = threading.Thread(target=self.server.serve_forever, name="loop-daemon", daemon=True)
        self._thread.start()
        self.client = Client(config.socket, timeout_s=120.0)

    def refresh(self) -> None:
        """What the daemon's background refresh does, now (the loop's state just changed)."""
        self.daemon.refresher.refresh_once()

    def show(self, snapshot) -> None:
        self.source.show(snapshot)
        self.refresh()

    def call(self, op: str, **fields) -> dict:
        return self.client.call(op, **fields)

    def served(self) -> tuple[str, str | None]:
        """(policy name, model version) the daemon serves now."""
        service = self.daemon.service
        return service.advisor.policy.name, service.model_version

    def wait_stored(self, decisions: int, reports: int) -> None:
        """Until the writers have handled every decision and report put so far (and a little
        more for the outcomes of the last refresh: written every 0.5 s)."""
        d = self.daemon
        deadline = time.monotonic() + _FLUSH_TIMEOUT_S
        while (d.writer.written + d.writer.dropped < decisions or d.reports.written + d.reports.dropped < reports):
            if time.monotonic() > deadline:
                raise InputError("the daemon's writers did not store the cycle's records within "
                                 f"{_FLUSH_TIMEOUT_S:g} s (decisions {d.writer.written} + {d.writer.dropped} "
                                 f"dropped of {decisions}, reports {d.reports.written} + {d.reports.dropped} "
                                 f"dropped of {reports})")
            time.sleep(0.05)

    def close(self) -> None:
        self.client.close()
        self.server.shutdown()
        self.server.server_close()
        self.daemon.stop()


def _wait_outcomes(db: str, job_ids: set[str]) -> int:
    """Until every one of ``job_ids`` has a final outcome in the store; returns how many have."""
    deadline = time.monotonic() + _FLUSH_TIMEOUT_S
    with Store.open(db, create=False) as store:
        while True:
            final = {o.job_id for o in store.load_outcomes(final=True)} & job_ids
            if len(final) == len(job_ids) or time.monotonic() > deadline:
                return len(final)
            time.sleep(0.1)


class Loop:
    """``run(traces)`` -> one dict per cycle (see ``slurm-advisor loop --help`` for the keys)."""

    def __init__(self, nodes: Sequence[Node], truth: SpeedModel, db: str, models_dir: Path,
                 settings: LoopSettings, log: Callable[[str], None] = lambda line: None):
        self.nodes, self.truth, self.db = tuple(nodes), truth, db
        self.models_dir, self.settings, self.log = Path(models_dir), settings, log
        self._next_id = 1000
        self._clock = 0.0                       # where the next trace starts on the simulated clock
        self._submitted: dict[str, float] = {}  # decision id -> submit time on the simulated clock
        self._reports_taken = 0
        self._check_fresh()

    def _check_fresh(self) -> None:
        if versions.active_version(self.models_dir) is not None:
            raise InputError(f"{self.models_dir} already has an active model; the loop starts from none: "
                             "give it an empty or new --models-dir")
        with Store.open(self.db) as store:
            if store.active_model() is not None:
                raise InputError(f"the store {self.db} already has an active model; the loop starts from none: "
                                 "give it a fresh --db")

    def run(self, traces: Sequence[Sequence[Job]]) -> list[dict]:
        with tempfile.TemporaryDirectory(prefix="slurm-advisor-loop-") as sock_dir:
            site = LoopDaemon(self.nodes, self.db, self.models_dir, self.settings.mode, Path(sock_dir),
                              self.settings.model)
            try:
                cycles: list[dict] = []
                for number, trace in enumerate(traces, start=1):
                    cycles.append(self._cycle(site, number, trace, cycles[-1] if cycles else None))
                return cycles
            finally:
                site.close()

    # -- one cycle --------------------------------------------------------------------------
    def _cycle(self, site: LoopDaemon, number: int, trace: Sequence[Job], previous: dict | None) -> dict:
        started = time.time()
        site.refresh()  # a promotion by the last retrain is picked up here, as on a site
        policy, model = site.served()
        jobs = self._submitted_jobs(trace)
        self.log(f"cycle {number}: {len(jobs)} jobs through the daemon, serving {policy}"
                 f"{f' (model {model})' if model else ''}")
        before = site.daemon.state.counters.decisions
        result, phases, chosen = self._run_trace(site, jobs)
        sent, taken = replay(phases, result, show=site.show,
                             report=lambda p: self._report(site, p),
                             ended=site.queue.ended)
        site.refresh()
        counters = site.daemon.state.counters
        self._reports_taken += taken
        site.wait_stored(counters.decisions, self._reports_taken)
        advised = {j.job_id for j in site.queue.advised()}
        outcomes = _wait_outcomes(self.db, advised)
        baseline = Simulation(self.nodes, jobs, build_advisor("slurm-default", self.truth), self.truth,
                              seed=self.settings.seed).run()
        samples = self._cycle_samples(started)
        record = {"cycle": number, "jobs": len(result.records), "policy": policy, "model": model,
                  "avg_jct": _avg(result), "slurm_default_avg_jct": _avg(baseline),
                  "mape": _mape(self._model_dir(model), samples),
                  "decisions": counters.decisions - before, "slurm_chose": chosen, "reports": sent,
                  "reports_taken": taken, "samples": len(samples), "outcomes": outcomes, "advised": len(advised),
                  "samples_since": started}  # the store's clock: this cycle's samples are those from here on
        if previous is not None and previous.get("candidate"):
            previous["next_mape"] = _mape(self.models_dir / previous["candidate"], samples)
        self._clock += max((r.end for r in result.records), default=0.0)
        site.queue.origin += max((r.end for r in result.records), default=0.0)
        record.update(self._retrain(site) if self.settings.retrain else
                      {"promoted": False, "candidate": None, "retrain": None})
        record["seconds"] = round(time.time() - started, 1)
        return record

    def _model_dir(self, version: str | None) -> Path | None:
        """Where the served model ``version`` lives: the given model, or a version in models_dir."""
        model = self.settings.model
        if version and model is not None and version == model_version(model):
            return model
        return version and self.models_dir / version

    def _submitted_jobs(self, trace: Sequence[Job]) -> list[Job]:
        out = []
        for job in sorted(trace, key=lambda j: j.submit_time):
            out.append(as_submitted(job, self._next_id))
            self._next_id += 1
        return out

    def _run_trace(self, site: LoopDaemon, jobs: list[Job]) -> tuple:
        site.queue.clear()
        timeline = Timeline()

        def ask(snapshot, fields):
            site.show(snapshot)
            return site.call("advise", job=fields)

        def on_reply(job: Job, reply: dict) -> None:
            decision = reply.get("decision") if reply["action"] in ("place", "cap", "observe") else None
            site.queue.submit(job.id, site.uid, job.submit_time, job.num_tasks, decision,
                              observed=reply["action"] == "observe")
            if reply.get("decision"):
                self._submitted[reply["decision"]] = self._clock + job.submit_time

        policy = DaemonPolicy(ask, site.uid, on_reply=on_reply,
                              on_start=lambda job, p, t: site.queue.started(job.id, t, p.nodes()),
                              released=site.queue.released)
        sim = Simulation(self.nodes, jobs, Advisor(policy), self.truth, seed=self.settings.seed,
                         recorder=timeline.record, sample_noise=self.settings.sample_noise)
        timeline.bind(sim)
        result = sim.run()
        return result, timeline.phases(result), policy.slurm_chose

    @staticmethod
    def _report(site: LoopDaemon, phase: Phase) -> bool:
        reply = site.call("report", job_id=phase.job_id, iterations=phase.speed * phase.seconds,
                          seconds=phase.seconds)
        return bool(reply.get("ok"))

    def _cycle_samples(self, since: float) -> list:
        with Store.open(self.db, create=False) as store:
            return [s for s in store.load_samples(source="live") if s.time >= since]

    # -- retrain ----------------------------------------------------------------------------
    def _retrain(self, site: LoopDaemon) -> dict:
        from slurm_advisor.retrain.retrain import RetrainSettings, run_retrain

        s = self.settings
        settings = RetrainSettings(margin=s.margin, holdout_fraction=s.holdout_fraction, holdout_max=s.holdout_max,
                                   max_mape=s.max_mape, recent_jobs=s.recent_jobs, hyper=s.hyper,
                                   holds=s.mode == "enforce")  # judged as this daemon can serve it
        try:
            mix = self._job_mix(settings.recent_jobs)
            result = run_retrain(self.db, self.models_dir, self.nodes, settings, trace=mix, log=self.log,
                                 progress=False)
        except InputError as exc:
            self.log(f"retrain: {exc}")
            return {"promoted": False, "candidate": None,
                    "retrain": {"exit_code": 2, "reason": str(exc)}}
        self.log(f"retrain: {'promoted' if result.promoted else 'kept'}: {result.reason}")
        summary = result.summary()
        return {"promoted": result.promoted, "candidate": result.candidate,
                "retrain": {k: summary.get(k) for k in ("exit_code", "reason", "candidate_metrics",
                                                        "incumbent", "incumbent_metrics", "judge", "seconds")}}

    def _job_mix(self, limit: int) -> list[Job]:
        """The recent advised jobs as retrain reads them from the store, on the simulated clock."""
        from slurm_advisor.retrain.data import recent_jobs

        with Store.open(self.db, create=False) as store:
            mix = recent_jobs(store, limit)
        jobs = [j for j in mix.jobs if j.id in self._submitted]
        if not jobs:
            raise InputError("no advised jobs of this loop in the store to replay")
        t0 = min(self._submitted[j.id] for j in jobs)
        return sorted((replace(j, submit_time=self._submitted[j.id] - t0) for j in jobs),
                      key=lambda j: j.submit_time)


def _avg(result) -> float | None:
    value = result.summary().get("avg_jct")
    return None if value is None or not math.isfinite(value) else round(float(value), 1)


def _mape(model_dir: Path | None, samples: list) -> float | None:
    if model_dir is None or not samples:
        return None
    from slurm_advisor.retrain.evaluate import holdout_mape

    value = holdout_mape(Path(model_dir), samples)
    return round(float(value), 4) if math.isfinite(value) else None
