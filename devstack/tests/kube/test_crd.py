"""Custom resources through the official client.

Serving, defaults, pruning, each validation failure with the real wording, CEL, the status split.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from devstack.tests.kube.conftest import DB_CRD

GROUP, VERSION, PLURAL = "c5c3.io", "v1alpha1", "mariadbdatabases"
# What the real server adds when an enum, required, length, count or type failure keeps it from
# running the CRD's CEL rules.
UNCHECKED = (
    "some validation rules were not checked because the object was invalid; correct the "
    "existing errors to complete validation"
)


def _db(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "MariaDBDatabase",
        "metadata": {"name": name},
        "spec": spec,
    }


def _create(custom: client.CustomObjectsApi, ns: str, body: dict[str, Any]) -> dict[str, Any]:
    created: dict[str, Any] = custom.create_namespaced_custom_object(
        GROUP, VERSION, ns, PLURAL, body
    )
    return created


def _invalid(custom: client.CustomObjectsApi, ns: str, body: dict[str, Any]) -> dict[str, Any]:
    with pytest.raises(ApiException) as err:
        _create(custom, ns, body)
    assert err.value.status == 422
    status: dict[str, Any] = json.loads(err.value.body)
    assert status["reason"] == "Invalid"
    return status


pytestmark = pytest.mark.usefixtures("db_crd")


def test_crd_is_established_and_served(api_client: client.ApiClient) -> None:
    crd = client.ApiextensionsV1Api(api_client).read_custom_resource_definition(
        "mariadbdatabases.c5c3.io"
    )
    conditions = {c.type: c.status for c in crd.status.conditions}
    assert conditions == {"NamesAccepted": "True", "Established": "True"}
    resources = client.CustomObjectsApi(api_client).get_api_resources(GROUP, VERSION).resources
    assert {r.name for r in resources} == {"mariadbdatabases", "mariadbdatabases/status"}


def test_create_returns_201_with_defaults_and_generation(
    custom: client.CustomObjectsApi, namespace: str
) -> None:
    created = _create(custom, namespace, _db("orders", databaseName="orders"))
    assert created["spec"] == {"databaseName": "orders", "engine": "mariadb", "sizeGi": 1}
    assert created["metadata"]["generation"] == 1
    assert created["metadata"]["uid"]


def test_unknown_fields_are_pruned(custom: client.CustomObjectsApi, namespace: str) -> None:
    body = _db("pruned", databaseName="p", bogus=True)
    body["extra"] = 1
    created = _create(custom, namespace, body)
    assert "bogus" not in created["spec"]
    assert "extra" not in created


def test_required_field(custom: client.CustomObjectsApi, namespace: str) -> None:
    status = _invalid(custom, namespace, _db("noname"))
    assert status["message"] == (
        'MariaDBDatabase.c5c3.io "noname" is invalid: '
        f"[spec.databaseName: Required value, <nil>: Invalid value: null: {UNCHECKED}]"
    )
    assert status["details"]["causes"] == [
        {"reason": "FieldValueRequired", "message": "Required value", "field": "spec.databaseName"},
        {
            "reason": "FieldValueInvalid",
            "message": f"Invalid value: null: {UNCHECKED}",
            "field": "<nil>",
        },
    ]
    assert status["details"]["kind"] == "MariaDBDatabase"
    assert status["details"]["group"] == GROUP


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        (
            {"databaseName": "Bad"},
            'spec.databaseName: Invalid value: "Bad": '
            "spec.databaseName in body should match '^[a-z][a-z0-9_]*$'",
        ),
        (
            {"databaseName": ""},
            'spec.databaseName: Invalid value: "": '
            "spec.databaseName in body should be at least 1 chars long",
        ),
        (
            {"databaseName": "a" * 17},
            "[spec.databaseName: Too long: may not be more than 16 bytes, "
            f"<nil>: Invalid value: null: {UNCHECKED}]",
        ),
        (
            {"databaseName": "a", "engine": "postgres"},
            '[spec.engine: Unsupported value: "postgres": supported values: "mariadb", "mysql", '
            f"<nil>: Invalid value: null: {UNCHECKED}]",
        ),
        (
            {"databaseName": "a", "sizeGi": 0},
            "spec.sizeGi: Invalid value: 0: "
            "spec.sizeGi in body should be greater than or equal to 1",
        ),
        (
            {"databaseName": "a", "sizeGi": 101},
            "spec.sizeGi: Invalid value: 101: "
            "spec.sizeGi in body should be less than or equal to 100",
        ),
        (
            {"databaseName": "a", "sizeGi": "big"},
            '[spec.sizeGi: Invalid value: "string": '
            'spec.sizeGi in body must be of type integer: "string", '
            f"<nil>: Invalid value: null: {UNCHECKED}]",
        ),
        (
            {"databaseName": "a", "users": ["x", "y", "z"]},
            "[spec.users: Too many: 3: must have at most 2 items, "
            f"<nil>: Invalid value: null: {UNCHECKED}]",
        ),
        (
            {"databaseName": "a", "charset": "nope"},
            '[spec.charset: Invalid value: "nope": '
            'spec.charset in body must be of type uuid: "nope", '
            f"<nil>: Invalid value: null: {UNCHECKED}]",
        ),
        (
            {"databaseName": "a", "namespace": "much-too-long"},
            "spec.namespace: Invalid value: namespace too long",
        ),
    ],
    ids=[
        "pattern",
        "minLength",
        "maxLength",
        "enum",
        "minimum",
        "maximum",
        "type",
        "maxItems",
        "format",
        "cel-escaped",
    ],
)
def test_each_validation_failure(
    custom: client.CustomObjectsApi, namespace: str, spec: dict[str, Any], expected: str
) -> None:
    status = _invalid(custom, namespace, _db("bad", **spec))
    assert status["message"] == f'MariaDBDatabase.c5c3.io "bad" is invalid: {expected}'


def test_several_failures_are_listed_together(
    custom: client.CustomObjectsApi, namespace: str
) -> None:
    status = _invalid(custom, namespace, _db("many", databaseName="A", sizeGi=0))
    assert status["message"].startswith(
        'MariaDBDatabase.c5c3.io "many" is invalid: [spec.databaseName: Invalid value'
    )
    assert len(status["details"]["causes"]) == 2


def test_transition_rule_blocks_engine_change(
    custom: client.CustomObjectsApi, namespace: str
) -> None:
    _create(custom, namespace, _db("engine", databaseName="e", engine="mysql"))
    with pytest.raises(ApiException) as err:
        custom.patch_namespaced_custom_object(
            GROUP, VERSION, namespace, PLURAL, "engine", {"spec": {"engine": "mariadb"}}
        )
    assert err.value.status == 422
    assert json.loads(err.value.body)["message"] == (
        'MariaDBDatabase.c5c3.io "engine" is invalid: spec: Invalid value: engine is immutable'
    )
    ok = custom.patch_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL, "engine", {"spec": {"sizeGi": 5}}
    )
    assert ok["metadata"]["generation"] == 2


def test_status_subresource_split(custom: client.CustomObjectsApi, namespace: str) -> None:
    _create(custom, namespace, _db("split", databaseName="s"))
    ignored = custom.patch_namespaced_custom_object(
        GROUP,
        VERSION,
        namespace,
        PLURAL,
        "split",
        {"status": {"observedGeneration": 7}, "metadata": {"labels": {"a": "b"}}},
    )
    assert "status" not in ignored
    assert ignored["metadata"]["labels"] == {"a": "b"}
    written = custom.patch_namespaced_custom_object_status(
        GROUP,
        VERSION,
        namespace,
        PLURAL,
        "split",
        {
            "status": {
                "observedGeneration": 1,
                "conditions": [{"type": "Ready", "status": "True"}],
            },
            "spec": {"sizeGi": 50},
        },
    )
    assert written["status"]["observedGeneration"] == 1
    assert written["spec"]["sizeGi"] == 1
    assert written["metadata"]["generation"] == 1


def test_update_without_resource_version_is_422(
    custom: client.CustomObjectsApi, namespace: str
) -> None:
    created = _create(custom, namespace, _db("rv", databaseName="r"))
    del created["metadata"]["resourceVersion"]
    with pytest.raises(ApiException) as err:
        custom.replace_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "rv", created)
    assert err.value.status == 422
    assert (
        "metadata.resourceVersion: Invalid value: 0: must be specified for an update"
        in json.loads(err.value.body)["message"]
    )


def test_custom_object_404_wording(custom: client.CustomObjectsApi, namespace: str) -> None:
    with pytest.raises(ApiException) as err:
        custom.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "x")
    assert json.loads(err.value.body)["message"] == 'mariadbdatabases.c5c3.io "x" not found'


def test_strategic_merge_on_custom_resource_is_415(
    api_client: client.ApiClient, namespace: str, custom: client.CustomObjectsApi
) -> None:
    _create(custom, namespace, _db("smp", databaseName="s"))
    with pytest.raises(ApiException) as err:
        custom.patch_namespaced_custom_object(
            GROUP,
            VERSION,
            namespace,
            PLURAL,
            "smp",
            {"spec": {"sizeGi": 2}},
            _content_type="application/strategic-merge-patch+json",
        )
    assert err.value.status == 415


def test_json_patch(custom: client.CustomObjectsApi, namespace: str) -> None:
    _create(custom, namespace, _db("jp", databaseName="j"))
    patched = custom.patch_namespaced_custom_object(
        GROUP,
        VERSION,
        namespace,
        PLURAL,
        "jp",
        [
            {"op": "test", "path": "/spec/sizeGi", "value": 1},
            {"op": "replace", "path": "/spec/sizeGi", "value": 3},
        ],
        _content_type="application/json-patch+json",
    )
    assert patched["spec"]["sizeGi"] == 3


def test_deleting_the_crd_removes_instances(
    server: Any, api_client: client.ApiClient, custom: client.CustomObjectsApi, namespace: str
) -> None:
    _create(custom, namespace, _db("gone", databaseName="g"))
    client.ApiextensionsV1Api(api_client).delete_custom_resource_definition(
        "mariadbdatabases.c5c3.io"
    )
    assert server.cluster.wait_idle()
    with pytest.raises(ApiException) as err:
        custom.list_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL)
    assert err.value.status == 404


def test_invalid_cel_rule_rejects_the_crd(api_client: client.ApiClient) -> None:
    crd = copy.deepcopy(DB_CRD)
    crd["metadata"]["name"] = "others.c5c3.io"
    crd["spec"]["names"] = {"plural": "others", "kind": "Other"}
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"][
        "x-kubernetes-validations"
    ] = [{"rule": "self.a ==="}]
    with pytest.raises(ApiException) as err:
        client.ApiextensionsV1Api(api_client).create_custom_resource_definition(crd)
    assert err.value.status == 422
    assert "x-kubernetes-validations[0].rule" in json.loads(err.value.body)["message"]
