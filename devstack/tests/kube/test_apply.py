"""Server-side apply and field ownership through the official client.

The three Secret data-key cases are the delivered-Secret contract tenantdb relies on.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

APPLY = "application/apply-patch+yaml"


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def _apply_secret(
    core: client.CoreV1Api,
    ns: str,
    data: dict[str, str],
    manager: str = "tenantdb",
    force: bool = True,
) -> Any:
    body = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "creds", "namespace": ns},
        "data": {k: _b64(v) for k, v in data.items()},
    }
    return core.patch_namespaced_secret(
        "creds", ns, body, field_manager=manager, force=force, _content_type=APPLY
    )


def _data(core: client.CoreV1Api, ns: str) -> dict[str, str]:
    secret = core.read_namespaced_secret("creds", ns)
    return {k: base64.b64decode(v).decode() for k, v in (secret.data or {}).items()}


def test_apply_creates_with_201_and_records_the_manager(
    api_client: client.ApiClient, namespace: str
) -> None:
    body = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "creds"},
        "data": {"user": _b64("u")},
    }
    _, status, _ = client.CoreV1Api(api_client).patch_namespaced_secret_with_http_info(
        "creds", namespace, body, field_manager="tenantdb", _content_type=APPLY
    )
    assert status == 201
    managed = (
        client.CoreV1Api(api_client)
        .read_namespaced_secret("creds", namespace)
        .metadata.managed_fields
    )
    assert [(m.manager, m.operation) for m in managed] == [("tenantdb", "Apply")]
    assert managed[0].fields_v1 == {"f:data": {"f:user": {}}}


def test_key_edited_by_another_manager_is_rewritten_on_forced_apply(
    core: client.CoreV1Api, namespace: str
) -> None:
    _apply_secret(core, namespace, {"user": "app", "password": "good"})
    core.patch_namespaced_secret(
        "creds", namespace, {"data": {"password": _b64("tampered")}}, field_manager="intruder"
    )
    assert _data(core, namespace)["password"] == "tampered"
    _apply_secret(core, namespace, {"user": "app", "password": "good"})
    assert _data(core, namespace) == {"user": "app", "password": "good"}


def test_conflict_without_force_names_the_manager(core: client.CoreV1Api, namespace: str) -> None:
    _apply_secret(core, namespace, {"password": "good"})
    core.patch_namespaced_secret(
        "creds", namespace, {"data": {"password": _b64("tampered")}}, field_manager="intruder"
    )
    with pytest.raises(ApiException) as err:
        _apply_secret(core, namespace, {"password": "good"}, force=False)
    assert err.value.status == 409
    status = json.loads(err.value.body)
    assert (
        status["message"]
        == 'Apply failed with 1 conflict: conflict with "intruder" using v1: .data.password'
    )
    assert status["details"]["causes"] == [
        {
            "reason": "FieldManagerConflict",
            "message": 'conflict with "intruder" using v1',
            "field": ".data.password",
        }
    ]


def test_key_another_manager_adds_stays(core: client.CoreV1Api, namespace: str) -> None:
    _apply_secret(core, namespace, {"user": "app"})
    core.patch_namespaced_secret(
        "creds", namespace, {"data": {"note": _b64("mine")}}, field_manager="someone-else"
    )
    _apply_secret(core, namespace, {"user": "app2"})
    assert _data(core, namespace) == {"user": "app2", "note": "mine"}


def test_key_the_manager_stops_applying_disappears(core: client.CoreV1Api, namespace: str) -> None:
    _apply_secret(core, namespace, {"user": "app", "legacy": "old"})
    _apply_secret(core, namespace, {"user": "app"})
    assert _data(core, namespace) == {"user": "app"}


def test_key_shared_with_another_applier_stays_when_one_stops(
    core: client.CoreV1Api, namespace: str
) -> None:
    _apply_secret(core, namespace, {"user": "app", "shared": "x"})
    _apply_secret(core, namespace, {"shared": "x"}, manager="other", force=False)
    _apply_secret(core, namespace, {"user": "app"})
    assert _data(core, namespace) == {"user": "app", "shared": "x"}


def test_apply_on_custom_resource_status_with_list_map(
    custom: client.CustomObjectsApi, namespace: str, db_crd: Any
) -> None:
    g, v, p = "c5c3.io", "v1alpha1", "mariadbdatabases"
    obj = {
        "apiVersion": f"{g}/{v}",
        "kind": "MariaDBDatabase",
        "metadata": {"name": "db"},
        "spec": {"databaseName": "db"},
    }
    custom.patch_namespaced_custom_object(
        g, v, namespace, p, "db", obj, field_manager="tenantdb", _content_type=APPLY
    )
    status = {**obj, "status": {"conditions": [{"type": "Ready", "status": "False"}]}}
    custom.patch_namespaced_custom_object_status(
        g, v, namespace, p, "db", status, field_manager="tenantdb", _content_type=APPLY
    )
    other = {**obj, "status": {"conditions": [{"type": "Synced", "status": "True"}]}}
    result = custom.patch_namespaced_custom_object_status(
        g, v, namespace, p, "db", other, field_manager="operator", _content_type=APPLY
    )
    assert {c["type"]: c["status"] for c in result["status"]["conditions"]} == {
        "Ready": "False",
        "Synced": "True",
    }
    managers = {
        (m["manager"], m.get("subresource", "")) for m in result["metadata"]["managedFields"]
    }
    assert managers == {("tenantdb", ""), ("tenantdb", "status"), ("operator", "status")}


def test_strategic_merge_keeps_finalizers_merged(core: client.CoreV1Api, namespace: str) -> None:
    core.create_namespaced_config_map(
        namespace, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="smp", finalizers=["a/b"]))
    )
    patched = core.patch_namespaced_config_map(
        "smp", namespace, {"metadata": {"finalizers": ["c/d"]}}
    )
    assert patched.metadata.finalizers == ["a/b", "c/d"]
    patched = core.patch_namespaced_config_map(
        "smp", namespace, {"metadata": {"$deleteFromPrimitiveList/finalizers": ["a/b", "c/d"]}}
    )
    assert patched.metadata.finalizers is None
