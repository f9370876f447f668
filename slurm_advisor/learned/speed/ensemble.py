"""The fitted site speed ensemble behind the SpeedModel and SpeedPredictor interfaces, whatever
computes its forward pass: torch while training (``fit.SiteSpeedModel``), numpy when
serving (``numpy_nets.NumpySiteNet``). No torch here.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence

import numpy as np

from slurm_advisor.domain import ClusterSnapshot, Job, Node, Placement, RunningJob, SpeedSample
from slurm_advisor.learned.speed import features as F
from slurm_advisor.learned.speed.vocab import TypeVocab


class SiteEnsemble:
    """The fitted ensemble: its prediction is the members' geometric mean. ``forward``: a batch
    of contexts -> log speeds [members, contexts]."""

    name = "learned-speed"
    local = True

    def __init__(self, forward: Callable[[F.Batch], np.ndarray], vocab: TypeVocab):
        self.forward, self.vocab = forward, vocab
        self.racks = F.RackLoads()  # the last snapshot's rack loads, kept across its questions

    def log_speeds_all(self, contexts: Sequence[F.JobContext]) -> np.ndarray:
        """[members, len(contexts)] log speeds."""
        return self.forward(F.Batch.of(contexts, self.vocab.n_slots))

    def log_speeds_what_if(self, snapshot: ClusterSnapshot,
                           cases: Sequence[tuple[tuple[RunningJob, ...], Sequence[tuple[RunningJob, Sequence[RunningJob]]]]]
                           ) -> np.ndarray:
        """[members, asked]: per case (the jobs started in it, then each asked job with the jobs
        sharing its nodes then), each asked job's log speed (``policies.speed.SpeedEnsemble``)."""
        nodes = _Nodes(snapshot)
        contexts = []
        for started, asked in cases:
            racks = self.racks(snapshot, add=started)
            contexts += [F.job_context(rj, near, nodes, self.vocab, racks) for rj, near in asked]
        return self.log_speeds_all(contexts)

    def warm(self, snapshot: ClusterSnapshot) -> None:
        """Build once what every question about ``snapshot`` reuses (its racks' loads)."""
        self.racks(snapshot)

    def speeds(self, nodes: Sequence[Node], running: Sequence[RunningJob],
               only: Collection[str] | None = None) -> dict[str, float]:
        targets = [rj for rj in running if only is None or rj.job.id in only]
        if not targets:
            return {}
        log_s = self.log_speeds_all(F.running_contexts(nodes, running, targets, self.vocab)).mean(0)
        return {rj.job.id: max(1e-9, float(math.exp(x))) for rj, x in zip(targets, log_s)}

    def predict(self, snapshot: ClusterSnapshot, job: Job, placement: Placement) -> float:
        """The speed of ``job`` if it starts on ``placement`` now."""
        return self.predict_after(snapshot, job, placement, ())

    def predict_after(self, snapshot: ClusterSnapshot, job: Job, placement: Placement,
                      gone: Iterable[RunningJob]) -> float:
        """As ``predict`` once the running jobs ``gone`` have ended."""
        return max(1e-9, float(np.exp(self._log_all(snapshot, job, placement, gone).mean())))

    def predict_all(self, snapshot: ClusterSnapshot, job: Job, placement: Placement,
                    gone: Iterable[RunningJob] = ()) -> np.ndarray:
        """Each member's predicted speed of ``job`` on ``placement`` (its spread: the doubt)."""
        return np.maximum(1e-9, np.exp(self._log_all(snapshot, job, placement, gone)))

    def predict_many(self, snapshot: ClusterSnapshot, job: Job, placements: Sequence[Placement]) -> list[float]:
        """``predict`` of each placement, in one forward pass (a decision's evidence)."""
        if not placements:
            return []
        contexts = [self._context(snapshot, job, p, []) for p in placements]
        return [max(1e-9, float(math.exp(x))) for x in self.log_speeds_all(contexts).mean(0)]

    def _log_all(self, snapshot, job, placement, gone) -> np.ndarray:
        return self.log_speeds_all([self._context(snapshot, job, placement, list(gone))])[:, 0]

    def _context(self, snapshot, job, placement, gone: list) -> F.JobContext:
        left = {id(rj) for rj in gone}
        seen: dict[str, RunningJob] = {}
        for n in placement.nodes():
            for rj in snapshot.jobs_on(n):
                if rj.job.id != job.id and id(rj) not in left:
                    seen[rj.job.id] = rj
        names = set(placement.nodes())
        for rj in seen.values():
            names.update(rj.placement.nodes())
        node_of = {n: snapshot.node(n) for n in names}
        subject = RunningJob(job, placement, snapshot.time)
        racks = self.racks(snapshot, add=(subject,), remove=gone)
        return F.job_context(subject, seen.values(), node_of, self.vocab, racks)

    def mape(self, samples: Sequence[SpeedSample]) -> float:
        contexts = [F.sample_context(s, self.vocab) for s in samples]
        y = np.log([s.speed for s in samples])
        return float(np.mean(np.abs(np.exp(self.log_speeds_all(contexts).mean(0) - y) - 1.0)))


class _Nodes(Mapping[str, Node]):
    """The snapshot's nodes by name, looked up on demand (never a dict over every node)."""

    def __init__(self, snapshot: ClusterSnapshot):
        self.snapshot = snapshot

    def __getitem__(self, name: str) -> Node:
        return self.snapshot.node(name)

    def __contains__(self, name: object) -> bool:
        return name in self.snapshot.layout.index

    def __iter__(self):
        return iter(self.snapshot.layout.index)

    def __len__(self) -> int:
        return len(self.snapshot.layout.index)
