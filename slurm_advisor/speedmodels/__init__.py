"""Ground-truth speed models behind one narrow interface, chosen by a spec string.

    contention              our parametric contention model
    gavel:PATH.json         Gavel's measured co-location throughputs
    pollux:MODELS_DIR       Pollux's measured placement sensitivity
    path/file.py:Class[:{json kwargs}]   a user plug-in
"""
from __future__ import annotations

from slurm_advisor.errors import InputError
from slurm_advisor.speedmodels.base import SpeedModel

BUILTIN = ("contention", "gavel:PATH", "pollux:DIR")


def load_speed_model(spec: str) -> SpeedModel:
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


__all__ = ["BUILTIN", "SpeedModel", "load_speed_model"]
