"""One advice the daemon gave: what was asked, what it answered, and why. Pure value."""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

#: How a decision's reason starts when the job went to Slurm as submitted (stamped only) although
#: the advisor was asked: no room now, an unmodelled option, a layout it cannot express, ...
LEFT_TO_SLURM = "left to Slurm as submitted"
#: ... and when the reason is an option the advisor does not model (slurm/request.py's Unmodelled)
UNMODELLED = "unmodelled option: "


@dataclass(frozen=True)
class Decision:
    id: str                          # "d-" + 12 hex digits; written to the job's admin_comment
    time: datetime                   # when the request arrived (UTC)
    mode: str                        # observe | advise | enforce
    action: str                      # place | cap | none (what the hook was told to do)
    policy: str                      # who decided: the policy, or the fallback's name
    model_version: str | None        # the learned model's version, None for a heuristic
    job_type: str
    user_id: int | None
    request: dict[str, Any]          # the hook's job fields, as received
    layout: tuple[tuple[str, str], ...] = ()   # (role, node) per task, task order; () if not placed
    would: tuple[tuple[str, str], ...] = ()    # observe mode: the layout it would have advised
    max_nodes: int | None = None
    latency_ms: float = 0.0
    fallback: bool = False
    reason: str = ""                 # why not placed, or why the fallback decided
    extra: dict[str, Any] = field(default_factory=dict)
    # The layouts weighed on the decision's snapshot and their speeds predicted then
    # (daemon/evidence.py); None: not recorded (a decision from before it was, or none to weigh).
    evidence: dict[str, Any] | None = None

    @property
    def nodes(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(node for _, node in (self.layout or self.would)))
