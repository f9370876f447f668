"""One trained model in the registry: where its files are, what it learned from, how it scored."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

#: ``canary``: accepted by the gate, serving a share of the marked jobs until measured outcomes
#: promote it or roll it back (retrain/canary.py); at most one at a time.
MODEL_STATUSES = ("candidate", "active", "retired", "canary")


@dataclass(frozen=True)
class ModelRecord:
    """``version`` is the 12-hex hash of the model's files (``daemon.model_version``).

    Times are seconds since the epoch; ``first_sample_time``/``last_sample_time`` bound the speed
    samples it was fitted on, ``samples`` of them, ``live_samples`` of those from the cluster.
    """

    version: str
    directory: str
    status: str = "candidate"
    created_at: float = 0.0
    first_sample_time: float | None = None
    last_sample_time: float | None = None
    samples: int = 0
    live_samples: int = 0
    metrics: dict[str, Any] = field(default_factory=dict)
    promoted_at: float | None = None
    retired_at: float | None = None


#: How a model became the active one: a retrain's gate, an admin's `models promote` (``forced``
#: over a gate that rejected it or never judged it), `models rollback`, registered as active, a
#: canary whose measured outcomes held up (``canary``), or a rollback after a measured regression
#: against Slurm's own placements (``regression``; walked back like ``rollback``).
ACTIVATIONS = ("retrain", "promote", "rollback", "register", "canary", "regression")


@dataclass(frozen=True)
class ModelActivation:
    """One change of the active model. ``version`` None: none promoted, the daemon's default
    model serves (its config's ``model``, the packaged one unless set)."""

    time: float
    version: str | None
    previous: str | None
    action: str
    forced: bool = False
    note: str = ""
