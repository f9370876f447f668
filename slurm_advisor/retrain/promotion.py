"""An admin's changes of the active model: `models promote VERSION [--force]` and `models rollback`.

The gate's verdict on a candidate is recorded by the retrain that made it, in its registry row
(``metrics["promoted"]`` and ``metrics["reason"]``). Promoting a model the gate rejected takes
``force``, and so does one with no verdict at all (registered by hand or by a tool): nobody judged
it, so nothing vouches for it. A forced promotion is logged as such in the history, with the
verdict's reason.

The history of actives (``store.model_history()``) is read as a stack that starts with the
daemon's default model (None here, ``versions.DEFAULT`` in the pointer): a promotion, by a
retrain or an admin, pushes; a rollback pops back to the model active before the current one.
So one rollback after the first promotion reaches the default model, and two after two
promotions do. Each change is the registry first (one transaction, the history row with it),
then the ``active`` pointer the daemon follows.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from slurm_advisor.domain.model_record import ModelActivation, ModelRecord
from slurm_advisor.errors import InputError
from slurm_advisor.models import versions


@dataclass(frozen=True)
class GateVerdict:
    judged: bool     # a retrain's gate judged this model (False: registered another way)
    accepted: bool   # ... and would promote it
    reason: str

    @property
    def label(self) -> str:
        return "accepted" if self.accepted else "rejected" if self.judged else "unjudged"


@dataclass(frozen=True)
class Switch:
    """One change of the active model; None: the daemon's default model."""

    active: str | None
    was: str | None
    directory: str | None
    forced: bool = False
    verdict: str = ""
    warning: str | None = None  # the pointer could not follow (the model's directory is gone)


def gate_verdict(record: ModelRecord) -> GateVerdict:
    """The verdict a retrain recorded for ``record``."""
    if "promoted" not in record.metrics:
        return GateVerdict(False, False, "no gate verdict recorded: not made by `slurm-advisor retrain`")
    return GateVerdict(True, bool(record.metrics["promoted"]), str(record.metrics.get("reason") or "no reason recorded"))


def promote(store, models_dir: Path, version: str, *, force: bool = False) -> Switch:
    """Make ``version`` active; InputError if the gate did not accept it and ``force`` is not set."""
    record = store.model(version)
    if record is None:
        known = ", ".join(m.version for m in store.list_models()) or "none"
        raise InputError(f"no model {version!r} in the registry; registered: {known}")
    verdict = gate_verdict(record)
    if not verdict.accepted and not force:
        raise InputError(f"the gate {'rejected' if verdict.judged else 'never judged'} {version}: "
                         f"{verdict.reason}; pass --force to promote it anyway")
    before = store.active_model()
    store.activate(version, "promote", forced=not verdict.accepted, note=f"gate {verdict.label}: {verdict.reason}")
    return Switch(version, before and before.version, record.directory, not verdict.accepted,
                  f"{verdict.label}: {verdict.reason}", _point(models_dir, version))


def rollback(store, models_dir: Path, *, action: str = "rollback", note: str = "") -> Switch:
    """Make the model active before the current one active again (None: the default model);
    ``action`` "regression": the canary's watch did it (retrain/canary.py)."""
    active = store.active_model()
    if active is None:
        raise InputError("nothing to roll back to: no model is promoted, the daemon's default model serves")
    current = active.version
    registered = {m.version: m for m in store.list_models()}
    stack = active_stack(store.model_history(), current)
    stack.pop()
    while stack[-1] is not None and stack[-1] not in registered:  # removed from the registry by hand
        stack.pop()
    target = stack[-1]
    store.activate(target, action, note=note or f"back from {current}")
    return Switch(target, current, target and registered[target].directory,
                  warning=_point(models_dir, target or versions.DEFAULT))


def active_stack(history: Sequence[ModelActivation], active: str | None) -> list[str | None]:
    """The actives a rollback walks back through, the current one last; always starts with None
    (the default model). The registry's ``active`` is the truth where the history disagrees."""
    stack: list[str | None] = [None]
    for change in history:
        if change.action in ("rollback", "regression") and len(stack) > 1:
            stack.pop()
        if stack[-1] != change.version:
            stack.append(change.version)
    if stack[-1] != active:
        stack.append(active)
    return stack


def _point(models_dir: Path, version: str) -> str | None:
    """Move the ``active`` pointer; a warning (the daemon keeps its model) when it cannot."""
    if version == versions.DEFAULT and not Path(models_dir).is_dir():
        return None  # nothing was ever promoted there: the daemon serves its default already
    try:
        versions.point_active(models_dir, version)
    except FileNotFoundError:
        return (f"{Path(models_dir) / version} is missing: the daemon keeps its model until "
                "the next retrain repairs the pointer")
    return None
