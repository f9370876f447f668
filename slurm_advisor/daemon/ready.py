"""Ready answers: advice computed ahead for the requests the hook sends again and again.

An advised submission cost slurmctld one round trip to the daemon inside its locks (~1 ms on 2
busy cores, whatever the policy) — most of what the hook cost the controller. Sites submit the
same job again and again (a training script, its options, its marker), so the daemon keeps the
last ``keys`` distinct requests the hook sent (the hook names each by its ``ready_key``: the
request's job fields less the job's name and user) and, in a background thread, computes the
answer each would get now. They go to a file next to the socket (``<socket>.ready``: a header
line and a line per answer, each a flat JSON object the hook reads with its own decoder, no
round trip); the hook that uses one tells the daemon with one datagram to
``<socket>.taken`` (no reply awaited), and the daemon records that decision and claims its nodes
as if the answer had been given over the socket.

Correctness rests on one rule the hook checks: an answer is used only from a file that counts
every answer this hook has already used (``hook``/``seen``: the hook's instance and its number of
takes the daemon had processed when it computed the file). slurmctld calls the hook one job at a
time, so after a take the hook goes back to the socket until a file that knows of that take is
written, and the server reads every queued datagram before it answers any request. An answer over
the socket that claims nodes withdraws the file before the reply leaves (its answers may overlap
that claim); a new snapshot or mode makes new answers. A take that claims nothing (the answer
was "none" or Slurm's own choice) leaves the other answers standing: the next file carries them
again beside a new answer for the used key. Nothing here can cost a job: whatever is
wrong with the file, the hook asks over the socket.
"""
from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from slurm_advisor.daemon import protocol
from slurm_advisor.daemon.evidence import Pending
from slurm_advisor.domain import ClusterSnapshot, Job, Placement
from slurm_advisor.domain.decision import Decision

log = logging.getLogger("slurm_advisor.daemon")
READY_SUFFIX = ".ready"
TAKEN_SUFFIX = ".taken"
MAX_KEY = 4096           # bytes of UTF-8: a longer ready_key is not remembered
_GENERATIONS_KEPT = 4    # a take may name an answer of a file already replaced


@dataclass(frozen=True)
class ReadyAnswer:
    key: str
    reply: dict[str, Any]
    decision: Decision
    job: Job
    snapshot: ClusterSnapshot
    claim: Placement | None          # what the answer claims once taken
    evidence: Pending | None = None  # its decision's evidence, computed once taken (evidence_worker.py)

    @property
    def id(self) -> str:
        """The decision id the answer carries."""
        return self.decision.id


def ready_path(socket_path: Path) -> Path:
    return Path(str(socket_path) + READY_SUFFIX)


def taken_path(socket_path: Path) -> Path:
    return Path(str(socket_path) + TAKEN_SUFFIX)


class ReadyAnswers:
    """The remembered requests, the answers published for them, and the thread that computes them.

    ``compute(snapshot, fields, mode, rng)`` is the advice service's ``decide`` (``Decided``: reply,
    decision, job, claim, the evidence to compute once the answer is taken);
    ``current()`` gives (snapshot less claims, mode) or None; ``lock`` is the daemon's advise lock:
    versions change and files are written under it, so a file is published only if no decision
    was made while its answers were computed.
    """

    def __init__(self, socket_path: Path, keys: int, lifetime_s: float, lock: threading.Lock,
                 compute: Callable[..., Any],
                 current: Callable[[], tuple[ClusterSnapshot, str] | None]):
        self.path = ready_path(socket_path)
        self.max_keys, self.lifetime_s = keys, lifetime_s
        self.lock, self.compute, self.current = lock, compute, current
        self.epoch = f"{time.time_ns():x}"  # this daemon's run: a hook's takes of another run do not count
        self.generation = 0
        self.published = 0               # answers in files so far
        self.unknown = 0                 # takes naming an answer no longer kept (logged)
        self._keys: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self._answers: OrderedDict[int, dict[str, ReadyAnswer]] = OrderedDict()  # generation -> id -> answer
        self._used: set[str] = set()
        self._seen: tuple[str, int] = ("", 0)   # (hook instance, its takes processed)
        self._version = 0
        # What the next rebuild computes: every key's answer, or (after takes that claimed
        # nothing, so the other answers still hold) only the keys whose answers were used.
        self._full = True
        self._reissue: set[str] = set()
        self._rng = np.random.default_rng()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="ready-answers", daemon=True)
        self._fd: int | None = None
        self._length = 0                 # the file's length as last written (0: empty, or none)
        self.ignored_keys = 0            # ready_keys refused by key_problem

    # -- called by the daemon (under its advise lock where said) ------------------------------
    def remember(self, key: Any, fields: dict[str, Any]) -> str | None:
        """A request the hook sent with its ``ready_key``: kept (most recent first) and answered
        ahead. A key the file could not carry is ignored and counted; returns why (None: kept)."""
        problem = key_problem(key)
        if problem is not None:
            self.ignored_keys += 1
            log.debug("ready_key ignored: %s", problem)
            return problem
        with self.lock:
            known = key in self._keys
            self._keys[key] = fields
            self._keys.move_to_end(key)
            while len(self._keys) > self.max_keys:
                self._keys.popitem(last=False)
            self._full |= not known
        if not known:
            self._wake.set()
        return None

    def withdraw(self) -> None:
        """Under the advise lock: a decision changed the claims; the file's answers may overlap it.
        Cheap when there is nothing to withdraw (every placed request calls it): an empty file is
        not written again, and with no request remembered the thread has nothing to compute."""
        self._version += 1  # an answer computed before this decision is never published
        self._full = True
        if self._length:
            self._write(b"")
        if self._keys:
            self._wake.set()

    def changed(self) -> None:
        """A new snapshot (or model): new answers; the file stays until they are written."""
        with self.lock:
            self._full = True
        self._wake.set()

    def take(self, answer_id: Any, hook: Any, seq: Any) -> ReadyAnswer | None:
        """Under the advise lock: the hook used ``answer_id``; the answer, or None if not kept (or
        used before). The hook's count of takes is recorded either way."""
        if isinstance(hook, str) and isinstance(seq, int):
            self._seen = (hook[:64], seq)
        self._version += 1
        self._wake.set()
        answer = None
        if isinstance(answer_id, str) and answer_id not in self._used:
            answer = next((g[answer_id] for g in self._answers.values() if answer_id in g), None)
        if answer is None:
            self.unknown += 1
            self._full = True
            log.warning("the hook used ready answer %r, which this daemon no longer holds: not recorded",
                        str(answer_id)[:64])
            return None
        self._used.add(answer_id)
        # A take that claims nothing leaves the state the latest file's other answers were
        # computed on: only this key needs a new answer (a new decision id). Anything else
        # changes the free capacity every answer saw.
        if answer.claim is None and answer_id in self._latest():
            self._reissue.add(answer.key)
        else:
            self._full = True
        return answer

    # -- the thread -------------------------------------------------------------------------
    def start(self) -> None:
        _unlink(self.path)  # a previous run's file: its takes would not reach this run
        # Rewritten in place (pwrite, then ftruncate): a rename over the old file cost ~0.3 ms on
        # ext4 (it flushes on replace), most of a rebuild. A reader that catches a write half done
        # sees no end line, or one for another generation, and asks over the socket.
        self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.fchmod(self._fd, 0o644)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join(timeout=10)
        _unlink(self.path)
        with self.lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None

    def _write(self, data: bytes) -> None:
        if self._fd is not None:
            os.pwrite(self._fd, data, 0)
            os.ftruncate(self._fd, len(data))
            self._length = len(data)

    def _run(self) -> None:
        while not self._stop.is_set():
            # Woken by a change; otherwise rewritten before the file's lifetime ends.
            if not self._wake.wait(timeout=self.lifetime_s / 3):
                with self.lock:
                    self._full = True
            self._wake.clear()
            if self._stop.is_set():
                return
            try:
                self.rebuild()
            except Exception:  # never stop the thread; the hook asks over the socket meanwhile
                log.exception("ready answers not computed")

    def rebuild(self) -> bool:
        """Compute the remembered requests' answers and publish them, unless a decision was made
        meanwhile (then the next wake computes them again). True when a file was written."""
        with self.lock:
            if not self._keys:
                return False  # nothing remembered: no answer to compute (the state is not read)
            version, current = self._version, self.current()
            kept = self._still_valid()
            keys = [(k, f) for k, f in self._keys.items() if k not in kept]
            self._full, self._reissue = False, set()
        if current is None:
            return False
        snapshot, mode = current
        answers = {}
        for key, fields in keys:
            try:
                decided = self.compute(snapshot, fields, mode, rng=self._rng)
            except protocol.ProtocolError:
                continue  # a request the daemon refuses is answered over the socket, with its error
            answers[key] = ReadyAnswer(key, decided.reply, decided.decision, decided.job, snapshot, decided.claim,
                                       decided.evidence)
        with self.lock:
            if version != self._version:
                self._full = True  # the kept answers may be stale now too
                self._wake.set()
                return False
            answers = [a for k in self._keys if (a := kept.get(k) or answers.get(k)) is not None]
            self.generation += 1
            self._answers[self.generation] = {a.id: a for a in answers}
            while len(self._answers) > _GENERATIONS_KEPT:
                _, dropped = self._answers.popitem(last=False)
                self._used.difference_update(dropped)
            self._write(self._text(answers).encode())
            self.published += len(answers)
        return True

    def _still_valid(self) -> dict[str, ReadyAnswer]:
        """Under the lock: the latest file's answers the next file may carry again, by key (none
        when every answer must be computed again)."""
        if self._full:
            return {}
        return {a.key: a for a in self._latest().values()
                if a.key not in self._reissue and a.id not in self._used and a.key in self._keys}

    def _latest(self) -> dict[str, ReadyAnswer]:
        """The answers of the file last published, by id (none before the first)."""
        return self._answers[next(reversed(self._answers))] if self._answers else {}

    def _text(self, answers: list[ReadyAnswer]) -> str:
        hook, seen = self._seen
        header = {"v": 1, "epoch": self.epoch, "generation": self.generation, "hook": hook, "seen": seen,
                  "expires": int(time.time() + self.lifetime_s)}
        lines = [header] + [{"key": a.key, "id": a.id, "reply": protocol.encode(a.reply).decode().rstrip()}
                            for a in answers]
        lines.append({"end": self.generation})  # a file without it was caught half written
        # UTF-8 and "key" first: the hook finds its answer by the JSON text of its key, which its
        # own encoder writes the same way (raw UTF-8; \n, \t, ... and \u00XX for control bytes).
        return "".join(json.dumps(line, separators=(",", ":"), ensure_ascii=False) + "\n" for line in lines)


def key_problem(key: Any) -> str | None:
    """Why the ready-answers file cannot carry ``key`` (None: it can). The file is UTF-8: one key
    that does not encode (a lone surrogate, which JSON's \\ud800 decodes to) would stop every
    rebuild until newer keys pushed it out."""
    if not isinstance(key, str):
        return f"ready_key must be a string, not {type(key).__name__}"
    if not key:
        return "ready_key is empty"
    try:
        size = len(key.encode("utf-8"))
    except UnicodeEncodeError as exc:
        return f"ready_key does not encode as UTF-8 (character {exc.start})"
    return f"ready_key of {size} bytes; at most {MAX_KEY}" if size > MAX_KEY else None


def _unlink(path: Path) -> None:
    try:
        path.unlink()
    except (FileNotFoundError, NotADirectoryError):  # the socket's directory may be a file: nothing there
        pass
