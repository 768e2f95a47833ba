"""The dashboard's and the alerts' PromQL: it parses, and it names only metrics tenantdb exports.

Every expression is parsed by promql-parser and by the real promtool (as the rules of a
temporary rule file); the metric names it selects are checked against the prometheus_client
registry of tenantdb's metric modules.
"""

from __future__ import annotations

from pathlib import Path

import promql_parser
import pytest
import yaml

from tests.monitoring.sources import (
    alerts,
    dashboard_panels,
    dashboard_queries,
    exported_metrics,
    load_dashboard,
    load_rules,
    metric_names,
    run_promtool,
)

PROCESS_METRICS = ("process_", "python_")
"""prometheus_client's own metrics, which every process exports too; no panel needs them."""


@pytest.fixture(scope="module")
def exported() -> set[str]:
    names = exported_metrics()
    assert "tenantdb_orders" in names, "the registry listing found tenantdb's metrics"
    return names


def _unknown(names: set[str], exported: set[str]) -> set[str]:
    return {n for n in names if n not in exported or n.startswith(PROCESS_METRICS)}


def test_every_dashboard_expression_parses() -> None:
    queries = dashboard_queries()
    assert len(queries) >= 20
    for title, expr in queries:
        assert "$" not in expr, f"{title}: a Grafana variable the check does not know: {expr}"
        promql_parser.parse(expr)


def test_promtool_parses_every_dashboard_expression(tmp_path: Path) -> None:
    rules = [
        {"record": f"dashboard:panel_{i}", "expr": expr}
        for i, (_, expr) in enumerate(dashboard_queries())
    ]
    path = tmp_path / "dashboard.rules.yaml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}))
    checked = run_promtool("check", "rules", path)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_promtool_refuses_an_expression_that_does_not_parse(tmp_path: Path) -> None:
    path = tmp_path / "broken.rules.yaml"
    broken = {"record": "x:y", "expr": "sum by (queue (tenantdb_queue_depth)"}
    path.write_text(yaml.safe_dump({"groups": [{"name": "broken", "rules": [broken]}]}))
    assert run_promtool("check", "rules", path).returncode != 0


def test_the_dashboard_uses_only_metrics_tenantdb_exports(exported: set[str]) -> None:
    for title, expr in dashboard_queries():
        names = metric_names(expr)
        assert names, f"{title}: selects no metric"
        assert _unknown(names, exported) == set(), f"{title}: {expr}"


def test_the_alerts_use_only_metrics_tenantdb_exports(exported: set[str]) -> None:
    for rule in alerts():
        names = metric_names(str(rule["expr"]))
        assert names
        assert _unknown(names, exported) == set(), f"{rule['alert']}: {rule['expr']}"


def test_a_misspelt_metric_is_caught(exported: set[str]) -> None:
    assert _unknown(metric_names("sum(tenantdb_order)"), exported) == {"tenantdb_order"}
    assert _unknown(metric_names("rate(tenantdb_step_retries[5m])"), exported) == {
        "tenantdb_step_retries"
    }, "a counter is exported with _total"
    assert _unknown(metric_names("tenantdb_refresh_lag_seconds"), exported) == {
        "tenantdb_refresh_lag_seconds"
    }, "a histogram only as its _bucket, _sum and _count"


def test_every_metric_an_alert_watches_has_a_panel() -> None:
    shown = set().union(*(metric_names(expr) for _, expr in dashboard_queries()))
    for rule in alerts(load_rules()):
        assert metric_names(str(rule["expr"])) <= shown, f"{rule['alert']} has no panel"


def test_the_panels_are_laid_out_on_the_grid_and_use_the_datasource_variable() -> None:
    dashboard = load_dashboard()
    panels = list(dashboard_panels(dashboard))
    ids = [p["id"] for p in panels]
    assert len(ids) == len(set(ids)), "panel ids are unique"
    variables = {v["name"] for v in dashboard["templating"]["list"]}
    assert {"datasource", "namespace"} <= variables
    for panel in panels:
        grid = panel["gridPos"]
        assert grid["x"] >= 0
        assert grid["x"] + grid["w"] <= 24, panel["title"]
        if panel["type"] != "row":
            assert panel["datasource"]["uid"] == "${datasource}", panel["title"]
            assert all('namespace=~"$namespace"' in t["expr"] for t in panel["targets"])
