"""What enqueues and what does not: every watched kind, on the management and a target cluster.

A negative ("this change enqueues nothing") is shown with a sentinel: a change on the same watch
stream made after it, whose key arriving proves the stream got past the first change.
"""

from __future__ import annotations

import pytest

from tests.integration.watcher.conftest import (
    ORDERS,
    Published,
    StartWatcher,
    key,
    labels_of,
    order,
    secret,
)
from tests.realclusters import ApiServer


def _condition(kind: str, status: str) -> dict[str, str]:
    return {
        "type": kind,
        "status": status,
        "reason": "Testing",
        "message": "set by the test",
        "lastTransitionTime": "2030-01-01T00:00:00Z",
    }


@pytest.mark.parametrize("cluster", ["", "edge-1"], ids=["management", "edge-1"])
def test_order_edits_enqueue_and_tenantdbs_own_writes_do_not(
    servers: dict[str, ApiServer],
    start_watcher: StartWatcher,
    published: Published,
    cluster: str,
) -> None:
    kube = servers[cluster or "management"].cluster
    start_watcher()

    kube.create(ORDERS, order("app"), "tenant-a")
    kube.create(ORDERS, order("sentinel"), "tenant-a")
    published.take(key("app", cluster))
    published.take(key("sentinel", cluster))

    # tenantdb's status write and finalizer change are its own echoes.
    kube.patch(
        ORDERS,
        "app",
        {"status": {"conditions": [_condition("Ready", "False")]}},
        "tenant-a",
        subresource="status",
    )
    kube.patch(
        ORDERS,
        "app",
        {"metadata": {"finalizers": ["c5c3.io/mariadbdatabase-teardown"]}},
        "tenant-a",
    )
    kube.patch(ORDERS, "sentinel", {"metadata": {"annotations": {"poke": "1"}}}, "tenant-a")
    published.take(key("sentinel", cluster))
    assert key("app", cluster) not in published

    kube.patch(ORDERS, "app", {"spec": {"deletionPolicy": "Delete"}}, "tenant-a")
    published.take(key("app", cluster))
    kube.patch(ORDERS, "app", {"metadata": {"annotations": {"touch": "1"}}}, "tenant-a")
    published.take(key("app", cluster))

    kube.delete(ORDERS, "app", "tenant-a")  # held by the finalizer: deletion starts
    published.take(key("app", cluster))
    kube.patch(ORDERS, "app", {"metadata": {"finalizers": []}}, "tenant-a")  # now it is gone
    published.take(key("app", cluster))


@pytest.mark.parametrize("cluster", ["", "edge-1"], ids=["management", "edge-1"])
def test_an_edited_or_deleted_delivered_secret_enqueues_its_order(
    servers: dict[str, ApiServer],
    start_watcher: StartWatcher,
    published: Published,
    cluster: str,
) -> None:
    kube = servers[cluster or "management"].cluster
    created = kube.create(ORDERS, order("app"), "tenant-a")
    start_watcher()
    owner = {
        "apiVersion": "c5c3.io/v1alpha1",
        "kind": "MariaDBDatabase",
        "name": "app",
        "uid": created["metadata"]["uid"],
        "controller": True,
    }
    body = secret("app-credentials", "tenant-a", labels_of("app", cluster=None))
    body["metadata"]["ownerReferences"] = [owner]
    kube.create("secrets", body, "tenant-a")
    published.take(key("app", cluster))

    kube.patch("secrets", "app-credentials", {"data": {"password": "ZWRpdGVk"}}, "tenant-a")
    published.take(key("app", cluster))
    kube.delete("secrets", "app-credentials", "tenant-a")
    published.take(key("app", cluster))


def test_labelled_eso_objects_on_management_enqueue_the_order_their_labels_name(
    servers: dict[str, ApiServer], start_watcher: StartWatcher, published: Published
) -> None:
    kube = servers["management"].cluster
    start_watcher()

    # The Secret ESO writes for a target-cluster order names that cluster in its label.
    kube.create(
        "secrets", secret("x-credentials", "cp-ns", labels_of("far", cluster="edge-1")), "cp-ns"
    )
    published.take(key("far", "edge-1"))

    external_secret = {
        "apiVersion": "external-secrets.io/v1",
        "kind": "ExternalSecret",
        "metadata": {"name": "near-credentials", "namespace": "cp-ns", "labels": labels_of("near")},
        "spec": {"refreshInterval": "24h"},
    }
    kube.create("externalsecrets.external-secrets.io", external_secret, "cp-ns")
    published.take(key("near"))
    kube.patch(
        "externalsecrets.external-secrets.io",
        "near-credentials",
        {"status": {"conditions": [{"type": "Ready", "status": "True"}]}},
        "cp-ns",
        subresource="status",
    )
    published.take(key("near"))

    generator = {
        "apiVersion": "generators.external-secrets.io/v1alpha1",
        "kind": "VaultDynamicSecret",
        "metadata": {"name": "near-generator", "namespace": "cp-ns", "labels": labels_of("near")},
        "spec": {"path": "database/mariadb/creds/x"},
    }
    kube.create("vaultdynamicsecrets.generators.external-secrets.io", generator, "cp-ns")
    published.take(key("near"))


def _control_plane(name: str, keystone: dict[str, object] | None = None) -> dict[str, object]:
    spec: dict[str, object] = {"namespaceAssignments": [{"namespace": "tenant-a"}]}
    if keystone is not None:
        spec["services"] = {"keystone": keystone}
    return {
        "apiVersion": "c5c3.io/v1alpha1",
        "kind": "ControlPlane",
        "metadata": {"name": name, "namespace": "cp-ns"},
        "spec": spec,
    }


def _database(name: str, namespace: str, labels: dict[str, str]) -> dict[str, object]:
    return {
        "apiVersion": "k8s.mariadb.com/v1alpha1",
        "kind": "Database",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {"mariaDbRef": {"name": "mariadb"}},
    }


def test_a_database_cr_maps_only_where_a_control_plane_places_keystone(
    servers: dict[str, ApiServer], start_watcher: StartWatcher, published: Published
) -> None:
    management, edge = servers["management"].cluster, servers["edge-1"].cluster
    management.create(
        "controlplanes.c5c3.io", _control_plane("cp", {"namespace": {"name": "keystone"}}), "cp-ns"
    )
    management.create(
        "controlplanes.c5c3.io",
        _control_plane(
            "cp-edge", {"namespace": {"name": "keystone"}, "targetClusterRef": {"name": "edge-1"}}
        ),
        "cp-ns",
    )
    start_watcher()
    databases = "databases.k8s.mariadb.com"

    # An owner's own Database CR in an assigned namespace wakes nothing, whatever its labels.
    management.create(databases, _database("owned", "tenant-a", labels_of("ghost")), "tenant-a")
    management.create(databases, _database("placed", "keystone", labels_of("app")), "keystone")
    published.take(key("app"))
    assert key("ghost") not in published

    # On edge-1, Keystone is placed by cp-edge; the CR's cluster label names the order's cluster.
    edge.create(databases, _database("owned", "tenant-a", labels_of("ghost")), "tenant-a")
    edge.create(
        databases, _database("placed", "keystone", labels_of("app", cluster="edge-1")), "keystone"
    )
    published.take(key("app", "edge-1"))
    assert key("ghost") not in published


def test_control_plane_changes_fan_out_to_the_orders_that_reference_it(
    servers: dict[str, ApiServer], start_watcher: StartWatcher, published: Published
) -> None:
    kube, edge = servers["management"].cluster, servers["edge-1"].cluster
    planes = "controlplanes.c5c3.io"
    kube.create(planes, _control_plane("cp"), "cp-ns")
    kube.create(planes, _control_plane("other"), "cp-ns")
    for name, cp in (("a", "cp"), ("b", "cp"), ("c", "other")):
        kube.create(ORDERS, order(name, cp=cp), "tenant-a")
    # Orders on a target cluster name the management cluster's ControlPlanes just the same.
    edge.create(ORDERS, order("far", cp="cp"), "tenant-a")
    edge.create(ORDERS, order("away", cp="other"), "tenant-a")
    start_watcher()
    mine = (key("a"), key("b"), key("far", "edge-1"))

    kube.patch(planes, "cp", {"spec": {"namespaceAssignments": [{"namespace": "x"}]}}, "cp-ns")
    for woken in mine:
        published.take(woken)

    ready = {"status": {"conditions": [{"type": "DBCredentialsReady", "status": "True"}]}}
    kube.patch(planes, "cp", ready, "cp-ns", subresource="status")
    for woken in mine:
        published.take(woken)
    # One event's keys go out together, the target cluster's after the management's: by now
    # an order of another ControlPlane woken by either edit would be here.
    assert key("c") not in published
    assert key("away", "edge-1") not in published, "another ControlPlane's target order woke"

    # Another condition changing, DBCredentialsReady staying True: no fan-out.
    still = {
        "status": {
            "conditions": [
                {"type": "DBCredentialsReady", "status": "True"},
                {"type": "Available", "status": "False"},
            ]
        }
    }
    kube.patch(planes, "cp", still, "cp-ns", subresource="status")
    kube.patch(planes, "other", {"spec": {"namespaceAssignments": []}}, "cp-ns")
    published.take(key("c"))
    published.take(key("away", "edge-1"))
    for woken in mine:
        assert woken not in published
