"""The registry of cluster-state sources, and the pyslurm source's refusals."""
from __future__ import annotations

import sys
import types

import pytest

from slurm_advisor.cluster import SOURCES, SourceError, make_source
from slurm_advisor.cluster.pyslurm_source import PyslurmSource
from slurm_advisor.errors import InputError


def test_names():
    assert list(SOURCES) == ["slurm", "pyslurm", "simulated"]


def test_unknown_name_lists_the_valid_ones():
    with pytest.raises(InputError, match="unknown cluster source 'slurmrest'; valid: slurm, pyslurm, simulated"):
        make_source("slurmrest")


def test_unknown_option_is_an_input_error():
    with pytest.raises(InputError, match="cluster source 'slurm'.*colour"):
        make_source("slurm", colour="blue")


def test_every_source_has_its_name_and_a_snapshot():
    sim = make_source("simulated")
    cli = make_source("slurm", slurm_conf="/nonexistent/slurm.conf", timeout_s=1)
    assert (sim.name, cli.name) == ("simulated", "slurm") and cli.env["SLURM_CONF"] == "/nonexistent/slurm.conf"
    assert sim.snapshot().nodes and callable(cli.snapshot)


def test_pyslurm_not_importable_says_so_and_names_the_default(monkeypatch):
    monkeypatch.setitem(sys.modules, "pyslurm", None)  # import pyslurm now raises ImportError
    with pytest.raises(SourceError, match=r"pyslurm is not importable .*CLI source \('slurm'\) is the default"):
        make_source("pyslurm")


def test_pyslurm_of_another_release_is_refused(monkeypatch):
    monkeypatch.setitem(sys.modules, "pyslurm", types.SimpleNamespace(__version__="21.8.1"))
    monkeypatch.setattr("slurm_advisor.cluster.pyslurm_source._slurm_version", lambda timeout_s: (22, 5))
    with pytest.raises(SourceError, match=r"pyslurm 21.8.1 does not match Slurm 22.05 .*default"):
        PyslurmSource()
