"""The packages stay in layers (docs/architecture.md, "What is inside"): no package imports one
above it, at module level or inside a function, so there is no cycle between packages."""
from __future__ import annotations

import importlib.util
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# From the bottom up, as docs/architecture.md lists them (the top-level modules count as packages).
LAYERS = ("errors", "domain", "slurm", "traces", "speedmodels", "plausible_speeds", "learned", "models",
          "policies", "advisor", "sim", "training", "store", "cluster", "daemon", "retrain", "experiments",
          "loop", "report", "site_setup", "cli")


def _import_graph():
    spec = importlib.util.spec_from_file_location("import_graph", REPO / "benchmarks" / "import_graph.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_package_has_its_layer() -> None:
    packages = {p.stem if p.is_file() else p.name for p in (REPO / "slurm_advisor").iterdir()
                if (p.is_dir() and (p / "__init__.py").exists()) or (p.suffix == ".py" and p.stem != "__init__")}
    assert packages == set(LAYERS)


def test_no_package_imports_a_layer_above_it() -> None:
    upward = {(a, b): lines for (a, b), lines in _import_graph().edges().items()
              if LAYERS.index(b) > LAYERS.index(a)}
    assert upward == {}


def test_no_cycle_between_packages() -> None:
    graph = {}
    for a, b in _import_graph().edges():
        graph.setdefault(a, set()).add(b)
    assert _import_graph().cycles(graph) == []
