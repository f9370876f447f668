"""Ground-truth speed models behind one narrow interface, chosen by a spec string.

    contention              our parametric contention model
    gavel:PATH.json         Gavel's measured co-location throughputs
    pollux:MODELS_DIR       Pollux's measured placement sensitivity
    path/file.py:Class[:{json kwargs}]   a user plug-in

Every model built here is wrapped in :class:`CheckedSpeedModel`: whatever the simulator, the
oracle or the isolated-speed reference asks, each job gets a finite speed of at least
``MIN_SPEED`` (1e-9 it/s), or the run stops with one message naming the model and the job.
"""
from __future__ import annotations

from slurm_advisor.errors import InputError
from slurm_advisor.speedmodels.base import MIN_SPEED, CheckedSpeedModel, SpeedModel

BUILTIN = ("contention", "gavel:PATH", "pollux:DIR")


def load_speed_model(spec: str) -> CheckedSpeedModel:
    return CheckedSpeedModel(_build(spec))


def _build(spec: str) -> SpeedModel:
    if ".py:" in spec:
        from slurm_advisor.speedmodels.plugin import PluginSpeedModel
        return PluginSpeedModel(spec)
    name, _, arg = spec.partition(":")
    if name == "contention" and not arg:
        from slurm_advisor.speedmodels.contention import ContentionSpeedModel
        return ContentionSpeedModel()
    if name == "gavel" and arg:
        from slurm_advisor.speedmodels.gavel import GavelSpeedModel
        return GavelSpeedModel(arg)
    if name == "pollux" and arg:
        from slurm_advisor.speedmodels.pollux import PolluxSpeedModel
        return PolluxSpeedModel(arg)
    raise InputError(f"unknown speed model '{spec}'; valid: {', '.join(BUILTIN)} "
                     "or path/to/file.py:ClassName")


__all__ = ["BUILTIN", "MIN_SPEED", "CheckedSpeedModel", "SpeedModel", "load_speed_model"]
