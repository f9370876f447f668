"""The speed model's job-type vocabulary, learned from the logged samples (numpy; no torch).

A site names its job types as it likes ("ctr-ranker-v3", "diffusion-xl"); ``jobtypes`` knows
a dozen published ones. Every type logged often enough -- at least ``min_samples`` speed
samples from at least ``min_jobs`` distinct jobs -- gets a slot of its own, whose parameters
the speed model fits; every rarer type (or one never logged) shares the last, "unknown" slot
and is told apart only by its request and by the published facts of ``jobtypes`` (a prior,
entering as features: declared or published model size and FLOPs per sample).

Nodes get slots the same way: every node that ran a logged job's workers in at least
``min_node_samples`` samples gets a pace of its own (``net``: a fitted factor on its
step time -- an older GPU, a throttled board; PAL, SC'24, measured such variability
across nominally equal GPUs); every other node, and every node a site adds later, has the
pace of the typical node (slot 0).

The vocabulary is saved with the model (meta.json) with each slot's logged solo speed: the
median per-worker speed of its samples on one node beside no other job (the speed model's
starting point for the type's compute time).
"""
from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

from slurm_advisor.domain import SpeedSample

MIN_TYPE_SAMPLES = 50  # a type needs this many samples ...
MIN_TYPE_JOBS = 3      # ... from this many distinct jobs for a slot of its own
MIN_NODE_SAMPLES = 20  # a node that ran workers in this many samples gets a pace of its own


@dataclass(frozen=True)
class TypeVocab:
    types: tuple[str, ...] = ()
    # per slot (the unknown slot last): median log(speed / workers) alone on one node, or NaN
    solo_log_speed: tuple[float, ...] = (math.nan,)
    min_samples: int = MIN_TYPE_SAMPLES
    min_jobs: int = MIN_TYPE_JOBS
    nodes: tuple[str, ...] = ()  # node slots 1.. (0: every other node)
    min_node_samples: int = MIN_NODE_SAMPLES

    def slot(self, job_type: str) -> int:
        return self._index.get(job_type.lower(), len(self.types))

    @cached_property
    def _index(self) -> dict[str, int]:
        return {t: i for i, t in enumerate(self.types)}

    @cached_property
    def _node_index(self) -> dict[str, int]:
        return {n: i + 1 for i, n in enumerate(self.nodes)}

    def node_slot(self, name: str) -> int:
        return self._node_index.get(name, 0)

    @property
    def n_slots(self) -> int:
        return len(self.types) + 1

    @property
    def n_node_slots(self) -> int:
        return len(self.nodes) + 1

    def to_dict(self) -> dict:
        return {"types": list(self.types), "min_samples": self.min_samples, "min_jobs": self.min_jobs,
                "solo_log_speed": [None if math.isnan(x) else round(x, 6) for x in self.solo_log_speed],
                "nodes": list(self.nodes), "min_node_samples": self.min_node_samples}

    @classmethod
    def from_dict(cls, d: dict) -> TypeVocab:
        types = tuple(d["types"])
        solo = tuple(math.nan if x is None else float(x) for x in d.get("solo_log_speed", ()))
        if len(solo) != len(types) + 1:
            raise ValueError(f"solo_log_speed must have {len(types) + 1} entries, got {len(solo)}")
        nodes = d.get("nodes", [])  # absent in models saved before nodes had a pace
        if not isinstance(nodes, list) or not all(isinstance(n, str) for n in nodes):
            raise ValueError("nodes must be a list of node names")
        return cls(types, solo, int(d.get("min_samples", MIN_TYPE_SAMPLES)), int(d.get("min_jobs", MIN_TYPE_JOBS)),
                   tuple(nodes), int(d.get("min_node_samples", MIN_NODE_SAMPLES)))

    @classmethod
    def from_samples(cls, samples: Sequence[SpeedSample], min_samples: int = MIN_TYPE_SAMPLES,
                     min_jobs: int = MIN_TYPE_JOBS, min_node_samples: int = MIN_NODE_SAMPLES) -> TypeVocab:
        count: dict[str, int] = defaultdict(int)
        jobs: dict[str, set[str]] = defaultdict(set)
        on_node: dict[str, int] = defaultdict(int)
        for s in samples:
            t = s.subject.job.type.lower()
            count[t] += 1
            jobs[t].add(s.subject.job.id)
            for name, _, n_w in s.subject.placement.per_node():
                on_node[name] += n_w > 0
        types = tuple(sorted(t for t in count if count[t] >= min_samples and len(jobs[t]) >= min_jobs))
        nodes = tuple(sorted(n for n, c in on_node.items() if c >= min_node_samples))
        vocab = cls(types, (math.nan,) * (len(types) + 1), min_samples, min_jobs)
        solo: dict[int, list[float]] = defaultdict(list)
        for s in samples:
            if not s.neighbours and len(s.subject.placement.nodes()) == 1:
                solo[vocab.slot(s.subject.job.type)].append(math.log(s.speed / s.subject.job.num_workers))
        medians = tuple(_median(solo[i]) if solo[i] else math.nan for i in range(vocab.n_slots))
        return cls(types, medians, min_samples, min_jobs, nodes, min_node_samples)


def _median(xs: list[float]) -> float:
    xs = sorted(xs)
    mid = len(xs) // 2
    return xs[mid] if len(xs) % 2 else 0.5 * (xs[mid - 1] + xs[mid])
