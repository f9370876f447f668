"""User speed-model plug-ins: ``path/to/file.py:ClassName[:'{"key": value}']``.

The plug-in contract is plain data so it never depends on our classes (README, "Speed-model
plug-ins"): ``speeds(self, nodes: list[dict], jobs: list[dict]) -> dict[str, float]``.
Everything a plug-in returns is checked; a bad answer names the plug-in and the job. Whatever
user code raises while imported, constructed or asked -- any exception, ``SystemExit`` and other
``BaseException`` subclasses included -- becomes one :class:`InputError` naming the plug-in; only
``KeyboardInterrupt`` still interrupts.
"""
from __future__ import annotations

import importlib.util
import json
import math
from collections.abc import Collection, Sequence
from pathlib import Path

from slurm_advisor.domain import Node, RunningJob
from slurm_advisor.errors import InputError
from slurm_advisor.speedmodels.base import job_to_plain, node_to_plain


def parse_plugin_spec(spec: str) -> tuple[Path, str, dict]:
    """Split ``file.py:Class[:json]``; the JSON part may itself contain colons."""
    path_part, sep, rest = spec.partition(".py:")
    if not sep:
        raise InputError(f"speed model plug-in '{spec}': expected path/to/file.py:ClassName")
    class_name, _, raw_kwargs = rest.partition(":")
    kwargs: dict = {}
    if raw_kwargs:
        try:
            kwargs = json.loads(raw_kwargs)
        except json.JSONDecodeError as e:
            raise InputError(f"speed model plug-in '{spec}': keyword arguments are not JSON: {e}") from None
        if not isinstance(kwargs, dict):
            raise InputError(f"speed model plug-in '{spec}': keyword arguments must be a JSON object")
    return Path(path_part + ".py"), class_name, kwargs


class PluginSpeedModel:
    """Adapts a user class to the SpeedModel interface and validates every answer."""

    local = False  # we cannot know what a plug-in looks at: always pass every running job

    def __init__(self, spec: str):
        path, class_name, kwargs = parse_plugin_spec(spec)
        self.name = f"{path.name}:{class_name}"
        cls = _load_class(path, class_name)
        try:
            self._impl = cls(**kwargs)
        except KeyboardInterrupt:
            raise
        except BaseException as e:  # noqa: BLE001 -- the user's constructor (even sys.exit): one message
            raise InputError(f"speed model plug-in {self.name}: constructor failed: "
                             f"{type(e).__name__}: {e}") from None
        if not callable(getattr(self._impl, "speeds", None)):
            raise InputError(f"speed model plug-in {self.name}: class has no speeds(nodes, jobs) method")

    def speeds(self, nodes: Sequence[Node], running: Sequence[RunningJob],
               only: Collection[str] | None = None) -> dict[str, float]:
        if not running:
            return {}
        plain_nodes = [node_to_plain(n) for n in nodes]
        plain_jobs = [job_to_plain(rj) for rj in running]
        try:
            answer = self._impl.speeds(plain_nodes, plain_jobs)
        except KeyboardInterrupt:
            raise
        except BaseException as e:  # noqa: BLE001 -- any error of user code (even sys.exit): one message
            raise InputError(f"speed model plug-in {self.name} raised {type(e).__name__}: {e}") from None
        if not isinstance(answer, dict):
            raise InputError(f"speed model plug-in {self.name}: speeds() must return a dict, "
                             f"got {type(answer).__name__}")
        wanted = [rj.job.id for rj in running if only is None or rj.job.id in only]
        return {job_id: self._checked(answer, job_id) for job_id in wanted}

    def _checked(self, answer: dict, job_id: str) -> float:
        if job_id not in answer:
            raise InputError(f"speed model plug-in {self.name}: no speed for job '{job_id}'")
        value = answer[job_id]
        try:
            speed = float(value)
        except (TypeError, ValueError):
            raise InputError(f"speed model plug-in {self.name}: speed of job '{job_id}' "
                             f"is not a number: {value!r}") from None
        if not math.isfinite(speed) or speed <= 0:
            raise InputError(f"speed model plug-in {self.name}: speed of job '{job_id}' must be "
                             f"positive and finite, got {value!r}")
        return speed


def _load_class(path: Path, class_name: str) -> type:
    if not path.is_file():
        raise InputError(f"speed model plug-in: file not found: {path}")
    spec = importlib.util.spec_from_file_location(f"slurm_advisor_plugin_{path.stem}", path)
    if spec is None or spec.loader is None:
        raise InputError(f"speed model plug-in: cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except KeyboardInterrupt:
        raise
    except BaseException as e:  # noqa: BLE001 -- any error of user code (even sys.exit): one message
        raise InputError(f"speed model plug-in {path}: import failed: {type(e).__name__}: {e}") from None
    cls = getattr(module, class_name, None)
    if not isinstance(cls, type):
        raise InputError(f"speed model plug-in {path}: no class named '{class_name}'")
    return cls
