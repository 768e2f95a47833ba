"""The shared objects a pass reads wake the orders that read them, and no other order.

Three ControlPlanes, each in a namespace of its own with one order: ``cp`` (order ``a``),
``other`` (order ``b``) and ``third`` (order ``c``). Each names an object of the same kind: a
MariaDB of the same name beside its Keystone, a store of its own, and the shared ServiceAccount
and Certificate of its namespace. An edit a pass reads of ``cp``'s object wakes ``a``; ``b``
staying asleep is shown with ``third``'s object as the sentinel, edited after it on the same
watch stream. The orders live on the management cluster or on the target cluster ``edge-1``
(the ControlPlanes and the shared objects they name stay where they are): either way each is
woken on its own cluster.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from devstack.kubeclient import KubeApi as Cluster
from tests.integration.watcher.conftest import (
    CERTIFICATE_CRD,
    CLUSTER_SECRET_STORE_CRD,
    MARIADB_CRD,
    ORDERS,
    SECRET_STORE_CRD,
    Published,
    StartWatcher,
    install,
    key,
)
from tests.realclusters import ApiServer

PLANES = "controlplanes.c5c3.io"
# Each ControlPlane and its order's name, by the namespace the ControlPlane lives in.
SIDES = {"cp-ns": ("cp", "a"), "cp-other": ("other", "b"), "cp-third": ("third", "c")}


@dataclass(frozen=True)
class Case:
    """One shared kind: how a ControlPlane names its object, and the object itself."""

    resource: str
    plane: Callable[[str, str], dict[str, Any]]
    """The ControlPlane spec for (its namespace, the cluster Keystone is placed on)."""
    body: Callable[[str], tuple[str, str, dict[str, Any]]]
    """The object of the ControlPlane in a namespace: its name, its namespace, its body."""
    edit: Callable[[Cluster, str, str, str], None]
    """An edit that a pass reads, of the object of that name and namespace, to a new value."""


def _keystone(namespace: str, cluster: str) -> dict[str, Any]:
    keystone: dict[str, Any] = {"namespace": {"name": namespace}}
    if cluster:
        keystone["targetClusterRef"] = {"name": cluster}
    return {
        "infrastructure": {"database": {"clusterRef": {"name": "db"}}},
        "services": {"keystone": keystone},
    }


def _ready(kube: Cluster, name: str, namespace: str, value: str) -> None:
    # What a pass reads of a MariaDB is whether it is Ready: created without a status, it turns
    # Ready on the "first" edit and goes down again on the "second".
    ready = "True" if value == "first" else "False"
    status = {"conditions": [{"type": "Ready", "status": ready, "reason": value}]}
    kube.patch(
        "mariadbs.k8s.mariadb.com", name, {"status": status}, namespace, subresource="status"
    )


def _server(resource: str) -> Callable[[Cluster, str, str, str], None]:
    def edit(kube: Cluster, name: str, namespace: str, value: str) -> None:
        server = {"provider": {"vault": {"server": f"https://{value}.example:8200"}}}
        kube.patch(resource, name, {"spec": server}, namespace)

    return edit


def _annotate(resource: str) -> Callable[[Cluster, str, str, str], None]:
    def edit(kube: Cluster, name: str, namespace: str, value: str) -> None:
        kube.patch(resource, name, {"metadata": {"annotations": {"edited": value}}}, namespace)

    return edit


def _secret_name(kube: Cluster, name: str, namespace: str, value: str) -> None:
    kube.patch("certificates.cert-manager.io", name, {"spec": {"secretName": value}}, namespace)


def _object(api_version: str, kind: str, name: str, namespace: str | None) -> dict[str, Any]:
    meta = {"name": name} if namespace is None else {"name": name, "namespace": namespace}
    return {"apiVersion": api_version, "kind": kind, "metadata": meta, "spec": {}}


def _mariadb(namespace: str) -> tuple[str, str, dict[str, Any]]:
    return "db", namespace, _object("k8s.mariadb.com/v1alpha1", "MariaDB", "db", namespace)


CASES = {
    "mariadb": Case(
        "mariadbs.k8s.mariadb.com", lambda ns, cluster: _keystone(ns, cluster), _mariadb, _ready
    ),
    "secret-store": Case(
        "secretstores.external-secrets.io",
        lambda ns, cluster: {"secretStoreRef": {"kind": "SecretStore", "name": "bao"}},
        lambda ns: ("bao", ns, _object("external-secrets.io/v1", "SecretStore", "bao", ns)),
        _server("secretstores.external-secrets.io"),
    ),
    "cluster-secret-store": Case(
        "clustersecretstores.external-secrets.io",
        lambda ns, cluster: {"secretStoreRef": {"name": f"bao-{ns}"}},
        lambda ns: (
            f"bao-{ns}",
            "",
            _object("external-secrets.io/v1", "ClusterSecretStore", f"bao-{ns}", None),
        ),
        _server("clustersecretstores.external-secrets.io"),
    ),
    "service-account": Case(
        "serviceaccounts",
        lambda ns, cluster: {},
        lambda ns: (
            "order-db-creds",
            ns,
            {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "order-db-creds"}},
        ),
        _annotate("serviceaccounts"),
    ),
    "certificate": Case(
        "certificates.cert-manager.io",
        lambda ns, cluster: {},
        lambda ns: (
            "order-db-openbao-client",
            ns,
            _object("cert-manager.io/v1", "Certificate", "order-db-openbao-client", ns),
        ),
        _secret_name,
    ),
}


def _plane(name: str, namespace: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "c5c3.io/v1alpha1",
        "kind": "ControlPlane",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"namespaceAssignments": [{"namespace": "tenant-a"}], **spec},
    }


def _order(name: str, cp: str, cp_namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "c5c3.io/v1alpha1",
        "kind": "MariaDBDatabase",
        "metadata": {"name": name, "namespace": "tenant-a"},
        "spec": {"controlPlaneRef": {"name": cp, "namespace": cp_namespace}},
    }


@pytest.mark.parametrize(
    ("case", "cluster", "orders_on"),
    [
        pytest.param("mariadb", "", "", id="mariadb-management"),
        pytest.param("mariadb", "edge-1", "", id="mariadb-edge-1"),
        pytest.param("mariadb", "edge-1", "edge-1", id="mariadb-edge-1-orders-edge-1"),
        pytest.param("mariadb", "", "edge-1", id="mariadb-management-orders-edge-1"),
        pytest.param("secret-store", "", "", id="secret-store"),
        pytest.param("secret-store", "", "edge-1", id="secret-store-orders-edge-1"),
        pytest.param("cluster-secret-store", "", "", id="cluster-secret-store"),
        pytest.param("cluster-secret-store", "", "edge-1", id="cluster-secret-store-orders-edge-1"),
        pytest.param("service-account", "", "", id="service-account"),
        pytest.param("service-account", "", "edge-1", id="service-account-orders-edge-1"),
        pytest.param("certificate", "", "", id="certificate"),
        pytest.param("certificate", "", "edge-1", id="certificate-orders-edge-1"),
    ],
)
def test_a_shared_object_wakes_the_orders_that_read_it_and_no_other(
    servers: dict[str, ApiServer],
    start_watcher: StartWatcher,
    published: Published,
    case: str,
    cluster: str,
    orders_on: str,
) -> None:
    shared = CASES[case]
    management = servers["management"].cluster
    kube = servers[cluster or "management"].cluster
    orders = servers[orders_on or "management"].cluster
    install(servers["management"], CERTIFICATE_CRD, SECRET_STORE_CRD, CLUSTER_SECRET_STORE_CRD)
    install(servers["management"], MARIADB_CRD)
    install(servers["edge-1"], MARIADB_CRD)
    for namespace, (cp, order) in SIDES.items():
        for server in servers.values():
            if namespace != "cp-ns":  # the fixture's
                server.cluster.create("namespaces", {"metadata": {"name": namespace}})
        management.create(
            PLANES, _plane(cp, namespace, shared.plane(namespace, cluster)), namespace
        )
        orders.create(ORDERS, _order(order, cp, namespace), "tenant-a")
        name, object_namespace, body = shared.body(namespace)
        kube.create(shared.resource, body, object_namespace)
    start_watcher()

    def edit(namespace: str, value: str) -> None:
        name, object_namespace, _ = shared.body(namespace)
        shared.edit(kube, name, object_namespace, value)

    edit("cp-ns", "first")
    published.take(key("a", orders_on))
    edit("cp-third", "first")  # the sentinel: past it, the first edit was mapped
    published.take(key("c", orders_on))
    assert key("b", orders_on) not in published, (
        f"another ControlPlane's order woke on {shared.resource}"
    )

    name, object_namespace, _ = shared.body("cp-ns")
    kube.delete(shared.resource, name, object_namespace)
    published.take(key("a", orders_on))
    edit("cp-third", "second")
    published.take(key("c", orders_on))
    assert key("b", orders_on) not in published
