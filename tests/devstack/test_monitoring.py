"""deploy/monitoring: the alert rules and the Grafana dashboard name only metrics rollwright
exports (read from the gateway's and a worker's registries, and the workflows' SDK counters),
the rules pass promtool's checks and unit tests (Debian's `prometheus` package), and
docs/operations.md describes every metric exported."""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import pytest
import yaml
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from activities.metrics import WorkerMetrics
from gateway.metrics import GatewayMetrics
from tests.support.paths import REPO_ROOT
from workflows.deployment import pinning

MONITORING = REPO_ROOT / "deploy" / "monitoring"
NAME = re.compile(r"\brollwright_[a-z_]+\b")
SUFFIXES = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count"), "gauge": ("",)}


def exported(registry: CollectorRegistry) -> dict[str, str]:
    """Every sample name the registry exposes → its family's name."""
    names = {}
    for family in text_string_to_metric_families(generate_latest(registry).decode()):
        # `_created` families are the client library's creation times, not ours
        if not family.name.startswith("rollwright_") or family.name.endswith("_created"):
            continue
        for suffix in SUFFIXES.get(family.type, ("",)):
            names[family.name + suffix] = family.name
    return names


def all_exported() -> dict[str, str]:
    worker = WorkerMetrics()
    worker.watch_github(dict)
    names = exported(GatewayMetrics().registry) | exported(worker.registry)
    names[pinning.FAILURES_METRIC] = pinning.FAILURES_METRIC  # the SDK's, counters unsuffixed
    return names


def rule_expressions() -> list[str]:
    rules = yaml.safe_load((MONITORING / "alerts.yml").read_text())
    return [rule["expr"] for group in rules["groups"] for rule in group["rules"]]


def dashboard_expressions() -> list[str]:
    dashboard = json.loads((MONITORING / "dashboard.json").read_text())
    return [target["expr"] for panel in dashboard["panels"] for target in panel["targets"]]


def test_the_registries_export_what_the_rules_and_dashboard_need() -> None:
    names = all_exported()
    assert "rollwright_root_queue_depth" in names  # the fleet collector is registered
    assert "rollwright_github_rate_limit_remaining" in names
    for expr in rule_expressions() + dashboard_expressions():
        used = NAME.findall(expr)
        assert used, expr
        unknown = [name for name in used if name not in names]
        assert not unknown, f"{expr!r} names metrics nothing exports: {unknown}"


def test_the_dashboard_is_a_grafana_dashboard() -> None:
    dashboard = json.loads((MONITORING / "dashboard.json").read_text())
    assert dashboard["uid"] == "rollwright" and dashboard["panels"]
    ids = [panel["id"] for panel in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    for panel in dashboard["panels"]:
        assert panel["datasource"]["uid"] == "${datasource}" and panel["targets"], panel


def test_operations_doc_describes_every_metric() -> None:
    doc = (REPO_ROOT / "docs" / "operations.md").read_text()
    missing = sorted({family for family in all_exported().values() if family not in doc})
    assert not missing, f"docs/operations.md does not mention {missing}"


PROMTOOL = shutil.which("promtool")


@pytest.mark.skipif(PROMTOOL is None, reason="promtool is missing (Debian package prometheus)")
def test_the_alert_rules_pass_promtool() -> None:
    assert PROMTOOL is not None
    checked = subprocess.run(
        [PROMTOOL, "check", "rules", "alerts.yml"],
        cwd=MONITORING,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    tested = subprocess.run(
        [PROMTOOL, "test", "rules", "alerts.test.yml"],
        cwd=MONITORING,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert tested.returncode == 0, tested.stdout + tested.stderr
