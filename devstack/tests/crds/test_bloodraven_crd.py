"""The MysqlFailoverGroup CRD, served by a real kube-apiserver: defaults, enums and its rules."""

from __future__ import annotations

import copy
import json
import secrets
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client, config
from kubernetes.client.rest import ApiException

from devstack import realkube
from devstack.crds import bloodraven, install, wait_established
from devstack.kubeclient import RemoteCluster

GROUP, VERSION, PLURAL = bloodraven.GROUP, bloodraven.VERSION, bloodraven.PLURAL
CLUSTER = "management"
BODY: dict[str, Any] = {
    "apiVersion": f"{GROUP}/{VERSION}",
    "kind": "MysqlFailoverGroup",
    "metadata": {"name": "main"},
    "spec": {
        "sites": [
            {"name": "dc1", "zone": "z1", "lbIP": "10.0.0.1"},
            {"name": "dc2", "zone": "z2", "lbIP": "10.0.0.2"},
            {"name": "dr", "role": "dr-only"},
        ],
        "credentials": {"operatorSecret": "main-operator", "appSecret": "main-app"},
        "tls": {"issuerRef": {"name": "ca", "kind": "ClusterIssuer"}, "secretName": "main-tls"},
        "storage": {"size": "10Gi"},
    },
}


@pytest.fixture(scope="module")
def api_client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[client.ApiClient]:
    """An official-client ApiClient of a real cluster serving the CRD."""
    missing = [n for n in realkube.missing_binaries() if n != "kube-controller-manager"]
    if missing:
        pytest.fail(f"{', '.join(missing)} not built in tools/kube/bin; run `make kube`")
    with realkube.start_real_clusters(tmp_path_factory.mktemp("kube"), [CLUSTER]) as real:
        pair = (str(real.pki.admin_cert), str(real.pki.admin_key))
        remote = RemoteCluster(CLUSTER, real[CLUSTER].server, ca_pem=real.ca_pem, client_cert=pair)
        try:
            crd = [bloodraven.mysql_failover_group()]
            install(remote, crd)
            wait_established(remote, crd)
        finally:
            remote.close()
        api = config.new_client_from_config(str(real[CLUSTER].kubeconfig), context=CLUSTER)
        try:
            yield api
        finally:
            api.close()


@pytest.fixture
def groups(api_client: client.ApiClient) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(api_client)


@pytest.fixture
def namespace(api_client: client.ApiClient) -> str:
    """A namespace of the test's own."""
    name = f"t-{secrets.token_hex(4)}"
    client.CoreV1Api(api_client).create_namespace({"metadata": {"name": name}})
    return name


def _body(**spec: Any) -> dict[str, Any]:
    body = copy.deepcopy(BODY)
    body["spec"].update(spec)
    return {**body, "spec": {k: v for k, v in body["spec"].items() if v is not None}}


def _refused(call: Any) -> list[str]:
    with pytest.raises(ApiException) as err:
        call()
    assert err.value.status == 422
    status: dict[str, Any] = json.loads(err.value.body)
    return [f"{c.get('field', '')}: {c.get('message', '')}" for c in status["details"]["causes"]]


def test_a_group_gets_its_defaults_keeps_unknown_fields_and_takes_a_status(
    groups: client.CustomObjectsApi, namespace: str
) -> None:
    made = groups.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, BODY)
    assert [s["role"] for s in made["spec"]["sites"]] == [
        "primary-candidate",
        "primary-candidate",
        "dr-only",
    ]
    assert made["spec"]["storage"] == {"size": "10Gi"}
    status = {
        "activeSite": "dc1",
        "plannedFailover": {"phase": "Draining", "targetSite": "dc2", "message": "m"},
        "restoreInPlace": {"phase": "", "confirmTokenUsed": "t"},
        "lastFailoverTarget": "dc1",
        "conditions": [{"type": "Ready", "status": "True", "anything": 1}],
    }
    patched = groups.patch_namespaced_custom_object_status(
        GROUP, VERSION, namespace, PLURAL, "main", {"status": status}
    )
    assert patched["status"] == status
    bad = {"status": {"plannedFailover": {"phase": "Sideways"}}}
    messages = _refused(
        lambda: groups.patch_namespaced_custom_object_status(
            GROUP, VERSION, namespace, PLURAL, "main", bad
        )
    )
    assert any("Unsupported value" in m for m in messages), messages


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        pytest.param(
            {"sites": [{"name": "dc1"}, {"name": "dc1"}]}, "site names must be unique", id="dup"
        ),
        pytest.param(
            {"sites": [{"name": "dc1"}, {"name": "dc2", "role": "dr-only"}]},
            "at least two sites must have role primary-candidate",
            id="one-candidate",
        ),
        pytest.param(
            {"secretName": "main-dsn"},
            "exactly one of spec.secretName and spec.credentials must be set",
            id="both",
        ),
        pytest.param(
            {"credentials": None},
            "exactly one of spec.secretName and spec.credentials must be set",
            id="neither",
        ),
        pytest.param({"credentials": {"appSecret": "a"}}, "operatorSecret", id="no-operator"),
        pytest.param({"sites": [{"name": ""}, {"name": "b"}]}, "at least 1 chars", id="empty"),
        pytest.param(
            {"sites": [{"name": "a", "role": "witness"}, {"name": "b"}]},
            "Unsupported value",
            id="role",
        ),
        pytest.param(
            {"tls": {"issuerRef": {"name": "ca", "kind": "Vault"}}},
            "Unsupported value",
            id="issuer-kind",
        ),
    ],
)
def test_the_rules_refuse_what_bloodraven_refuses(
    groups: client.CustomObjectsApi, namespace: str, spec: dict[str, Any], message: str
) -> None:
    messages = _refused(
        lambda: groups.create_namespaced_custom_object(
            GROUP, VERSION, namespace, PLURAL, _body(**spec)
        )
    )
    assert any(message in m for m in messages), messages


def test_a_legacy_dsn_secret_alone_is_accepted(
    groups: client.CustomObjectsApi, namespace: str
) -> None:
    made = groups.create_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL, _body(credentials=None, secretName="main-dsn")
    )
    assert made["spec"]["secretName"] == "main-dsn"
    restore = {"spec": {"restoreInPlace": {"confirm": "main-2025-01-01"}}}
    patched = groups.patch_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL, "main", restore
    )
    assert patched["spec"]["restoreInPlace"] == {"confirm": "main-2025-01-01"}
