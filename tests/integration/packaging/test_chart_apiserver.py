"""The rendered chart, offered to a real kube-apiserver in a server-side dry run.

Every rendered ConfigMap, Secret, Service, ServiceAccount and CRD goes through the server's
admission with `dryRun=All` and `fieldValidation=Strict`, so an unknown or misplaced field is
refused, and nothing is stored. The other kinds are checked in test_chart.py and
test_chart_real_kube.py.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from helm_python import Chart
from kubernetes import client, config

from tests.integration.packaging.conftest import NAMESPACE, Manifest, render
from tests.integration.packaging.test_chart import ALL_ON, TARGET
from tests.realclusters import start_servers, write_kubeconfig

DRY = {"dry_run": "All", "field_validation": "Strict"}


@pytest.fixture(scope="module")
def api_client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[client.ApiClient]:
    """An official-client ApiClient for a fresh management cluster with the release namespace."""
    directory = tmp_path_factory.mktemp("kube")
    with start_servers(directory / "servers", ("management",)) as servers:
        path: Path = directory / "kubeconfig"
        write_kubeconfig(path, servers)
        api = config.new_client_from_config(config_file=str(path), context="management")
        client.CoreV1Api(api).create_namespace({"metadata": {"name": NAMESPACE}})
        yield api
        api.close()


def _dry_run_create(api: client.ApiClient, obj: Manifest) -> Any:
    core = client.CoreV1Api(api)
    namespaced: dict[str, Callable[..., Any]] = {
        "ConfigMap": core.create_namespaced_config_map,
        "Secret": core.create_namespaced_secret,
        "Service": core.create_namespaced_service,
        "ServiceAccount": core.create_namespaced_service_account,
    }
    kind = obj["kind"]
    if kind == "CustomResourceDefinition":
        return client.ApiextensionsV1Api(api).create_custom_resource_definition(obj, **DRY)
    return namespaced[kind](NAMESPACE, obj, **DRY)


SERVED = {"ConfigMap", "Secret", "Service", "ServiceAccount"}


@pytest.mark.parametrize(
    "values", [{}, ALL_ON, TARGET], ids=["defaults", "all-on", "target-cluster"]
)
def test_served_kinds_pass_admission_without_being_stored(
    api_client: client.ApiClient, chart: Chart, values: dict[str, Any]
) -> None:
    objects = [o for o in render(chart, values) if o["kind"] in SERVED]
    assert objects
    for obj in objects:
        answer = _dry_run_create(api_client, obj)
        assert answer.metadata.name == obj["metadata"]["name"]
    core = client.CoreV1Api(api_client)
    assert core.list_namespaced_config_map(NAMESPACE).items == []
    assert core.list_namespaced_service(NAMESPACE).items == []
    assert core.list_namespaced_service_account(NAMESPACE).items == []


def test_generated_crds_pass_admission(api_client: client.ApiClient, chart: Chart) -> None:
    for crd in chart.crds:
        body = yaml.safe_load(crd["data"])
        answer = _dry_run_create(api_client, body)
        assert answer.metadata.name == body["metadata"]["name"]
    listed = client.ApiextensionsV1Api(api_client).list_custom_resource_definition().items
    assert listed == []


def test_a_misplaced_field_is_refused(api_client: client.ApiClient, chart: Chart) -> None:
    # The devstack's Service spec is open (it keeps unknown fields), its ConfigMap is not.
    configmap = next(o for o in render(chart) if o["kind"] == "ConfigMap")
    configmap["spec"] = configmap.pop("data")
    with pytest.raises(client.ApiException) as caught:
        _dry_run_create(api_client, configmap)
    assert caught.value.status in (400, 422)
