"""The chart's monitoring objects, rendered by the real Helm engine with the monitoring values on.

A ServiceMonitor per role, the PrometheusRule built from the chart's rule file, and the Grafana
dashboard's ConfigMap; the first two checked against JSON schemas of the Prometheus operator's
monitoring.coreos.com/v1 shapes (tests/integration/packaging/schemas, no CRD schema being
vendored), the ConfigMap against Kubernetes' own. The rendered rules are what promtool tests.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import helm_python
import jsonschema
import kubernetes_validate
import pytest
import yaml
from helm_python import Chart

from tests.integration.packaging.conftest import (
    CHART_DIR,
    NAMESPACE,
    RELEASE,
    Manifest,
    by_kind,
    named,
    render,
)
from tests.monitoring.sources import run_promtool

FULL = f"{RELEASE}-tenantdb"
ROLES = ["watcher", "worker", "beat"]
SCHEMAS = Path(__file__).resolve().parent / "schemas"
RUNBOOKS = "https://git.example.com/platform/tenantdb/blob/v0.1.0/docs/operations.md"

MONITORING: dict[str, Any] = {
    "flower": {"enabled": True},
    "metrics": {
        "serviceMonitor": {"enabled": True, "labels": {"release": "prom"}, "interval": "15s"},
        "prometheusRule": {
            "enabled": True,
            "labels": {"release": "prom"},
            "runbookUrl": RUNBOOKS,
        },
        "dashboard": {"enabled": True, "annotations": {"grafana_folder": "Databases"}},
    },
}


def _schema(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((SCHEMAS / name).read_text())
    jsonschema.Draft202012Validator.check_schema(loaded)
    return loaded


def _valid(obj: Manifest, schema: dict[str, Any]) -> None:
    errors = sorted(
        jsonschema.Draft202012Validator(schema).iter_errors(obj), key=lambda e: list(e.path)
    )
    assert not errors, "; ".join(f"{'/'.join(map(str, e.path))}: {e.message}" for e in errors[:5])


@pytest.fixture(scope="module")
def objects(chart: Chart) -> list[Manifest]:
    return render(chart, MONITORING)


def test_the_monitoring_values_pass_the_schema_and_helm_lint(chart: Chart) -> None:
    chart.validate_schema(MONITORING)
    report = helm_python.lint(CHART_DIR, MONITORING, strict=True, namespace=NAMESPACE)
    assert [m for m in report["messages"] if m["severity"] >= 2] == []
    assert report["errors"] == []


@pytest.mark.parametrize(
    ("values", "where"),
    [
        ({"metrics": {"serviceMonitor": {"roles": ["flower"]}}}, "/metrics/serviceMonitor/roles"),
        ({"metrics": {"prometheusRule": {"runbookUrl": "wiki page"}}}, "runbookUrl"),
        ({"metrics": {"prometheusRule": {"severity": "x"}}}, "/metrics/prometheusRule"),
        ({"metrics": {"dashboard": {"labels": {"grafana_dashboard": 1}}}}, "grafana_dashboard"),
        ({"metrics": {"dashboard": {"namespace": "Monitoring"}}}, "/metrics/dashboard/namespace"),
    ],
    ids=["role", "runbook-url", "typo", "label-type", "namespace"],
)
def test_the_schema_rejects_a_bad_monitoring_value(
    chart: Chart, values: dict[str, Any], where: str
) -> None:
    with pytest.raises(helm_python.HelmValuesError) as caught:
        chart.validate_schema(values)
    assert where in str(caught.value)


def test_nothing_of_it_renders_unless_asked(chart: Chart) -> None:
    for values in (
        {},
        {**MONITORING, "targetCluster": {"enabled": True, "assignedNamespaces": ["team-a"]}},
        {"metrics": {**MONITORING["metrics"], "enabled": False}},
    ):
        objects = render(chart, values)
        assert by_kind(objects, "ServiceMonitor") == []
        assert by_kind(objects, "PrometheusRule") == []
        assert [
            c for c in by_kind(objects, "ConfigMap") if c["metadata"]["name"].endswith("-dashboard")
        ] == []


def test_each_role_has_a_service_monitor_that_scrapes_only_its_pods(
    objects: list[Manifest],
) -> None:
    schema = _schema("servicemonitor.json")
    service = named(objects, "Service", f"{FULL}-metrics")
    deployments = {d["metadata"]["name"]: d for d in by_kind(objects, "Deployment")}
    for role in ROLES:
        monitor = named(objects, "ServiceMonitor", f"{FULL}-{role}")
        _valid(monitor, schema)
        assert monitor["metadata"]["labels"]["release"] == "prom"
        assert (
            monitor["spec"]["selector"]["matchLabels"].items()
            <= service["metadata"]["labels"].items()
        ), "it selects the metrics Service"
        assert monitor["spec"]["namespaceSelector"] == {"matchNames": [NAMESPACE]}
        (endpoint,) = monitor["spec"]["endpoints"]
        assert (endpoint["port"], endpoint["path"], endpoint["interval"]) == (
            "metrics",
            "/metrics",
            "15s",
        )
        keep, job = endpoint["relabelings"]
        assert keep["action"] == "keep"
        assert keep["sourceLabels"] == ["__meta_kubernetes_pod_label_app_kubernetes_io_component"]
        assert (job["targetLabel"], job["replacement"]) == ("job", f"{FULL}-{role}")
        # The kept pods are the role's: their label matches, and the Service selects them.
        for name, deployment in deployments.items():
            labels = deployment["spec"]["template"]["metadata"]["labels"]
            kept = labels.get("app.kubernetes.io/component") == keep["regex"]
            assert kept == (name == f"{FULL}-{role}")
            if kept:
                assert service["spec"]["selector"].items() <= labels.items()
    flower = named(objects, "ServiceMonitor", f"{FULL}-flower")
    _valid(flower, schema)
    flower_service = named(objects, "Service", f"{FULL}-flower")
    assert (
        flower["spec"]["selector"]["matchLabels"].items()
        <= flower_service["metadata"]["labels"].items()
    )
    assert [e["port"] for e in flower["spec"]["endpoints"]] == ["http"]
    assert len(by_kind(objects, "ServiceMonitor")) == len(ROLES) + 1


def test_the_roles_scraped_can_be_chosen(chart: Chart) -> None:
    values = {
        "metrics": {"serviceMonitor": {"enabled": True, "roles": ["worker"]}},
        "flower": {"enabled": False},
    }
    names = [m["metadata"]["name"] for m in by_kind(render(chart, values), "ServiceMonitor")]
    assert names == [f"{FULL}-worker"]


def test_the_prometheus_rule_is_the_rule_file_with_the_runbooks_linked(
    objects: list[Manifest], tmp_path: Path
) -> None:
    rule = named(objects, "PrometheusRule", FULL)
    _valid(rule, _schema("prometheusrule.json"))
    assert rule["metadata"]["labels"]["release"] == "prom"
    source = yaml.safe_load((CHART_DIR / "rules" / "tenantdb.rules.yaml").read_text())
    for group in source["groups"]:
        group["rules"] = [_linked(alert) for alert in group["rules"]]
    assert rule["spec"] == source
    # What the Prometheus operator hands Prometheus is a rule file promtool accepts.
    path = tmp_path / "rendered.rules.yaml"
    path.write_text(yaml.safe_dump(rule["spec"]))
    checked = run_promtool("check", "rules", path)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_the_rule_is_not_rendered_with_dead_runbook_links(chart: Chart) -> None:
    values = {"metrics": {"prometheusRule": {"enabled": True}}}
    with pytest.raises(helm_python.HelmRenderError) as caught:
        render(chart, values)
    assert "metrics.prometheusRule.runbookUrl is required" in str(caught.value)


def _rules(rule: Manifest) -> dict[str, dict[str, Any]]:
    return {a["alert"]: a for group in rule["spec"]["groups"] for a in group["rules"]}


def test_an_alert_s_threshold_wait_and_severity_are_values(chart: Chart, tmp_path: Path) -> None:
    settings = {
        "TenantdbOrdersNotReady": {"threshold": 3600, "for": "10m", "severity": "critical"},
        "TenantdbMysqlUnavailable": {"threshold": 0.25},
        "TenantdbBeatSweepStale": {"threshold": 300},
        "TenantdbWatchStale": {"enabled": False},
    }
    values = {"metrics": {"prometheusRule": {**MONITORING["metrics"]["prometheusRule"]}}}
    values["metrics"]["prometheusRule"]["alerts"] = settings
    chart.validate_schema(values)
    alerts = _rules(named(render(chart, values), "PrometheusRule", FULL))
    source = yaml.safe_load((CHART_DIR / "rules" / "tenantdb.rules.yaml").read_text())
    shipped = {a["alert"]: a for group in source["groups"] for a in group["rules"]}

    assert "TenantdbWatchStale" not in alerts
    changed = alerts["TenantdbOrdersNotReady"]
    assert changed["expr"] == shipped["TenantdbOrdersNotReady"]["expr"].replace("> 900", "> 3600")
    assert (changed["for"], changed["labels"]["severity"]) == ("10m", "critical")
    assert alerts["TenantdbMysqlUnavailable"]["expr"].rstrip().endswith("> 0.25")
    stale = alerts["TenantdbBeatSweepStale"]["expr"]
    assert stale.endswith("!= 0) > 300"), "the filter of a never-swept beat is no threshold"
    untouched = set(shipped) - set(settings)
    assert all(alerts[name] == _linked(shipped[name]) for name in untouched)
    path = tmp_path / "tuned.rules.yaml"
    path.write_text(yaml.safe_dump(named(render(chart, values), "PrometheusRule", FULL)["spec"]))
    checked = run_promtool("check", "rules", path)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def _linked(alert: dict[str, Any]) -> dict[str, Any]:
    local = alert["annotations"]["runbook_url"]
    runbook = local.replace("docs/operations.md", RUNBOOKS)
    return {**alert, "annotations": {**alert["annotations"], "runbook_url": runbook}}


def test_an_alert_without_a_threshold_refuses_one(chart: Chart) -> None:
    values = {"metrics": {"prometheusRule": {**MONITORING["metrics"]["prometheusRule"]}}}
    values["metrics"]["prometheusRule"]["alerts"] = {"TenantdbNoLeader": {"threshold": 2}}
    with pytest.raises(helm_python.HelmRenderError) as caught:
        render(chart, values)
    assert "TenantdbNoLeader has no threshold to set" in str(caught.value)


def test_the_schema_knows_every_alert_and_only_those(chart: Chart) -> None:
    source = yaml.safe_load((CHART_DIR / "rules" / "tenantdb.rules.yaml").read_text())
    names = sorted(a["alert"] for group in source["groups"] for a in group["rules"])
    schema = json.loads((CHART_DIR / "values.schema.json").read_text())
    alerts = schema["properties"]["metrics"]["properties"]["prometheusRule"]["properties"]
    assert alerts["alerts"]["propertyNames"]["enum"] == names
    with pytest.raises(helm_python.HelmValuesError) as caught:
        chart.validate_schema({"metrics": {"prometheusRule": {"alerts": {"OrdersNotReady": {}}}}})
    assert "OrdersNotReady" in str(caught.value)


def test_the_dashboard_config_map_carries_the_dashboard_for_the_sidecar(
    objects: list[Manifest], chart: Chart
) -> None:
    config_map = named(objects, "ConfigMap", f"{FULL}-dashboard")
    kubernetes_validate.validate(config_map, "1.30.0", strict=True)
    assert config_map["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert config_map["metadata"]["annotations"] == {"grafana_folder": "Databases"}
    assert config_map["metadata"]["namespace"] == NAMESPACE
    shipped = json.loads(config_map["data"]["tenantdb.json"])
    assert shipped == json.loads((CHART_DIR / "dashboards" / "tenantdb.json").read_text())
    elsewhere = {"metrics": {"dashboard": {"enabled": True, "namespace": "grafana"}}}
    moved = named(render(chart, elsewhere), "ConfigMap", f"{FULL}-dashboard")
    assert moved["metadata"]["namespace"] == "grafana"
