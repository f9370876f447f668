"""The running jobs of a snapshot: an immutable map job id -> RunningJob, in start order.

Every simulated event and every daemon claim makes a new snapshot with one job more or one
less. Copying a dict of every running job for that is O(running jobs): at 10,000 nodes about ten
thousand jobs or more, and the largest cost of a simulated event. Here the jobs sit in chunks of
at most ``CHUNK`` in start order, and the chunk of each job id is found through ``BUCKETS``
hash buckets; adding or removing a job copies one chunk, one bucket and the two small tuples
or dicts over them, and the snapshot before it keeps its own (shared where unchanged).

The order is exactly a dict's: jobs in the order they were added, a job that is added again
under a running id keeps its place (as ``dict[key] = value`` does).
"""
from __future__ import annotations

import itertools
import operator
from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from slurm_advisor.domain.cluster import RunningJob

CHUNK = 64     # jobs per chunk at most (a new job opens a new chunk when the last one is full)
BUCKETS = 128  # hash buckets of job id -> chunk number


class Recent:
    """What was derived from the last few running-job maps (``keep``), so that the next map's is
    patched from the nearest of them by the jobs that started or ended since, rather than built
    over every running job. A few, not one: a decision also asks about other states (the empty
    cluster, a cluster with some jobs gone), and one slot would swap between the two lineages.
    Safe to share between threads: the list is replaced, never changed in place."""

    def __init__(self, keep: int = 4, most_chunks: int = 4):
        # most_chunks: a patch over more chunks of jobs than this costs more than a build (at
        # 1,000 nodes the whole cluster is ~15 chunks: the empty cluster's map is that far)
        self.keep, self.most_chunks = keep, most_chunks
        self._entries: list[tuple[RunningJobs, object]] = []

    def get(self, running: RunningJobs, build, patch):
        """``build(running)``, or ``patch(value, gone, new)`` of a recent map's value (None: the
        patch declines, e.g. a job replaced under its id); the answer is kept for the next."""
        entries = self._entries  # one read
        value = None
        for before, kept in entries:
            if before is running:
                return kept
            changes = running.changes_since(before, most_chunks=self.most_chunks)
            if changes is not None:
                value = patch(kept, *changes)
                if value is not None:
                    break
        if value is None:
            value = build(running)
        self._entries = [(running, value), *entries[:self.keep - 1]]
        return value


class RunningJobs(Mapping):
    """job id -> RunningJob in start order; ``adding`` / ``removing`` return new maps."""

    __slots__ = ("_chunks", "_len", "_next", "_where")

    def __init__(self, chunks: dict[int, dict[str, RunningJob]], where: tuple[dict[str, int], ...],
                 length: int, next_chunk: int):
        self._chunks = chunks    # chunk number -> {job id: RunningJob}, both in start order
        self._where = where      # BUCKETS dicts: job id -> its chunk number
        self._len = length
        self._next = next_chunk  # the number a new chunk gets (numbers only grow: order kept)

    @classmethod
    def of(cls, running: Iterable[RunningJob]) -> RunningJobs:
        """The map of ``running`` (a later job with the same id replaces the earlier, in place)."""
        jobs = {rj.job.id: rj for rj in running}
        ids = list(jobs)
        chunks = {n: {i: jobs[i] for i in ids[n * CHUNK:(n + 1) * CHUNK]} for n in range(-(-len(ids) // CHUNK))}
        where: tuple[dict[str, int], ...] = tuple({} for _ in range(BUCKETS))
        for n, chunk in chunks.items():
            for job_id in chunk:
                where[hash(job_id) % BUCKETS][job_id] = n
        return cls(chunks, where, len(ids), len(chunks))

    # -- reading ---------------------------------------------------------------------------
    def __getitem__(self, job_id: str) -> RunningJob:
        return self._chunks[self._where[hash(job_id) % BUCKETS][job_id]][job_id]

    def get(self, job_id, default=None):
        n = self._where[hash(job_id) % BUCKETS].get(job_id)
        return default if n is None else self._chunks[n][job_id]

    def __contains__(self, job_id) -> bool:
        return job_id in self._where[hash(job_id) % BUCKETS]

    def __iter__(self) -> Iterator[str]:
        return itertools.chain.from_iterable(self._chunks.values())

    def __len__(self) -> int:
        return self._len

    def position(self, job_id: str) -> tuple[int, int]:
        """Where a running job stands in start order, as a sort key: (chunk, place in it)."""
        n = self._where[hash(job_id) % BUCKETS][job_id]
        return n, list(self._chunks[n]).index(job_id)

    def values(self) -> Iterator[RunningJob]:  # type: ignore[override]  # one pass, in start order
        return itertools.chain.from_iterable(chunk.values() for chunk in self._chunks.values())

    def changes_since(self, before: RunningJobs, most_chunks: int = 16
                      ) -> tuple[list[RunningJob], list[RunningJob]] | None:
        """(jobs of ``before`` not here, jobs here not in ``before``), by identity, read from the
        chunks the two maps do not share: O(chunks + their jobs). None when more than
        ``most_chunks`` differ (maps built apart share none): the caller compares whole sets."""
        mine, theirs = self._chunks, before._chunks
        # the chunk numbers whose chunks are not the same objects (scanned in C)
        differ = list(itertools.compress(mine, map(operator.is_not, mine.values(), map(theirs.get, mine))))
        differ += itertools.filterfalse(mine.__contains__, theirs)
        if len(differ) > most_chunks:
            return None
        gone: list[RunningJob] = []
        new: list[RunningJob] = []
        for n in differ:
            now, then = mine.get(n, _NO_JOBS), theirs.get(n, _NO_JOBS)
            gone += [rj for job_id, rj in then.items() if now.get(job_id) is not rj]
            new += [rj for job_id, rj in now.items() if then.get(job_id) is not rj]
        return gone, new

    # -- changing (each returns a new map) -------------------------------------------------
    def adding(self, rj: RunningJob) -> RunningJobs:
        """The map with ``rj`` at the end (or in the place of the running job with its id)."""
        job_id = rj.job.id
        b = hash(job_id) % BUCKETS
        n = self._where[b].get(job_id)
        chunks = dict(self._chunks)
        if n is not None:  # replaced in place, as a dict does
            chunk = chunks[n] = dict(chunks[n])
            chunk[job_id] = rj
            return RunningJobs(chunks, self._where, self._len, self._next)
        nxt = self._next
        last = chunks.get(nxt - 1)
        if last is not None and len(last) < CHUNK:
            n = nxt - 1
            chunk = chunks[n] = dict(last)
        else:
            if len(chunks) > 2 * (self._len // CHUNK) + 8:
                # Chunks only empty out, never merge: after much churn rebuild them full
                # (O(running jobs), once per hundreds of added jobs at least).
                return RunningJobs.of(itertools.chain(self.values(), (rj,)))
            n, nxt = nxt, nxt + 1
            chunk = chunks[n] = {}
        chunk[job_id] = rj
        return RunningJobs(chunks, self._with_bucket(b, job_id, n), self._len + 1, nxt)

    def removing(self, job_id: str) -> RunningJobs:
        """The map without ``job_id``; KeyError if it is not running."""
        b = hash(job_id) % BUCKETS
        n = self._where[b][job_id]
        chunks = dict(self._chunks)
        chunk = dict(chunks[n])
        del chunk[job_id]
        if chunk:
            chunks[n] = chunk
        else:
            del chunks[n]
        return RunningJobs(chunks, self._with_bucket(b, job_id, None), self._len - 1, self._next)

    def _with_bucket(self, b: int, job_id: str, n: int | None) -> tuple[dict[str, int], ...]:
        bucket = dict(self._where[b])
        if n is None:
            del bucket[job_id]
        else:
            bucket[job_id] = n
        where = list(self._where)
        where[b] = bucket
        return tuple(where)

    def __repr__(self) -> str:
        return f"RunningJobs({len(self)} jobs)"


_NO_JOBS: dict = {}
EMPTY = RunningJobs({}, tuple({} for _ in range(BUCKETS)), 0, 0)
