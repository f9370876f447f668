"""examples/monitoring: every metric the alert rules and the Grafana dashboard name is one a real
daemon exports, with the labels they select on; promtool (Debian's prometheus package) parses
them and runs the rules' unit tests where it is installed (tests/run.sh installs it)."""
from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from daemon_helpers import make_daemon, marked
from prometheus_client.exposition import generate_latest
from test_metrics import free_port

from slurm_advisor.daemon.metrics import _STATE_COUNTERS

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "monitoring"
RULES, RULES_TEST, DASHBOARD = EXAMPLES / "prometheus-rules.yml", EXAMPLES / "rules-test.yml", \
    EXAMPLES / "grafana-dashboard.json"
_SELECTOR = re.compile(r"\b(slurm_advisor_[a-z0-9_]+)(?:\{([^}]*)\})?")
_LABEL = re.compile(r"([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)")
_SCRAPE_LABELS = {"job", "instance"}  # what Prometheus adds to every scraped series


def dashboard_exprs() -> list[str]:
    dashboard = json.loads(DASHBOARD.read_text())
    found = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    found += [v["query"]["query"] for v in dashboard["templating"]["list"] if isinstance(v.get("query"), dict)]
    return found


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> dict[str, set[str]]:
    """{sample name: its label names} as a daemon serves them after a placement and a fallback."""
    daemon = make_daemon(tmp_path_factory.mktemp("metrics"), metrics_port=free_port())
    daemon.start()
    try:
        daemon.advise(marked(workers=2))
        daemon.advise(marked(workers=3, gpus=5))  # fits no node: a fallback
        text = generate_latest(daemon.metrics.registry).decode()
    finally:
        daemon.stop()
    names: dict[str, set[str]] = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, labels = line.partition("{")
            names.setdefault(name.split(" ")[0], set()).update(re.findall(r'(\w+)="', labels))
    return names


@pytest.mark.parametrize("where", ["rules", "dashboard"])
def test_every_metric_named_is_exported_with_the_labels_selected(exported, where):
    text = RULES.read_text() if where == "rules" else "\n".join(dashboard_exprs())
    named = _SELECTOR.findall(text)
    assert len({n for n, _ in named}) >= (10 if where == "rules" else 25)  # the regex found the expressions
    for name, selector in named:
        assert name in exported, f"{where}: {name} is not a metric the daemon exports"
        for label in _LABEL.findall(selector):
            assert label in exported[name] | _SCRAPE_LABELS, f"{where}: {name} has no label {label!r}"


def test_the_rules_cover_latency_fallbacks_refreshes_and_model_changes():
    rules = RULES.read_text()
    for metric in ("slurm_advisor_advice_latency_seconds_bucket", "slurm_advisor_fallbacks_total",
                   "slurm_advisor_policy_errors_total", "slurm_advisor_model_reload_failures_total",
                   "slurm_advisor_refresh_failures_total", "slurm_advisor_snapshot_age_seconds",
                   "slurm_advisor_model_activations_total"):
        assert metric in rules
    assert 'action="rollback"' in rules and 'forced="true"' in rules
    assert set(_STATE_COUNTERS) >= {"refresh_failures", "model_reloads", "model_reload_failures"}


promtool = pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool not installed (tests/run.sh "
                              "installs Debian's prometheus package)")


@promtool
def test_promtool_checks_the_rules_and_runs_their_unit_tests():
    for args in (["check", "rules", str(RULES)], ["test", "rules", str(RULES_TEST)]):
        done = subprocess.run(["promtool", *args], check=False, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stdout + done.stderr


@promtool
def test_promtool_parses_every_dashboard_expression(tmp_path):
    """Each panel's query as a recording rule (the dashboard's variables filled in): `check rules`
    parses its PromQL."""
    exprs = [e.replace("$job", "slurm-advisor").replace("$instance", ".*") for e in dashboard_exprs()
             if not e.startswith("label_values")]
    rules = {"groups": [{"name": "dashboard", "rules": [{"record": f"dashboard:expr_{i}", "expr": e}
                                                         for i, e in enumerate(exprs)]}]}
    path = tmp_path / "dashboard-rules.yml"
    path.write_text(json.dumps(rules))  # JSON is YAML
    done = subprocess.run(["promtool", "check", "rules", str(path)], check=False, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{len(exprs)} rules found" in done.stdout
