"""A management cluster that grants tenantdb only the namespaces it serves (the chart's
``rbac.namespaces``): the chart binds the watcher's role in each of them and nowhere else, and
the watcher, told the same namespaces, watches every namespaced kind there and nothing
cluster-wide it was not granted. Orders elsewhere are not tenantdb's to serve.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from devstack.chart import apply_rbac, render_chart, service_account_token
from tests.integration.watcher.conftest import (
    ORDERS,
    Published,
    StartWatcher,
    key,
    metric,
    order,
    settings_for,
)
from tests.realclusters import ApiServer, kubeconfig
from tests.support import wait_for

RELEASE_NAMESPACE = "tenantdb-system"
SERVED = ("tenant-a", "cp-ns")


@pytest.fixture
def watcher_kubeconfig(servers: dict[str, ApiServer], tmp_path: Path) -> Path:
    """A kubeconfig whose management user is the chart's watcher account, bound per namespace."""
    management = servers["management"].cluster
    management.create("namespaces", {"metadata": {"name": "tenant-b"}})
    values: dict[str, Any] = {
        "redis": {"auth": {"required": False}},
        "rbac": {"namespaces": list(SERVED)},
    }
    objects = render_chart(values, release="nsmode", namespace=RELEASE_NAMESPACE)
    apply_rbac(management, objects, RELEASE_NAMESPACE)
    bindings = {
        (o["kind"], o["metadata"].get("namespace", "")) for o in objects if "Binding" in o["kind"]
    }
    assert ("ClusterRoleBinding", "") in bindings  # the cluster-scoped reads only
    assert {ns for kind, ns in bindings if kind == "RoleBinding"} == set(SERVED)
    config = kubeconfig(servers, current="management")
    token = service_account_token(management, RELEASE_NAMESPACE, "nsmode-tenantdb-watcher")
    for user in config["users"]:
        if user["name"] == "management-admin":
            user["user"] = {"token": token}
    path = tmp_path / "watcher-kubeconfig"
    path.write_text(yaml.safe_dump(config))
    return path


def test_a_management_cluster_served_per_namespace_is_watched_only_in_those(
    servers: dict[str, ApiServer],
    start_watcher: StartWatcher,
    published: Published,
    watcher_kubeconfig: Path,
    key_prefix: str,
) -> None:
    management = servers["management"].cluster
    management.create(ORDERS, order("served"), "tenant-a")
    management.create(ORDERS, order("elsewhere", namespace="tenant-b"), "tenant-b")
    settings = settings_for(watcher_kubeconfig, key_prefix).model_copy(
        update={"management_namespaces": ",".join(SERVED)}
    )
    kinds = ("MariaDBDatabase", "Secret", "ClusterSecretStore")
    before = {kind: _refused(kind) for kind in kinds}
    watcher = start_watcher(settings=settings, wait=False)

    published.take(key("served"), timeout=15)
    wait_for(
        lambda: (
            {(kind, ns) for cluster, kind, ns in watcher.watches(listed=True) if cluster == ""}
            >= {("MariaDBDatabase", "tenant-a"), ("MariaDBDatabase", "cp-ns"), ("Secret", "cp-ns")}
        ),
        10.0,
        f"the served namespaces are not watched: {watcher.watches()}",
    )
    namespaced = [w for w in watcher.watches() if w[0] == "" and w[1] != "ClusterSecretStore"]
    assert all(ns in SERVED for _, _, ns in namespaced), namespaced
    management.patch(ORDERS, "served", {"metadata": {"annotations": {"poke": "1"}}}, "tenant-a")
    published.take(key("served"))
    management.patch(ORDERS, "elsewhere", {"metadata": {"annotations": {"poke": "1"}}}, "tenant-b")
    management.patch(ORDERS, "served", {"metadata": {"annotations": {"poke": "2"}}}, "tenant-a")
    published.take(key("served"))
    assert key("elsewhere", namespace="tenant-b") not in published, "tenant-b is not served"
    after = {kind: _refused(kind) for kind in kinds}
    assert after == before, "no watch asked for more than the chart grants"

    # What the real authorizer answers for the chart's accounts: Secrets in a served namespace
    # only, never cluster-wide, for the watcher and the worker alike.
    for account, verb in (("watcher", "list"), ("worker", "get")):
        allowed = {
            where: _allowed(management, f"nsmode-tenantdb-{account}", verb, "secrets", where)
            for where in ("tenant-a", "cp-ns", "tenant-b", "kube-system", "")
        }
        assert allowed == {
            "tenant-a": True,
            "cp-ns": True,
            "tenant-b": False,
            "kube-system": False,
            "": False,
        }, account
    assert _allowed(
        management,
        "nsmode-tenantdb-worker",
        "get",
        "clustersecretstores",
        "",
        "external-secrets.io",
    )


def _allowed(
    cluster: Any, account: str, verb: str, resource: str, namespace: str, group: str = ""
) -> bool:
    attributes = {"verb": verb, "resource": resource, "group": group}
    if namespace:
        attributes["namespace"] = namespace
    review = cluster.create(
        "subjectaccessreviews.authorization.k8s.io",
        {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "spec": {
                "user": f"system:serviceaccount:{RELEASE_NAMESPACE}:{account}",
                "groups": ["system:serviceaccounts", f"system:serviceaccounts:{RELEASE_NAMESPACE}"],
                "resourceAttributes": attributes,
            },
        },
    )
    return bool(review["status"].get("allowed"))


def _refused(kind: str) -> float:
    return metric("tenantdb_watch_restarts_total", cluster="management", kind=kind, reason="error")
