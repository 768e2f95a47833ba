"""The MysqlDatabase CRD, served by a real kube-apiserver: its rules refuse what they must."""

from __future__ import annotations

import copy
import json
import os
import secrets
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config
from kubernetes.client.rest import ApiException

from tenantdb.core.mysqldatabase import crd
from tenantdb.core.mysqldatabase.naming import IDENTITY
from tests.realclusters import start_servers, write_kubeconfig

KUBECTL = str(Path(__file__).resolve().parents[2] / ".venv/bin/kubectl")

GROUP, VERSION, PLURAL = IDENTITY.group, IDENTITY.version, IDENTITY.plural
BODY: dict[str, Any] = {
    "apiVersion": IDENTITY.api_version,
    "kind": "MysqlDatabase",
    "metadata": {"name": "tenant-acme"},
    "spec": {
        "groupRef": {"name": "main"},
        "databaseName": "acme_wms",
        "owner": {"secretName": "acme-mysql-owner"},
        "grants": [{"username": "maester", "privileges": ["SELECT", "DELETE"]}],
    },
}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, client.ApiClient]]:
    """A real cluster serving the CRD: its kubeconfig and an official-client ApiClient."""
    directory = tmp_path_factory.mktemp("kube")
    with start_servers(directory / "servers", ("management",)) as servers:
        servers["management"].install(crd.build_crd())
        path = directory / "kubeconfig"
        write_kubeconfig(path, servers)
        api = config.new_client_from_config(config_file=str(path), context="management")
        try:
            yield path, api
        finally:
            api.close()


@pytest.fixture
def custom_with_crd(served: tuple[Path, client.ApiClient]) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(served[1])


@pytest.fixture
def namespace(served: tuple[Path, client.ApiClient]) -> str:
    """A namespace of the test's own."""
    name = f"t-{secrets.token_hex(4)}"
    client.CoreV1Api(served[1]).create_namespace({"metadata": {"name": name}})
    return name


@pytest.fixture
def kubectl(
    served: tuple[Path, client.ApiClient], tmp_path: Path
) -> Callable[..., subprocess.CompletedProcess[str]]:
    """Run kubectl against the server; the completed process (never raises)."""
    env = {**os.environ, "KUBECONFIG": str(served[0]), "HOME": str(tmp_path)}

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [KUBECTL, *args], capture_output=True, text=True, timeout=30, env=env, check=False
        )

    return run


def _body(**spec: Any) -> dict[str, Any]:
    body = copy.deepcopy(BODY)
    body["spec"].update(spec)
    return body


def _refused(call: Any) -> list[str]:
    with pytest.raises(ApiException) as err:
        call()
    assert err.value.status == 422
    status: dict[str, Any] = json.loads(err.value.body)
    return [cause.get("message", "") for cause in status["details"]["causes"]]


def test_an_order_gets_its_defaults(
    custom_with_crd: client.CustomObjectsApi, namespace: str
) -> None:
    made = custom_with_crd.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, BODY)
    spec = made["spec"]
    assert (spec["characterSet"], spec["collation"]) == ("utf8mb4", "utf8mb4_unicode_ci")
    assert spec["owner"]["privileges"] == ["ALL PRIVILEGES"]
    assert spec["deletionPolicy"] == "Retain"


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        pytest.param({"databaseName": "Sys"}, crd.SYSTEM_SCHEMA, id="system-schema"),
        pytest.param(
            {"owner": {"secretName": "o", "privileges": ["ALL PRIVILEGES", "SELECT"]}},
            crd.OWNER_ALL_ALONE,
            id="owner-all-combined",
        ),
        pytest.param(
            {"grants": [{"username": "m", "privileges": ["ALL PRIVILEGES", "DROP"]}]},
            crd.GRANTS_ALL_ALONE,
            id="grant-all-combined",
        ),
        pytest.param({"databaseName": "acme-wms"}, "should match", id="pattern"),
        pytest.param(
            {"grants": [{"username": "m", "privileges": ["GRANT OPTION"]}]},
            "Unsupported value",
            id="grant-option",
        ),
        pytest.param(
            {"grants": [{"username": "evil'@'%", "privileges": ["SELECT"]}]},
            "should match",
            id="username-pattern",
        ),
    ],
)
def test_the_api_server_refuses_what_the_rules_forbid(
    custom_with_crd: client.CustomObjectsApi, namespace: str, spec: dict[str, Any], message: str
) -> None:
    messages = _refused(
        lambda: custom_with_crd.create_namespaced_custom_object(
            GROUP, VERSION, namespace, PLURAL, _body(**spec)
        )
    )
    assert any(message in m for m in messages), messages


@pytest.mark.parametrize(
    ("patch", "message"),
    [
        pytest.param({"spec": {"databaseName": "other_db"}}, crd.DATABASE_NAME_IMMUTABLE, id="db"),
        pytest.param(
            {"spec": {"groupRef": {"name": "other"}}}, crd.GROUP_REF_IMMUTABLE, id="group"
        ),
    ],
)
def test_the_schema_and_the_group_are_immutable(
    custom_with_crd: client.CustomObjectsApi, namespace: str, patch: dict[str, Any], message: str
) -> None:
    custom_with_crd.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, BODY)
    messages = _refused(
        lambda: custom_with_crd.patch_namespaced_custom_object(
            GROUP, VERSION, namespace, PLURAL, "tenant-acme", patch
        )
    )
    assert any(message in m for m in messages), messages


def test_status_is_a_subresource_a_caller_cannot_write_through_the_object(
    custom_with_crd: client.CustomObjectsApi, namespace: str
) -> None:
    body = _body()
    body["status"] = {"phase": "Ready"}
    made = custom_with_crd.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, body)
    assert "status" not in made or not made["status"].get("phase")


def test_kubectl_lists_orders_by_short_name_with_the_printer_columns(
    custom_with_crd: client.CustomObjectsApi, namespace: str, kubectl: Any
) -> None:
    custom_with_crd.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, BODY)
    listed = kubectl("get", "mydb", "-n", namespace)
    assert listed.returncode == 0, listed.stderr
    header = listed.stdout.splitlines()[0].split()
    assert header == ["NAME", "GROUP", "DATABASE", "OWNER", "PHASE", "READY", "AGE"]
    assert "POLICY" in kubectl("get", "mysql", "-n", namespace, "-o", "wide").stdout
