"""What the model-based policies (the advisor's explanations, holding, the search) ask of a
speed model: declared here, so that they depend on these methods, never on how a model computes
them. The site ensemble (``learned.speed.ensemble.SiteEnsemble``, served in numpy, and its torch
twin ``learned.speed.fit.SiteSpeedModel``) provides all of them; a ground truth used as a
predictor (the oracle's, tests) provides ``SpeedPredictor``.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol, runtime_checkable

import numpy as np

from slurm_advisor.domain import ClusterSnapshot, Job, Placement, RunningJob

# One what-if case: the jobs started in it (they count in the racks' loads), then the jobs whose
# speed is asked, each with the jobs that share its nodes then.
WhatIf = tuple[tuple[RunningJob, ...], Sequence[tuple[RunningJob, Sequence[RunningJob]]]]


@runtime_checkable
class SpeedPredictor(Protocol):
    def predict(self, snapshot: ClusterSnapshot, job: Job, placement: Placement) -> float:
        """Predicted iterations/s of ``job`` if it starts on ``placement`` now."""
        ...


@runtime_checkable
class SpeedEnsemble(SpeedPredictor, Protocol):
    """A predictor made of members whose spread says how unsure it is."""

    def predict_after(self, snapshot: ClusterSnapshot, job: Job, placement: Placement,
                      gone: Iterable[RunningJob]) -> float:
        """As ``predict`` once the running jobs ``gone`` have ended."""
        ...

    def warm(self, snapshot: ClusterSnapshot) -> None:
        """Build once what every question about ``snapshot`` reuses."""
        ...

    def log_speeds_what_if(self, snapshot: ClusterSnapshot, cases: Sequence[WhatIf]) -> np.ndarray:
        """[members, asked jobs of every case, in order]: each member's log speed of each job."""
        ...
