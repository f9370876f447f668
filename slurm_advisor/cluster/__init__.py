"""Cluster-state sources, registered by name in one explicit dict.

``slurm`` reads Slurm's own commands (the default), ``pyslurm`` its C API through pyslurm,
``simulated`` a cluster file with simulated running jobs. Each factory imports its module
only when called, so choosing ``simulated`` never needs Slurm's tools nor pyslurm.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from slurm_advisor.cluster.base import ClusterSource, SourceError
from slurm_advisor.errors import InputError


def _slurm(**options: Any) -> ClusterSource:
    from slurm_advisor.cluster.slurm_cli import SlurmCliSource
    return SlurmCliSource(**options)


def _pyslurm(**options: Any) -> ClusterSource:
    from slurm_advisor.cluster.pyslurm_source import PyslurmSource
    return PyslurmSource(**options)


def _simulated(**options: Any) -> ClusterSource:
    from slurm_advisor.cluster.simulated import SimulatedSource
    return SimulatedSource(**options)


SOURCES: dict[str, Callable[..., ClusterSource]] = {
    "slurm": _slurm,
    "pyslurm": _pyslurm,
    "simulated": _simulated,
}


def make_source(name: str, **options: Any) -> ClusterSource:
    """The source registered as ``name``, built with ``options``; InputError for a bad name or option."""
    factory = SOURCES.get(name)
    if factory is None:
        raise InputError(f"unknown cluster source {name!r}; valid: {', '.join(SOURCES)}")
    try:
        return factory(**options)
    except TypeError as exc:  # an option the source does not take: the user's config, not a bug
        raise InputError(f"cluster source {name!r}: {exc}") from None


__all__ = ["SOURCES", "ClusterSource", "SourceError", "make_source"]
