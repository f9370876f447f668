"""The judge: the one speed model that decides between candidates, never fitted on what they
were trained on. Training's gate judges the network's candidates against its teacher with it
(fitted on the judge's own samples, else on the training samples with another seed and split);
retrain's gate judges a candidate model against the active one (fitted on the held-out samples
alone, or, with too few of them, ``PRIOR``, a parametric model fitted on no report at all).
RL learns to please the model it trains against, errors included: a second model with other
errors is far harder to fool.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from slurm_advisor.domain import SpeedSample
from slurm_advisor.learned.hyper import Hyper
from slurm_advisor.learned.speed.fit import fit_site_model
from slurm_advisor.speedmodels import load_speed_model

JUDGE_MIN_SAMPLES = 100
# The judge's fit differs from the candidate's even on similar data: another seed (and so another
# split and bootstrap) than the candidate's own fit.
TRAINING_SEED_OFFSET, RETRAIN_SEED_OFFSET = 1, 7


@dataclass(frozen=True)
class Judge:
    model: object  # a SpeedModel
    description: str


#: The judge that read no report: the gate's second opinion (retrain/gate.py), and the judge itself
#: when too few samples are held out to fit one.
PRIOR = Judge(load_speed_model("contention"), "the contention model (fitted on no report)")


def fitted(samples: Sequence[SpeedSample], hp: Hyper, seed_offset: int) -> Judge:
    """A speed model fitted on ``samples`` with the candidate's seed moved by ``seed_offset``."""
    model, _ = fit_site_model(samples, replace(hp, seed=hp.seed + seed_offset))
    return Judge(model, f"a speed model fitted on {len(samples)} samples, seed +{seed_offset}")


def for_retrain(holdout: Sequence[SpeedSample], hp: Hyper) -> Judge:
    """Retrain's judge: fitted on the held-out samples alone (the most recent speeds, which neither
    the candidate nor, usually, the active model trained on) when there are ``JUDGE_MIN_SAMPLES``
    of them; with fewer, a fit would be noise, and the judge is ``PRIOR``."""
    if len(holdout) >= JUDGE_MIN_SAMPLES:
        return Judge(fitted(holdout, hp, RETRAIN_SEED_OFFSET).model,
                     f"a speed model fitted on the {len(holdout)} held-out samples alone (neither model trained on them)")
    return Judge(PRIOR.model,
                 f"the contention model: only {len(holdout)} held-out samples, {JUDGE_MIN_SAMPLES} "
                 "needed to fit a judge on them")
