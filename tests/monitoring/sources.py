"""What the monitoring tests read: the chart's rule file and dashboard, their PromQL, promtool,
and the metric names tenantdb's processes export.

The metric names come from the prometheus_client registry of a fresh interpreter that imports
the modules defining tenantdb's metrics, so nothing another test imported counts.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import promql_parser
import pytest
import yaml

REPO_ROOT = Path(__file__).resolve().parents[2]
CHART_DIR = REPO_ROOT / "charts" / "tenantdb"
RULES_FILE = CHART_DIR / "rules" / "tenantdb.rules.yaml"
RULES_TEST_FILE = Path(__file__).resolve().parent / "tenantdb.rules.test.yaml"
DASHBOARD_FILE = CHART_DIR / "dashboards" / "tenantdb.json"
OPERATIONS_DOC = REPO_ROOT / "docs" / "operations.md"

METRIC_MODULES = ("tenantdb.adapters.metrics", "tenantdb.adapters.mysqladmin")
"""The modules that define tenantdb's metrics."""

GRAFANA_VARIABLES = {"$__rate_interval": "5m", "${namespace}": ".*", "$namespace": ".*"}
"""What a dashboard expression's Grafana variables stand for when it is checked alone."""

_LISTING = """
import importlib, json, sys
from prometheus_client import REGISTRY
for module in sys.argv[1:]:
    importlib.import_module(module)
suffixes = {"counter": ["_total"], "histogram": ["_bucket", "_sum", "_count"],
            "summary": ["", "_sum", "_count"]}
names = sorted(family.name + suffix for family in REGISTRY.collect()
               for suffix in suffixes.get(family.type, [""]))
print(json.dumps(names))
"""


def promtool() -> str:
    """The path of promtool; the test fails (never skips) when it is not installed."""
    found = shutil.which("promtool")
    if found is None:
        pytest.fail(
            "promtool is not installed; install Debian's prometheus package "
            "(apt-get install prometheus), as .ci/run does"
        )
    return found


def run_promtool(*args: str | Path) -> subprocess.CompletedProcess[str]:
    """Run promtool with these arguments; its output, whatever its exit code."""
    return subprocess.run(
        [promtool(), *map(str, args)], capture_output=True, text=True, timeout=60, check=False
    )


def load_rules(path: Path = RULES_FILE) -> dict[str, Any]:
    """A rule file as YAML."""
    loaded: dict[str, Any] = yaml.safe_load(path.read_text())
    return loaded


def alerts(rules: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """Every alerting rule of a rule file."""
    groups = (rules or load_rules())["groups"]
    return [rule for group in groups for rule in group["rules"] if "alert" in rule]


def load_dashboard() -> dict[str, Any]:
    """The dashboard as JSON."""
    loaded: dict[str, Any] = json.loads(DASHBOARD_FILE.read_text())
    return loaded


def dashboard_panels(dashboard: dict[str, Any] | None = None) -> Iterator[dict[str, Any]]:
    """Every panel of the dashboard, those inside collapsed rows included."""
    for panel in (dashboard or load_dashboard())["panels"]:
        yield panel
        yield from panel.get("panels", [])


def dashboard_queries(dashboard: dict[str, Any] | None = None) -> list[tuple[str, str]]:
    """(panel title, PromQL with the Grafana variables filled in) of every panel target."""
    found = []
    for panel in dashboard_panels(dashboard):
        for target in panel.get("targets", []):
            expr = str(target["expr"])
            for variable, value in GRAFANA_VARIABLES.items():
                expr = expr.replace(variable, value)
            found.append((str(panel["title"]), expr))
    return found


def metric_names(expr: str) -> set[str]:
    """The metric names an expression selects (promql-parser's AST)."""
    names: set[str] = set()

    def visit(node: Any) -> None:
        if isinstance(node, promql_parser.VectorSelector):
            if node.name:
                names.add(node.name)
            else:
                names.update(m.value for m in node.matchers.matchers if m.name == "__name__")

    promql_parser.walk(promql_parser.parse(expr), visit)
    return names


def exported_metrics() -> set[str]:
    """Every series name tenantdb's processes export (counters with ``_total``, histograms'
    ``_bucket``, ``_sum`` and ``_count``), from the registry of a fresh interpreter."""
    listing = subprocess.run(
        [sys.executable, "-c", _LISTING, *METRIC_MODULES],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
        cwd=REPO_ROOT,
    )
    return set(json.loads(listing.stdout))


def markdown_anchor(heading: str) -> str:
    """The anchor a Markdown renderer gives a heading (lower case, punctuation dropped)."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")
