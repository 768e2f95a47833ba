"""tenantdb's chart RBAC, rendered through the real Helm engine and applied to a devstack cluster.

The platform runs tenantdb as the ServiceAccount the chart creates: whatever the chart grants on
a cluster (the management values there, the target-cluster values on every other cluster), and
nothing else, is what the devstack's authorizer lets tenantdb do.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from helm_python import Chart

from devstack.kubeclient import KubeApi

CHART_DIR = Path(__file__).resolve().parents[1] / "charts" / "tenantdb"
RBAC_KINDS = {
    "ServiceAccount": "serviceaccounts",
    "Role": "roles.rbac.authorization.k8s.io",
    "RoleBinding": "rolebindings.rbac.authorization.k8s.io",
    "ClusterRole": "clusterroles.rbac.authorization.k8s.io",
    "ClusterRoleBinding": "clusterrolebindings.rbac.authorization.k8s.io",
}
ADMISSION_KINDS = {
    "ValidatingAdmissionPolicy": "validatingadmissionpolicies.admissionregistration.k8s.io",
    "ValidatingAdmissionPolicyBinding": (
        "validatingadmissionpolicybindings.admissionregistration.k8s.io"
    ),
}
MANAGER = "helm"


def render_chart(
    values: Mapping[str, Any], *, release: str = "tdb", namespace: str = "tenantdb-system"
) -> list[dict[str, Any]]:
    """Every object the chart renders for these values, in template order."""
    chart = Chart.load(CHART_DIR)
    try:
        rendered = chart.render(dict(values), name=release, namespace=namespace)
    finally:
        chart.close()
    return manifests(rendered)


def manifests(rendered: Mapping[str, str]) -> list[dict[str, Any]]:
    """The objects of rendered templates (by path), in template order; the release notes,
    which are text for the installer, are left out as Helm leaves them out of a release."""
    objects: list[dict[str, Any]] = []
    for path in sorted(rendered):
        if path.endswith("NOTES.txt"):
            continue
        objects.extend(doc for doc in yaml.safe_load_all(rendered[path]) if doc)
    return objects


def apply_rbac(
    cluster: KubeApi, objects: list[dict[str, Any]], namespace: str, *, admission: bool = False
) -> list[str]:
    """Apply the ServiceAccounts, Roles and bindings among ``objects`` (and, with
    ``admission``, the ValidatingAdmissionPolicy and its binding); return what was applied.

    Namespaces the objects live in are created when missing; every other kind is left out.
    """
    applied: list[str] = []
    kinds = {**RBAC_KINDS, **(ADMISSION_KINDS if admission else {})}
    existing = {n["metadata"]["name"] for n in cluster.list("namespaces")}
    for obj in objects:
        resource = kinds.get(str(obj.get("kind")))
        if resource is None:
            continue
        meta = obj["metadata"]
        cluster_scoped = obj["kind"].startswith("Cluster") or obj["kind"] in ADMISSION_KINDS
        ns = "" if cluster_scoped else str(meta.get("namespace") or namespace)
        if ns and ns not in existing:
            cluster.create("namespaces", {"metadata": {"name": ns}})
            existing.add(ns)
        cluster.apply(resource, obj, ns, manager=MANAGER)
        applied.append("/".join(part for part in (obj["kind"], ns, meta["name"]) if part))
    return applied


def service_account_of(objects: list[dict[str, Any]]) -> str:
    """The name of the ServiceAccount the chart renders."""
    return next(str(o["metadata"]["name"]) for o in objects if o["kind"] == "ServiceAccount")


def service_account_token(cluster: KubeApi, namespace: str, name: str) -> str:
    """A token of the ServiceAccount, as the TokenRequest API issues it (an hour long)."""
    issued = cluster.token_request(namespace, name, {"spec": {"expirationSeconds": 3600}})
    return str(issued["status"]["token"])
