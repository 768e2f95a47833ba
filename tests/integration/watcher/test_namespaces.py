"""A target cluster that grants tenantdb only what its chart renders: per-namespace watches.

edge-1 gets the chart's target-cluster RBAC (rendered by the real Helm engine) and nothing else,
and the watcher talks to it with a token of the chart's ServiceAccount: it may list and watch
orders and Secrets only in the assigned namespaces, and Database CRs only where Keystone is
placed (the Keystone deployment's own access grants those). The namespaces come from the
ControlPlanes on the management cluster and follow them as they change; a namespace's order
watch listing again replaces only that namespace's orders in what a ControlPlane wakes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from devstack.chart import apply_rbac, render_chart, service_account_of, service_account_token
from tests.integration.watcher.conftest import (
    ORDERS,
    Published,
    StartWatcher,
    key,
    labels_of,
    metric,
    order,
    secret,
    settings_for,
)
from tests.realclusters import ApiServer, kubeconfig
from tests.support import wait_for

RELEASE_NAMESPACE = "tenantdb-system"
PLANES = "controlplanes.c5c3.io"
DATABASES = "databases.k8s.mariadb.com"


def _plane(assigned: list[str]) -> dict[str, Any]:
    return {
        "apiVersion": "c5c3.io/v1alpha1",
        "kind": "ControlPlane",
        "metadata": {"name": "cp", "namespace": "cp-ns"},
        "spec": {
            "namespaceAssignments": [
                {"namespace": ns, "targetClusterRef": {"name": "edge-1"}} for ns in assigned
            ],
            "services": {
                "keystone": {
                    "namespace": {"name": "keystone"},
                    "targetClusterRef": {"name": "edge-1"},
                }
            },
        },
    }


@pytest.fixture
def granted_kubeconfig(servers: dict[str, ApiServer], tmp_path: Path) -> Path:
    """A kubeconfig whose edge-1 user is the chart's ServiceAccount with its target grants."""
    edge = servers["edge-1"].cluster
    edge.create("namespaces", {"metadata": {"name": "tenant-b"}})
    values = {
        "targetCluster": {
            "enabled": True,
            "assignedNamespaces": ["tenant-a", "tenant-b"],
            "placedNamespaces": ["keystone"],
        }
    }
    objects = render_chart(values, namespace=RELEASE_NAMESPACE)
    apply_rbac(edge, objects, RELEASE_NAMESPACE)
    account = service_account_of(objects)
    # What a placed Keystone's namespace grants tenantdb on its own: its Database CRs.
    subject = {"kind": "ServiceAccount", "name": account, "namespace": RELEASE_NAMESPACE}
    rule = {"apiGroups": ["k8s.mariadb.com"], "resources": ["databases"], "verbs": ["*"]}
    edge.create(
        "roles.rbac.authorization.k8s.io",
        {"metadata": {"name": "keystone-databases"}, "rules": [rule]},
        "keystone",
    )
    edge.create(
        "rolebindings.rbac.authorization.k8s.io",
        {
            "metadata": {"name": "keystone-databases"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "Role",
                "name": "keystone-databases",
            },
            "subjects": [subject],
        },
        "keystone",
    )
    config = kubeconfig(servers, current="management")
    token = service_account_token(edge, RELEASE_NAMESPACE, account)
    for user in config["users"]:
        if user["name"] == "edge-1-admin":
            user["user"] = {"token": token}
    path = tmp_path / "granted-kubeconfig"
    path.write_text(yaml.safe_dump(config))
    return path


def test_a_target_cluster_is_watched_in_the_namespaces_assigned_there_and_follows_them(
    servers: dict[str, ApiServer],
    start_watcher: StartWatcher,
    published: Published,
    granted_kubeconfig: Path,
    key_prefix: str,
) -> None:
    management, edge = servers["management"].cluster, servers["edge-1"].cluster
    management.create(PLANES, _plane(["tenant-a"]), "cp-ns")
    edge.create(ORDERS, order("early"), "tenant-a")
    edge.create(ORDERS, order("waiting", namespace="tenant-b"), "tenant-b")
    settings = settings_for(granted_kubeconfig, key_prefix).model_copy(
        update={"target_watch_scope": "namespaces"}
    )
    watcher = start_watcher(settings=settings, wait=False)

    published.take(key("early", "edge-1"), timeout=15)
    # (A kind module another test loaded may add a watch of its own; the chart grants it none.)
    ours = {"Database", "MariaDBDatabase", "Secret"}
    expected = [
        ("edge-1", "Database", "keystone"),
        ("edge-1", "MariaDBDatabase", "tenant-a"),
        ("edge-1", "Secret", "tenant-a"),
    ]
    wait_for(
        lambda: (
            [w for w in watcher.watches(listed=True) if w[0] == "edge-1" and w[1] in ours]
            == expected
        ),
        10.0,
        f"edge-1 is not watched in the assigned and placed namespaces: {watcher.watches()}",
    )
    created = edge.create(ORDERS, order("app"), "tenant-a")
    published.take(key("app", "edge-1"))
    delivered = secret("app-credentials", "tenant-a", labels_of("app", cluster=None))
    delivered["metadata"]["ownerReferences"] = [
        {
            "apiVersion": "c5c3.io/v1alpha1",
            "kind": "MariaDBDatabase",
            "name": "app",
            "uid": created["metadata"]["uid"],
            "controller": True,
        }
    ]
    edge.create("secrets", delivered, "tenant-a")
    published.take(key("app", "edge-1"))
    edge.patch("secrets", "app-credentials", {"data": {"password": "ZWRpdGVk"}}, "tenant-a")
    published.take(key("app", "edge-1"))
    placed = {
        "apiVersion": "k8s.mariadb.com/v1alpha1",
        "kind": "Database",
        "metadata": {
            "name": "app",
            "namespace": "keystone",
            "labels": labels_of("app", cluster="edge-1"),
        },
        "spec": {"mariaDbRef": {"name": "mariadb"}},
    }
    edge.create(DATABASES, placed, "keystone")
    published.take(key("app", "edge-1"))
    assert key("waiting", "edge-1", "tenant-b") not in published, "tenant-b is not assigned yet"
    forbidden = metric(
        "tenantdb_watch_restarts_total", cluster="edge-1", kind="MariaDBDatabase", reason="error"
    )
    assert forbidden == 0, "no watch asked for more than the chart grants"

    # Assigned while running: its orders are listed and its events served, without a restart.
    management.patch(PLANES, "cp", {"spec": _plane(["tenant-a", "tenant-b"])["spec"]}, "cp-ns")
    published.take(key("waiting", "edge-1", "tenant-b"), timeout=5)
    # The ControlPlane's edit woke the orders it already knew of on edge-1, as it does each time.
    published.take(key("app", "edge-1"))
    published.take(key("early", "edge-1"))
    edge.patch(ORDERS, "waiting", {"metadata": {"annotations": {"poke": "1"}}}, "tenant-b")
    published.take(key("waiting", "edge-1", "tenant-b"), timeout=5)

    # Withdrawn: tenant-a's watches stop. The withdrawal itself wakes every order of the
    # ControlPlane, tenant-a's too: their passes read the ControlPlane that no longer assigns it.
    management.patch(PLANES, "cp", {"spec": _plane(["tenant-b"])["spec"]}, "cp-ns")
    published.take(key("app", "edge-1"))
    published.take(key("waiting", "edge-1", "tenant-b"))
    wait_for(
        lambda: ("edge-1", "MariaDBDatabase", "tenant-a") not in watcher.watches(),
        10.0,
        "tenant-a's order watch did not stop",
    )
    edge.patch(ORDERS, "app", {"metadata": {"annotations": {"poke": "1"}}}, "tenant-a")
    edge.patch(ORDERS, "waiting", {"metadata": {"annotations": {"poke": "2"}}}, "tenant-b")
    published.take(key("waiting", "edge-1", "tenant-b"))
    assert key("app", "edge-1") not in published, "an unassigned namespace is not watched"


def test_cluster_wide_watches_are_what_the_chart_refuses_on_a_target_cluster(
    servers: dict[str, ApiServer],
    start_watcher: StartWatcher,
    granted_kubeconfig: Path,
    key_prefix: str,
) -> None:
    # The reason for the namespaced watches: with only the chart's grants, a cluster-wide list
    # of orders on a target cluster is Forbidden, and the watch can only retry.
    servers["management"].cluster.create(PLANES, _plane(["tenant-a"]), "cp-ns")
    before = metric(
        "tenantdb_watch_restarts_total", cluster="edge-1", kind="MariaDBDatabase", reason="error"
    )
    start_watcher(settings=settings_for(granted_kubeconfig, key_prefix), wait=False)
    wait_for(
        lambda: (
            metric(
                "tenantdb_watch_restarts_total",
                cluster="edge-1",
                kind="MariaDBDatabase",
                reason="error",
            )
            > before
        ),
        10.0,
        "a cluster-wide watch of orders on edge-1 was not refused",
    )


def test_a_relist_of_one_namespaces_order_watch_keeps_the_other_orders_a_control_plane_wakes(
    servers: dict[str, ApiServer],
    start_watcher: StartWatcher,
    published: Published,
    granted_kubeconfig: Path,
    key_prefix: str,
) -> None:
    management, edge = servers["management"].cluster, servers["edge-1"].cluster
    management.create(PLANES, _plane(["tenant-a", "tenant-b"]), "cp-ns")
    management.create(ORDERS, order("here"), "tenant-a")
    edge.create(ORDERS, order("gone"), "tenant-a")
    edge.create(ORDERS, order("there", namespace="tenant-b"), "tenant-b")
    settings = settings_for(granted_kubeconfig, key_prefix).model_copy(
        update={"target_watch_scope": "namespaces"}
    )
    watcher = start_watcher(settings=settings, wait=False)
    tenant_a = ("edge-1", "MariaDBDatabase", "tenant-a")
    wait_for(
        lambda: (
            {tenant_a, ("edge-1", "MariaDBDatabase", "tenant-b")}
            <= set(watcher.watches(listed=True))
        ),
        15.0,
        f"edge-1's order watches did not list: {watcher.watches()}",
    )

    # tenant-a's order watch stops, its order is replaced meanwhile, and a new watch relists it.
    management.patch(PLANES, "cp", {"spec": _plane(["tenant-b"])["spec"]}, "cp-ns")
    wait_for(lambda: tenant_a not in watcher.watches(), 10.0, "tenant-a's watch did not stop")
    edge.delete(ORDERS, "gone", "tenant-a")
    edge.create(ORDERS, order("new"), "tenant-a")
    management.patch(PLANES, "cp", {"spec": _plane(["tenant-a", "tenant-b"])["spec"]}, "cp-ns")
    wait_for(
        lambda: tenant_a in watcher.watches(listed=True), 10.0, "tenant-a was not listed again"
    )
    published.take(key("new", "edge-1"))
    published.drain()

    # The ControlPlane wakes the orders of every scope: the relisted namespace's as listed, the
    # other namespace's and the management cluster's as they were.
    ready = {"status": {"conditions": [{"type": "DBCredentialsReady", "status": "True"}]}}
    management.patch(PLANES, "cp", ready, "cp-ns", subresource="status")
    published.take(key("here"))
    published.take(key("new", "edge-1"))
    published.take(key("there", "edge-1", "tenant-b"))
    assert key("gone", "edge-1") not in published, "the relist did not replace tenant-a's orders"
