"""Core REST semantics through the official client: CRUD, metadata, errors, status, finalizers."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from devstack.kube.server import ClusterServer


def _status(exc: ApiException) -> dict[str, Any]:
    body: dict[str, Any] = json.loads(exc.body)
    return body


def _secret(name: str, **data: str) -> client.V1Secret:
    return client.V1Secret(metadata=client.V1ObjectMeta(name=name), string_data=data)


def test_version_and_discovery(api_client: client.ApiClient) -> None:
    assert client.VersionApi(api_client).get_code().major == "1"
    groups = {g.name for g in client.ApisApi(api_client).get_api_versions().groups}
    assert {"coordination.k8s.io", "apiextensions.k8s.io", "authentication.k8s.io"} <= groups
    resources = {r.name for r in client.CoreV1Api(api_client).get_api_resources().resources}
    assert {
        "namespaces",
        "secrets",
        "serviceaccounts",
        "serviceaccounts/token",
        "configmaps",
        "services",
    } <= resources


def test_create_get_metadata_and_string_data(core: client.CoreV1Api, namespace: str) -> None:
    created = core.create_namespaced_secret(namespace, _secret("db", password="s3cret"))
    meta = created.metadata
    assert meta.uid
    assert meta.creation_timestamp
    assert int(meta.resource_version) > 0
    assert created.data == {"password": base64.b64encode(b"s3cret").decode()}
    assert created.string_data is None
    fetched = core.read_namespaced_secret("db", namespace)
    assert fetched.metadata.resource_version == meta.resource_version
    assert fetched.type == "Opaque"


def test_resource_version_is_monotonic(core: client.CoreV1Api, namespace: str) -> None:
    a = core.create_namespaced_config_map(
        namespace, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="a"))
    )
    b = core.create_namespaced_config_map(
        namespace, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="b"))
    )
    c = core.patch_namespaced_config_map("a", namespace, {"data": {"k": "v"}})
    assert (
        int(a.metadata.resource_version)
        < int(b.metadata.resource_version)
        < int(c.metadata.resource_version)
    )


def test_create_existing_name_is_409(core: client.CoreV1Api, namespace: str) -> None:
    core.create_namespaced_secret(namespace, _secret("dup"))
    with pytest.raises(ApiException) as err:
        core.create_namespaced_secret(namespace, _secret("dup"))
    assert err.value.status == 409
    status = _status(err.value)
    assert status["reason"] == "AlreadyExists"
    assert status["message"] == 'secrets "dup" already exists'


def test_missing_object_is_404_with_real_wording(core: client.CoreV1Api, namespace: str) -> None:
    with pytest.raises(ApiException) as err:
        core.read_namespaced_secret("nope", namespace)
    assert err.value.status == 404
    assert _status(err.value)["message"] == 'secrets "nope" not found'
    assert _status(err.value)["details"] == {"name": "nope", "kind": "secrets"}


def test_create_in_missing_namespace_is_404(core: client.CoreV1Api) -> None:
    with pytest.raises(ApiException) as err:
        core.create_namespaced_secret("no-such-ns", _secret("x"))
    assert err.value.status == 404
    assert _status(err.value)["message"] == 'namespaces "no-such-ns" not found'


def test_stale_update_is_409(core: client.CoreV1Api, namespace: str) -> None:
    first = core.create_namespaced_secret(namespace, _secret("stale", a="1"))
    core.patch_namespaced_secret("stale", namespace, {"stringData": {"a": "2"}})
    first.string_data = {"a": "3"}
    with pytest.raises(ApiException) as err:
        core.replace_namespaced_secret("stale", namespace, first)
    assert err.value.status == 409
    assert _status(err.value)["message"] == (
        'Operation cannot be fulfilled on secrets "stale": the object has been modified; '
        "please apply your changes to the latest version and try again"
    )


def test_invalid_name_is_422(core: client.CoreV1Api, namespace: str) -> None:
    with pytest.raises(ApiException) as err:
        core.create_namespaced_config_map(
            namespace, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="Bad_Name"))
        )
    assert err.value.status == 422
    status = _status(err.value)
    assert status["message"].startswith(
        'ConfigMap "Bad_Name" is invalid: metadata.name: Invalid value: "Bad_Name": '
        "a lowercase RFC 1123 subdomain"
    )
    assert status["details"]["causes"][0]["field"] == "metadata.name"
    assert status["details"]["causes"][0]["reason"] == "FieldValueInvalid"


def test_label_and_field_selectors(core: client.CoreV1Api, namespace: str) -> None:
    for name, labels in [
        ("a", {"tier": "db", "env": "prod"}),
        ("b", {"tier": "db"}),
        ("c", {"tier": "web"}),
    ]:
        core.create_namespaced_config_map(
            namespace, client.V1ConfigMap(metadata=client.V1ObjectMeta(name=name, labels=labels))
        )

    def names(**kw: Any) -> list[str]:
        return [i.metadata.name for i in core.list_namespaced_config_map(namespace, **kw).items]

    assert names(label_selector="tier=db") == ["a", "b"]
    assert names(label_selector="tier==db,env") == ["a"]
    assert names(label_selector="tier!=db") == ["c"]
    assert names(label_selector="tier in (web, db),!env") == ["b", "c"]
    assert names(label_selector="tier notin (db)") == ["c"]
    assert names(field_selector="metadata.name=b") == ["b"]
    assert names(field_selector=f"metadata.namespace={namespace},metadata.name!=b") == ["a", "c"]
    with pytest.raises(ApiException) as err:
        core.list_namespaced_config_map(namespace, field_selector="data.x=1")
    assert err.value.status == 400


def test_chunked_list(core: client.CoreV1Api, namespace: str) -> None:
    for i in range(5):
        core.create_namespaced_config_map(
            namespace, client.V1ConfigMap(metadata=client.V1ObjectMeta(name=f"cm-{i}"))
        )
    seen: list[str] = []
    token = None
    pages = 0
    while True:
        page = core.list_namespaced_config_map(namespace, limit=2, _continue=token)
        pages += 1
        seen += [i.metadata.name for i in page.items]
        token = page.metadata._continue
        if not token:
            break
        assert page.metadata.remaining_item_count == 5 - len(seen)
    assert pages == 3
    assert seen == [f"cm-{i}" for i in range(5)]


def test_finalizer_whole_life(core: client.CoreV1Api, namespace: str) -> None:
    body = client.V1ConfigMap(
        metadata=client.V1ObjectMeta(name="held", finalizers=["c5c3.io/cleanup"])
    )
    core.create_namespaced_config_map(namespace, body)
    core.delete_namespaced_config_map("held", namespace)
    held = core.read_namespaced_config_map("held", namespace)
    assert held.metadata.deletion_timestamp is not None
    with pytest.raises(ApiException) as err:
        core.patch_namespaced_config_map(
            "held", namespace, {"metadata": {"finalizers": ["c5c3.io/cleanup", "other"]}}
        )
    assert err.value.status == 422
    assert (
        "no new finalizers can be added if the object is being deleted"
        in _status(err.value)["message"]
    )
    core.patch_namespaced_config_map("held", namespace, {"metadata": {"finalizers": None}})
    with pytest.raises(ApiException) as gone:
        core.read_namespaced_config_map("held", namespace)
    assert gone.value.status == 404


def test_delete_without_finalizers_returns_success_status(
    core: client.CoreV1Api, namespace: str
) -> None:
    core.create_namespaced_secret(namespace, _secret("bye"))
    status = core.delete_namespaced_secret("bye", namespace)
    assert status.status == "Success"
    assert status.details.name == "bye"


def test_garbage_collection_of_owned_secret(
    server: ClusterServer, core: client.CoreV1Api, namespace: str
) -> None:
    owner = core.create_namespaced_config_map(
        namespace, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="owner"))
    )
    ref = client.V1OwnerReference(
        api_version="v1", kind="ConfigMap", name="owner", uid=owner.metadata.uid, controller=True
    )
    core.create_namespaced_secret(
        namespace,
        client.V1Secret(metadata=client.V1ObjectMeta(name="owned", owner_references=[ref])),
    )
    core.create_namespaced_secret(namespace, _secret("unowned"))
    core.delete_namespaced_config_map("owner", namespace)
    assert server.cluster.wait_idle()
    names = [s.metadata.name for s in core.list_namespaced_secret(namespace).items]
    assert names == ["unowned"]


def test_dangling_owner_reference_is_collected(
    server: ClusterServer, core: client.CoreV1Api, namespace: str
) -> None:
    ref = client.V1OwnerReference(
        api_version="v1", kind="ConfigMap", name="ghost", uid="00000000-0000-0000-0000-000000000000"
    )
    core.create_namespaced_secret(
        namespace,
        client.V1Secret(metadata=client.V1ObjectMeta(name="orphan", owner_references=[ref])),
    )
    assert server.cluster.wait_idle()
    assert core.list_namespaced_secret(namespace).items == []


def test_namespace_deletion_removes_contents(
    server: ClusterServer, core: client.CoreV1Api, namespace: str
) -> None:
    core.create_namespaced_secret(namespace, _secret("inside"))
    core.delete_namespace(namespace)
    assert server.cluster.wait_idle()
    with pytest.raises(ApiException) as err:
        core.read_namespace(namespace)
    assert err.value.status == 404


def test_terminating_namespace_refuses_new_content(
    server: ClusterServer, core: client.CoreV1Api, namespace: str
) -> None:
    core.create_namespaced_config_map(
        namespace, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="held", finalizers=["x/y"]))
    )
    core.delete_namespace(namespace)
    assert server.cluster.wait_idle()
    assert core.read_namespace(namespace).status.phase == "Terminating"
    with pytest.raises(ApiException) as err:
        core.create_namespaced_secret(namespace, _secret("late"))
    assert err.value.status == 403
    assert _status(err.value)["message"] == (
        f'secrets "late" is forbidden: unable to create new content in namespace {namespace} '
        "because it is being terminated"
    )


def test_unauthenticated_request_is_401(
    client_with_token: Callable[[str], client.ApiClient],
) -> None:
    with pytest.raises(ApiException) as err:
        client.CoreV1Api(client_with_token("wrong")).list_namespace()
    assert err.value.status == 401


def test_service_and_lease(
    api_client: client.ApiClient, core: client.CoreV1Api, namespace: str
) -> None:
    svc = client.V1Service(
        metadata=client.V1ObjectMeta(name="db"),
        spec=client.V1ServiceSpec(ports=[client.V1ServicePort(port=3306)], selector={"app": "db"}),
    )
    created = core.create_namespaced_service(namespace, svc)
    assert created.spec.cluster_ip
    assert created.spec.ports[0].protocol == "TCP"
    leases = client.CoordinationV1Api(api_client)
    lease = client.V1Lease(
        metadata=client.V1ObjectMeta(name="leader"),
        spec=client.V1LeaseSpec(holder_identity="me", lease_duration_seconds=15),
    )
    leases.create_namespaced_lease(namespace, lease)
    assert leases.read_namespaced_lease("leader", namespace).spec.holder_identity == "me"


def test_request_counters_and_audit(
    server: ClusterServer, core: client.CoreV1Api, namespace: str
) -> None:
    server.cluster.reset_counters()
    server.cluster.enable_audit()
    core.create_namespaced_secret(namespace, _secret("counted"))
    core.read_namespaced_secret("counted", namespace)
    core.read_namespaced_secret("counted", namespace)
    counts = server.cluster.counters()
    assert counts[("get", "secrets")] == 2
    assert counts[("create", "secrets")] == 1
    entry = server.cluster.audit_log[-1]
    assert (entry.verb, entry.resource, entry.name, entry.user) == (
        "create",
        "secrets",
        "counted",
        "devstack-admin",
    )
    assert entry.field_manager == "OpenAPI-Generator"
