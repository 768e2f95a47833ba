"""tenantdb on the devstack holds the chart's grants and nothing more, as ``kubectl auth can-i``
reports them for its ServiceAccounts (the watcher's and the worker's on management).

The platform applies the RBAC tenantdb's chart renders (the management values on ``management``,
the target-cluster values on ``edge-1``) and gives tenantdb a kubeconfig with that account's
tokens. What must be absent is checked as closely as what must be there: no create or delete of
the order kinds anywhere, nothing cluster-wide on a target cluster, nothing on a target cluster
outside the assigned namespace, and no way to grant itself more.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from devstack.platform import Platform

pytestmark = pytest.mark.slow

ORDERS = "mariadbdatabases.c5c3.io"
MYSQL_ORDERS = "mysqldatabases.shipstream.io"


def _kubectl() -> str:
    local = Path(sys.executable).parent / "kubectl"
    found = str(local) if local.exists() else shutil.which("kubectl")
    assert found, "kubectl is not installed; run `make install`"
    return found


def can_i(platform: Platform, context: str, *args: str, role: str = "worker") -> str:
    """What ``kubectl auth can-i`` answers for one tenantdb role's account on one cluster."""
    kubeconfig = (
        platform.tenantdb_watcher_kubeconfig_path
        if role == "watcher"
        else platform.tenantdb_kubeconfig_path
    )
    done = subprocess.run(
        [_kubectl(), "--kubeconfig", str(kubeconfig), "--context", context,
         "auth", "can-i", *args],
        capture_output=True, text=True, timeout=30, check=False,
    )  # fmt: skip
    answer = done.stdout.strip()
    assert answer in ("yes", "no"), f"kubectl auth can-i {' '.join(args)}: {done.stderr}"
    return answer


WATCHER_GRANTED: list[tuple[str, ...]] = [
    ("list", ORDERS, "--all-namespaces"),
    ("watch", ORDERS, "--all-namespaces"),
    ("watch", MYSQL_ORDERS, "--all-namespaces"),
    ("watch", "secrets", "--all-namespaces"),
    ("watch", "controlplanes.c5c3.io", "--all-namespaces"),
    ("watch", "databases.k8s.mariadb.com", "--all-namespaces"),
    ("watch", "mariadbs.k8s.mariadb.com", "--all-namespaces"),
    ("watch", "secretstores.external-secrets.io", "--all-namespaces"),
    ("watch", "clustersecretstores.external-secrets.io"),
    ("watch", "serviceaccounts/order-db-creds", "-n", "openstack"),
    ("watch", "certificates.cert-manager.io/order-db-openbao-client", "-n", "openstack"),
]
WATCHER_ABSENT: list[tuple[str, ...]] = [
    ("watch", "serviceaccounts", "-n", "openstack"),
    ("watch", "certificates.cert-manager.io", "-n", "openstack"),
    ("get", "secrets", "-n", "tenant-a"),
    ("create", "secrets", "-n", "tenant-a"),
    ("patch", ORDERS, "--subresource=status", "-n", "tenant-a"),
    ("create", "databases.k8s.mariadb.com", "-n", "openstack"),
    ("create", "events", "-n", "tenant-a"),
]
MANAGEMENT_GRANTED = [
    ("list", ORDERS, "--all-namespaces"),
    ("patch", ORDERS, "--subresource=status", "-n", "tenant-a"),
    ("update", ORDERS, "--subresource=finalizers", "-n", "tenant-a"),
    ("patch", MYSQL_ORDERS, "--subresource=status", "-n", "bloodraven"),
    ("get", "controlplanes.c5c3.io", "-n", "openstack"),
    ("create", "databases.k8s.mariadb.com", "-n", "openstack"),
    ("create", "externalsecrets.external-secrets.io", "-n", "openstack"),
    ("create", "vaultdynamicsecrets.generators.external-secrets.io", "-n", "openstack"),
    ("create", "secrets", "-n", "tenant-a"),
    ("create", "events", "-n", "tenant-a"),
    ("get", "mysqlfailovergroups.shipstream.io", "-n", "bloodraven"),
    ("get", "secrets", "-n", "bloodraven"),
    ("create", "serviceaccounts", "-n", "openstack"),
    ("patch", "serviceaccounts/order-db-creds", "-n", "openstack"),
]
MANAGEMENT_ABSENT = [
    ("watch", ORDERS, "--all-namespaces"),
    ("list", "secrets", "-n", "tenant-a"),
    ("watch", "secrets", "-n", "tenant-a"),
    ("patch", "serviceaccounts/default", "-n", "openstack"),
    ("create", "serviceaccounts", "--subresource=token", "-n", "openstack"),
    ("create", ORDERS, "-n", "tenant-a"),
    ("delete", ORDERS, "-n", "tenant-a"),
    ("create", MYSQL_ORDERS, "-n", "bloodraven"),
    ("delete", MYSQL_ORDERS, "-n", "bloodraven"),
    ("update", "mysqlfailovergroups.shipstream.io", "-n", "bloodraven"),
    ("create", "leases.coordination.k8s.io", "-n", "c5c3-system"),
    ("create", "clusterrolebindings.rbac.authorization.k8s.io"),
    ("create", "rolebindings.rbac.authorization.k8s.io", "-n", "tenant-a"),
    ("delete", "controlplanes.c5c3.io", "-n", "openstack"),
    ("create", "pods", "-n", "tenant-a"),
]
TARGET_GRANTED = [
    ("list", ORDERS, "-n", "tenant-a"),
    ("watch", ORDERS, "-n", "tenant-a"),
    ("patch", ORDERS, "-n", "tenant-a"),
    ("patch", ORDERS, "--subresource=status", "-n", "tenant-a"),
    ("update", ORDERS, "--subresource=finalizers", "-n", "tenant-a"),
    ("create", "secrets", "-n", "tenant-a"),
    ("watch", "secrets", "-n", "tenant-a"),
]
TARGET_ABSENT = [
    ("list", ORDERS, "--all-namespaces"),
    ("list", "secrets", "--all-namespaces"),
    ("create", ORDERS, "-n", "tenant-a"),
    ("delete", ORDERS, "-n", "tenant-a"),
    ("list", ORDERS, "-n", "tenant-b"),
    ("get", "secrets", "-n", "kube-system"),
    ("create", "secrets", "-n", "tenant-b"),
    ("list", MYSQL_ORDERS, "-n", "tenant-a"),
    ("create", "rolebindings.rbac.authorization.k8s.io", "-n", "tenant-a"),
]


def test_the_watcher_only_lists_and_watches(platform: Platform) -> None:
    answers = {
        args: can_i(platform, "management", *args, role="watcher") for args in WATCHER_GRANTED
    }
    assert {a for a, v in answers.items() if v != "yes"} == set(), "granted by the chart"
    answers = {
        args: can_i(platform, "management", *args, role="watcher") for args in WATCHER_ABSENT
    }
    assert {a for a, v in answers.items() if v != "no"} == set(), "must be absent"


def test_tenantdb_holds_what_the_management_chart_grants_and_nothing_the_seed_rules_out(
    platform: Platform,
) -> None:
    answers = {args: can_i(platform, "management", *args) for args in MANAGEMENT_GRANTED}
    assert {a for a, v in answers.items() if v != "yes"} == set(), "granted by the chart"
    answers = {args: can_i(platform, "management", *args) for args in MANAGEMENT_ABSENT}
    assert {a for a, v in answers.items() if v != "no"} == set(), "must be absent"


def test_tenantdb_holds_only_per_namespace_grants_on_a_target_cluster(platform: Platform) -> None:
    answers = {args: can_i(platform, "edge-1", *args) for args in TARGET_GRANTED}
    assert {a for a, v in answers.items() if v != "yes"} == set(), "granted in tenant-a"
    answers = {args: can_i(platform, "edge-1", *args) for args in TARGET_ABSENT}
    assert {a for a, v in answers.items() if v != "no"} == set(), "must be absent"
