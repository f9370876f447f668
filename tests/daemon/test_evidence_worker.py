"""Each decision's evidence is computed after its reply (daemon/evidence_worker.py): the reply never
waits for it, a full queue costs evidence and never a reply, and what is recorded is what
computing it at once on the decision's snapshot, by the deciding model, gives."""
from __future__ import annotations

import threading

from daemon_helpers import NODES, identity, make_daemon, marked

from slurm_advisor.advisor import Advisor
from slurm_advisor.daemon.batches import decision_line, decision_of_line
from slurm_advisor.daemon.evidence import Recorded
from slurm_advisor.daemon.evidence_worker import EvidenceWorker
from slurm_advisor.daemon.service import AdviceService
from slurm_advisor.domain import ClusterSnapshot
from slurm_advisor.policies.slurm_default import SlurmDefaultPolicy
from slurm_advisor.store import Store


class Gate:
    """A speed model whose predictions wait until ``release`` is set: the evidence, made slow."""

    def __init__(self, released: bool = False):
        self.entered, self.release = threading.Event(), threading.Event()
        if released:
            self.release.set()

    def predict_many(self, snapshot, job, placements):
        self.entered.set()
        assert self.release.wait(10), "the test never released the prediction"
        return [1.5 + len(p.nodes()) for p in placements]


def stored(daemon, decision_id: str):
    with Store.open(daemon.config.db, create=False) as store:
        return store.decision(decision_id)


def test_the_reply_does_not_wait_for_its_evidence_and_a_model_swapped_in_meanwhile_changes_none_of_it(tmp_path):
    gate = Gate()
    daemon = make_daemon(tmp_path)
    daemon.service.speed = (gate, "m1")
    daemon.start()
    try:
        first = daemon.advise(marked(workers=2))
        assert first["ok"] and gate.entered.wait(10)  # replied; the worker is predicting, held
        daemon.service.speed = (Gate(released=True), "m2")  # a promotion meanwhile
        second = daemon.advise(marked(workers=3))  # answered while the first's evidence is held
        assert second["ok"] and daemon.status()["evidence_queued"] == 1
        assert stored(daemon, first["decision"]) is None or stored(daemon, first["decision"]).evidence is None
        gate.release.set()
        assert daemon.evidence.drain(10)
    finally:
        gate.release.set()
        daemon.stop()
    # what computing it at once on the same snapshot by the same model records
    inline = AdviceService(Advisor(SlurmDefaultPolicy()), identity, speed=(Gate(released=True), "m1"))
    expected = inline.advise(ClusterSnapshot.empty(NODES), marked(workers=2), "advise")[1].evidence
    assert expected is not None and stored(daemon, first["decision"]).evidence == expected
    assert stored(daemon, second["decision"]).evidence["model"] == "m2"
    assert (daemon.evidence.recorded, daemon.evidence.dropped, daemon.evidence.failed) == (2, 0, 0)


def test_a_full_queue_drops_evidence_never_a_reply(tmp_path):
    gate = Gate()
    daemon = make_daemon(tmp_path, evidence_queue=1)
    daemon.service.speed = (gate, "m1")
    daemon.start()
    try:
        first = daemon.advise(marked(workers=1))
        assert gate.entered.wait(10)  # the worker holds the first one's evidence: the queue is empty
        burst = [daemon.advise(marked(workers=1)) for _ in range(2)]  # the queue holds one: one is dropped
        assert all(r["ok"] and r["decision"] for r in (first, *burst))
        assert daemon.status()["evidence_dropped"] == 1
        gate.release.set()
    finally:
        gate.release.set()
        daemon.stop()  # computes what is queued first
    assert stored(daemon, first["decision"]).evidence["model"] == "m1"
    kept = [stored(daemon, r["decision"]).evidence for r in burst]  # each stored; one's evidence "not recorded"
    assert sorted(e is None for e in kept) == [False, True] and all(e["model"] == "m1" for e in kept if e)
    assert (daemon.evidence.recorded, daemon.evidence.dropped) == (2, 1)


def test_a_full_queue_keeps_a_uniform_sample_of_the_burst_not_its_start():
    """1,000 decisions in a burst the worker cannot touch, 100 places: the kept ones are spread
    over the whole burst (before the reservoir: the first 100, none from its second half)."""
    worker = EvidenceWorker(lambda _: None, capacity=100, seed=7)  # not started: it computes none
    accepted = sum(worker.submit(f"d-{i}", dict) for i in range(1000))
    kept = [int(d.split("-")[1]) for d, _ in worker._queue]
    assert worker.queued == 100 and worker.dropped == 900 and accepted >= 100
    quarters = [sum(q * 250 <= i < (q + 1) * 250 for i in kept) for q in range(4)]
    assert all(10 <= n <= 40 for n in quarters), quarters  # 25 each expected


def test_the_stop_records_what_is_queued(tmp_path):
    daemon = make_daemon(tmp_path)
    daemon.start()
    replies = [daemon.advise(marked(workers=1)) for _ in range(5)]  # the worker waits for a quiet moment
    daemon.stop()
    assert all(stored(daemon, r["decision"]).evidence is not None for r in replies)
    assert (daemon.evidence.recorded, daemon.evidence.dropped) == (5, 0)
    # ten lines on the spool, five of them decisions: decisions_spooled counts those only
    assert (daemon.writer.spooled, daemon.writer.spool.appender.appended) == (5, 10)


def test_the_stop_drops_what_it_cannot_finish_and_says_so(caplog):
    recorded: list[Recorded] = []
    worker = EvidenceWorker(recorded.append, quiet_s=0.0, poll_s=0.001)
    held, entered = threading.Event(), threading.Event()

    def slow():
        entered.set()
        held.wait(10)
        return {"v": 1}

    worker.start()
    worker.submit("d-1", slow)
    assert entered.wait(10)
    worker.submit("d-2", lambda: {"v": 1})
    worker.stop(stop_s=0.05)
    held.set()
    assert worker.dropped == 1 and "1 decisions left without evidence" in caplog.text
    assert not worker.submit("d-3", lambda: {"v": 1}) and worker.dropped == 2  # stopped: nothing queued


def test_a_failed_computation_costs_its_evidence_only():
    recorded: list[Recorded] = []
    worker = EvidenceWorker(recorded.append, quiet_s=0.0, poll_s=0.001)
    worker.start()
    worker.submit("d-1", lambda: 1 / 0)
    worker.submit("d-2", lambda: {"v": 1})
    assert worker.drain(10)
    worker.stop()
    assert recorded == [Recorded("d-2", {"v": 1})] and worker.failed == 1


def test_the_evidence_line_follows_its_decision_through_the_spool():
    item = Recorded("d-00000000000a", {"v": 1, "model": "m1", "layouts": []})
    assert decision_of_line(decision_line(item)) == item
