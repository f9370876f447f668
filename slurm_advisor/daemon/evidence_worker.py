"""Each decision's evidence (daemon/evidence.py), computed after its reply, off the hook's wait.

The request path only appends the decision's :class:`~slurm_advisor.daemon.evidence.Pending` to a
bounded deque (no lock, no wake-up: a hand-over that woke a thread took the GIL from the request
loop once a request, as the decision writer found). A worker thread looks every ``poll_s``, and
starts nothing while a request is answered nor within ``quiet_s`` of its end: the worker shares the GIL
with the request loop, and evidence computed beside a request (0.5 ms at 1,000 nodes) would cost
that request about as much as computing it inline did. So a burst is answered first and its
evidence follows once the burst is over; the worker never takes the advise lock (the snapshot and
speed model it reads were captured with the decision and nothing changes them).

What it computes goes to ``record`` (the daemon's decision writer: spooled after the decision,
applied to ``decisions.evidence`` by its id). A decision whose evidence never comes has none in
the store ("not recorded", as for a decision from before evidence existed): the queue was full
(``capacity`` pending, under a long burst), the computation failed, or the daemon stopped or died
first. A full queue keeps a uniform sample of the burst (reservoir sampling over the decisions
since the queue was last empty), not its first ``capacity`` decisions: what ``shadow`` judges
stays representative of the burst, late decisions as much as early ones. Each is counted (``dropped``, ``failed``); a reply is never held up or lost for it. At the
stop, what is queued is computed for up to ``stop_s``, the rest dropped and counted.
"""
from __future__ import annotations

import logging
import random
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from slurm_advisor.daemon.evidence import Pending, Recorded

log = logging.getLogger("slurm_advisor.daemon")
CAPACITY = 1000   # decisions waiting for their evidence; each holds its snapshot's free array (24 KB at 1,000 nodes)
QUIET_S = 0.005   # no request for this long: the worker may take the GIL
POLL_S = 0.02     # how often the worker looks (a sleep releases the GIL)
STOP_S = 5.0      # at the stop, what is queued is computed for this long at most


class EvidenceWorker:
    def __init__(self, record: Callable[[Recorded], None], *, capacity: int = CAPACITY,
                 quiet_s: float = QUIET_S, poll_s: float = POLL_S, seed: int | None = None):
        self.record, self.capacity, self.quiet_s, self.poll_s = record, capacity, quiet_s, poll_s
        self.recorded = 0   # evidence handed to the writer
        self.dropped = 0    # decisions left without evidence: the queue full, or the stop came first
        self.failed = 0     # computations that raised (logged)
        self._queue: deque[tuple[str, Pending]] = deque()
        self._burst = 0  # decisions submitted since the queue was last empty
        self._sample = random.Random(seed)  # which of a full queue's burst keep their evidence
        self._request_at = 0.0  # when the last request began or was answered
        self._answering = False  # a request is being answered now (one at a time: the server's loop)
        self._stop = threading.Event()
        self._idle = threading.Event()  # nothing queued, nothing being computed (tests: drain)
        self._idle.set()
        self._idle_lock = threading.Lock()  # uncontended but for a moment at the worker's check: wakes no one
        self._thread = threading.Thread(target=self._run, name="evidence", daemon=True)

    def start(self) -> None:
        self._thread.start()

    @contextmanager
    def answering(self) -> Iterator[None]:
        """Around a request: the worker starts nothing while it is answered (a slow one, 5 ms and
        more, must not look like quiet) nor for ``quiet_s`` after."""
        self._answering, self._request_at = True, time.monotonic()
        try:
            yield
        finally:
            self._answering, self._request_at = False, time.monotonic()

    def _quiet(self) -> bool:
        return not self._answering and time.monotonic() - self._request_at >= self.quiet_s

    def submit(self, decision_id: str, pending: Pending) -> bool:
        """Queue one decision's evidence; False (counted) when it is dropped: stopped, or the
        queue is full and the reservoir keeps the ones queued. When the reservoir takes it
        instead, a queued one chosen at random is dropped (counted) in its place."""
        if self._stop.is_set():
            self.dropped += 1
            return False
        self._burst = self._burst + 1 if self._queue else 1
        if len(self._queue) >= self.capacity:
            return self._into_reservoir((decision_id, pending))
        with self._idle_lock:
            self._idle.clear()
            self._queue.append((decision_id, pending))
        return True

    def _into_reservoir(self, item: tuple[str, Pending]) -> bool:
        """The ``burst``-th decision of a burst is kept with probability capacity / burst, in
        the place of one kept before, chosen at random: every decision of the burst the same
        chance. The worker only takes from the left, so a replaced slot is always a queued one."""
        self.dropped += 1
        if self._sample.random() * self._burst >= self.capacity:
            return False
        try:
            self._queue[self._sample.randrange(len(self._queue))] = item
        except (IndexError, ValueError):  # the worker emptied it meanwhile: no one to replace
            with self._idle_lock:
                self._idle.clear()
                self._queue.append(item)
            self.dropped -= 1
        return True

    @property
    def queued(self) -> int:
        return len(self._queue)

    def drain(self, timeout: float | None = None) -> bool:
        """Wait until everything queued is recorded (tests, benchmarks); False on the timeout."""
        return self._idle.wait(timeout)

    def stop(self, stop_s: float = STOP_S) -> None:
        """Compute what is queued (no request comes any more) for up to ``stop_s``, drop the rest."""
        if not self._thread.is_alive():
            return
        self._answering, self._request_at = False, 0.0
        self._idle.wait(stop_s)
        self._stop.set()
        self._thread.join(timeout=stop_s)
        left = len(self._queue)
        if left:
            self._queue.clear()
            self.dropped += left
            log.warning("%d decisions left without evidence at the stop (not computed within %g s)", left, stop_s)
        self._idle.set()

    def _run(self) -> None:
        while not self._stop.wait(self.poll_s):
            while self._queue and not self._stop.is_set() and self._quiet():
                self._one(*self._queue.popleft())
            with self._idle_lock:  # not between a submit's clear and its append
                if not self._queue:
                    self._idle.set()

    def _one(self, decision_id: str, pending: Pending) -> None:
        try:
            found: dict[str, Any] = pending()
        except Exception:  # a bug costs one decision's evidence, never the worker
            self.failed += 1
            log.exception("the evidence of decision %s was not computed", decision_id)
            return
        self.record(Recorded(decision_id, found))
        self.recorded += 1
