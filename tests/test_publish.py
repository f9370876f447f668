"""benchmarks/publish.py: a results page from a benchmark's run, with its provenance, or none."""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _publish(monkeypatch, tmp_path):
    spec = importlib.util.spec_from_file_location("publish", REPO / "benchmarks" / "publish.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setattr(module, "RESULTS", tmp_path / "results")
    monkeypatch.setattr(module, "PAGES", tmp_path / "pages")
    return module


def test_a_page_holds_the_printed_table_and_the_provenance(monkeypatch, tmp_path) -> None:
    publish = _publish(monkeypatch, tmp_path)
    assert publish.main(["import_graph"]) == 0
    page = (tmp_path / "pages" / "import_graph.md").read_text()
    assert "- command: `python benchmarks/import_graph.py`" in page and "import cycle(s) between packages" in page
    assert "- commit: " in page and "- machine: " in page and "- date: 20" in page
    stamp = json.loads((tmp_path / "results" / "import_graph.json").read_text())["provenance"]
    assert stamp["command"] == "python benchmarks/import_graph.py" and stamp["commit"]
    assert "[import_graph](import_graph.md)" in (tmp_path / "pages" / "README.md").read_text()


def test_a_failed_run_writes_no_page(monkeypatch, tmp_path) -> None:
    publish = _publish(monkeypatch, tmp_path)
    assert publish.main(["import_graph", "--no-such-option"]) != 0
    assert not (tmp_path / "pages").exists()
    assert publish.main(["no_such_benchmark"]) == 2


def test_a_stale_json_does_not_pass_for_a_failed_run(monkeypatch, tmp_path) -> None:
    publish = _publish(monkeypatch, tmp_path)
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "import_graph.json").write_text("{}")
    assert publish.main(["import_graph", "--no-such-option"]) != 0
    assert not (tmp_path / "pages").exists()


def test_a_target_not_met_is_published_as_such(monkeypatch, tmp_path) -> None:
    """backfill_agreement exits 1 when a case misses its targets: the run finished, so its page is
    written, and says that the benchmark's own verdict was a miss."""
    publish = _publish(monkeypatch, tmp_path)
    missed = "tests/sim/backfill_cases/slurm-26.05-seed2-run3.json"  # a recorded miss (0.157)
    assert publish.main(["backfill_agreement", "score", missed]) == 1
    page = (tmp_path / "pages" / "backfill_agreement.md").read_text()
    assert "- exit status: 1 (the benchmark's own verdict" in page and "0 of 1 cases meet" in page
    assert json.loads((tmp_path / "results" / "backfill_agreement.json").read_text())["provenance"]["exit_status"] == 1
