"""Every refusal of the condition catalogue, reached on a live stack, leaves nothing half-done.

Each case arranges the world (a ControlPlane edit, a stopped stand-in, a foreign object, a laxer
CRD a target cluster's administrator installed), applies an order, waits for the reason, checks
what exists and what does not at that point, and deletes the order: its finalizer goes and no
child, role or delivered Secret of it is left.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from tenantdb.adapters.kube import (
    CUSTOM_RESOURCE_DEFINITION,
    EVENT,
    NAMESPACE,
    SECRET,
    SERVICE_ACCOUNT,
    InvalidError,
)
from tenantdb.adapters.mariadbdatabase import DATABASE, EXTERNAL_SECRET, MARIADB_DATABASE
from tenantdb.core.mariadbdatabase.naming import FINALIZER, compute_order_names
from tenantdb.core.mariadbdatabase.passes import WARNING_REASONS
from tests.e2e.conftest import Stack
from tests.support import wait_for

pytestmark = [pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
ORDER_CRD = REPO / "charts/tenantdb/crds/mariadbdatabases.c5c3.io.yaml"

# What exists when the order is refused: nothing of the order, its shared identity, its role,
# its Database CR, its ESO objects, its delivered Secret.
NOTHING, IDENTITY, ROLE, DATABASE_CR, ESO, DELIVERED = range(6)


@dataclass(frozen=True)
class Refusal:
    """One reason, how to reach it, and how far the order got."""

    id: str
    reason: str
    conditions: tuple[str, ...]
    reached: int
    finalizer: bool = True
    cluster: str = ""
    spec: dict[str, Any] = field(default_factory=dict)
    arrange: Callable[[Stack, str], None] = lambda stack, name: None
    namespace: str = "tenant-a"
    changes_platform: bool = False
    """Whether ``arrange`` changes what other orders rely on (the ControlPlane, a CRD, an
    issuer, a controller): the case then gets a platform of its own."""


def _patch_cp(patch: dict[str, Any]) -> Callable[[Stack, str], None]:
    return lambda stack, name: stack.patch_control_plane(patch)


def _patch_database(fields: dict[str, Any]) -> Callable[[Stack, str], None]:
    return _patch_cp({"spec": {"infrastructure": {"database": fields}}})


def _db_credentials_not_ready(stack: Stack, name: str) -> None:
    from tenantdb.adapters.mariadbdatabase import CONTROL_PLANE

    stack.kube().patch(
        CONTROL_PLANE,
        "openstack",
        "cp",
        {"status": {"conditions": [{"type": "DBCredentialsReady", "status": "False",
                                    "reason": "Onboarding", "message": "not yet",
                                    "lastTransitionTime": "2026-01-01T00:00:00Z"}]}},
        status=True,
    )  # fmt: skip


def _other_namespace(stack: Stack, name: str) -> None:
    stack.kube().apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "tenant-b"}})


SCHEMA_SETTLES = 15.0  # seconds a real kube-apiserver may take to serve a CRD's new schema


def _once_the_schema_settles(write: Callable[[], Any]) -> Any:
    """Send ``write`` until the API server no longer refuses it as invalid.

    A real kube-apiserver accepts a CRD update at once but starts validating with the new schema
    a moment later, so the first write after loosening a CRD may still meet the old pattern.
    """
    deadline = time.monotonic() + SCHEMA_SETTLES
    while True:
        try:
            return write()
        except InvalidError:
            if time.monotonic() >= deadline:
                raise
            time.sleep(0.2)


def _lax_order_crd(stack: Stack, name: str) -> None:
    """A target cluster's administrator installed the CRD without its name pattern."""
    crd = yaml.safe_load(ORDER_CRD.read_text())
    spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    spec["properties"]["databaseName"].pop("pattern")
    stack.kube("edge-1").apply(crd)


def _lax_control_plane_crd(stack: Stack, name: str) -> None:
    """The ControlPlane CRD without its endpoint pattern, and an endpoint it would refuse."""
    crd = copy.deepcopy(stack.kube().get(CUSTOM_RESOURCE_DEFINITION, None, "controlplanes.c5c3.io"))
    for version in crd["spec"]["versions"]:
        props = version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
        props["infrastructure"]["properties"]["publishedDatabaseEndpoint"].pop("pattern", None)
    crd["metadata"] = {"name": crd["metadata"]["name"]}
    crd.pop("status", None)
    stack.kube().apply(crd)
    _once_the_schema_settles(
        lambda: stack.patch_control_plane(
            {"spec": {"infrastructure": {"publishedDatabaseEndpoint": "db.example.test:99999"}}}
        )
    )


def _foreign_database_cr(stack: Stack, name: str) -> None:
    stack.kube().apply(
        {
            "apiVersion": "k8s.mariadb.com/v1alpha1",
            "kind": "Database",
            "metadata": {"name": f"other-{stack.suffix}", "namespace": "openstack"},
            "spec": {"mariaDbRef": {"name": "openstack-db"}, "name": name.replace("-", "_")},
        }
    )


def _foreign_secret(stack: Stack, name: str) -> None:
    stack.kube().apply(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": f"{name}-credentials", "namespace": "tenant-a"},
            "data": {"mine": "eWVz"},
        }
    )


def _stop(component: str) -> Callable[[Stack, str], None]:
    def arrange(stack: Stack, name: str) -> None:
        stack.platform.stop_component(component)

    return arrange


def _no_issuer(stack: Stack, name: str) -> None:
    from tenantdb.adapters.kube import Resource

    issuer = Resource("cert-manager.io", "v1", "clusterissuers", "ClusterIssuer", namespaced=False)
    stack.kube().delete(issuer, None, "openbao-ca-issuer")


BOTH = ("DatabaseReady", "DeliveryReady")
CASES = [
    Refusal("control-plane-not-found", "ControlPlaneNotFound", BOTH, NOTHING, finalizer=False,
            spec={"controlPlaneRef": {"name": "nope", "namespace": "openstack"}}),
    Refusal("namespace-not-assigned", "NamespaceNotAssigned", BOTH, NOTHING, finalizer=False,
            namespace="tenant-b", arrange=_other_namespace),
    Refusal("target-cluster-cp-not-found", "NamespaceNotAssigned", BOTH, NOTHING, finalizer=False,
            cluster="edge-1", spec={"controlPlaneRef": {"name": "nope", "namespace": "openstack"}}),
    Refusal("dynamic-credentials-unavailable", "DynamicCredentialsUnavailable", BOTH, NOTHING,
            changes_platform=True, arrange=_patch_database({"credentialsMode": "Static"})),
    Refusal("waiting-for-db-credentials", "WaitingForDBCredentials", BOTH, NOTHING,
            changes_platform=True, arrange=_db_credentials_not_ready),
    Refusal("target-cluster-unavailable", "TargetClusterUnavailable", ("DatabaseReady",), NOTHING,
            changes_platform=True, arrange=_patch_cp({"spec": {"services": {"keystone": {
                "targetClusterRef": {"name": "edge-9"}}}}})),
    Refusal("cluster-not-ready", "ClusterNotReady", ("DatabaseReady",), NOTHING,
            changes_platform=True, arrange=_patch_database({"clusterRef": {"name": "missing-db"}})),
    Refusal("database-name-invalid", "DatabaseNameInvalid", ("DatabaseReady",), NOTHING,
            cluster="edge-1", spec={"databaseName": "bad-name"}, changes_platform=True,
            arrange=_lax_order_crd),
    Refusal("database-name-reserved", "DatabaseNameReserved", ("DatabaseReady",), NOTHING,
            spec={"databaseName": "MySQL"}),
    Refusal("database-collision", "DatabaseCollision", ("DatabaseReady",), NOTHING,
            arrange=_foreign_database_cr),
    Refusal("waiting-for-client-certificate", "WaitingForClientCertificate", ("DatabaseReady",),
            IDENTITY, changes_platform=True, arrange=_no_issuer),
    Refusal("waiting-for-database", "WaitingForDatabase", ("DatabaseReady",), DATABASE_CR,
            changes_platform=True, arrange=_stop("mariadb-operator")),
    Refusal("waiting-for-credentials", "WaitingForCredentials", ("DatabaseReady",), ESO,
            changes_platform=True, arrange=_stop("external-secrets")),
    Refusal("database-not-published", "DatabaseNotPublished", ("DeliveryReady",), ESO,
            cluster="edge-1",
            changes_platform=True,
            arrange=_patch_cp({"spec": {"infrastructure": {"publishedDatabaseEndpoint": None}}})),
    Refusal("delivery-error", "DeliveryError", ("DeliveryReady",), ESO, cluster="edge-1",
            changes_platform=True, arrange=_lax_control_plane_crd),
    Refusal("waiting-for-ca-bundle", "WaitingForCABundle", ("DeliveryReady",), ESO,
            changes_platform=True, arrange=_patch_cp({"spec": {"infrastructure": {"database": {
                "tls": {"mode": "require", "caBundleSecretRef": {"name": "absent-ca"}}}}}})),
    Refusal("delivery-refused", "DeliveryRefused", ("DeliveryReady",), ESO,
            arrange=_foreign_secret),
]  # fmt: skip


def _children(stack: Stack, case: Refusal, name: str) -> dict[int, bool]:
    names = compute_order_names(case.cluster, case.namespace, name, "openstack")
    management = stack.kube()
    delivered = stack.kube(case.cluster).get_or_none(SECRET, case.namespace, f"{name}-credentials")
    owned_delivered = delivered is not None and any(
        ref.get("kind") == "MariaDBDatabase"
        for ref in delivered["metadata"].get("ownerReferences", [])
    )
    return {
        IDENTITY: management.get_or_none(SERVICE_ACCOUNT, "openstack", "order-db-creds")
        is not None,
        ROLE: stack.role_exists(names.role),
        DATABASE_CR: management.get_or_none(DATABASE, "openstack", names.database_cr) is not None,
        ESO: management.get_or_none(EXTERNAL_SECRET, "openstack", names.credentials) is not None,
        DELIVERED: owned_delivered,
    }  # fmt: skip


@pytest.mark.parametrize(
    "case",
    [
        pytest.param(c, id=c.id, marks=[pytest.mark.private_platform] if c.changes_platform else [])
        for c in CASES
    ],
)
def test_a_refusal_is_reported_and_leaves_nothing_half_done(stack: Stack, case: Refusal) -> None:
    name = stack.name("ref")
    if case.namespace != "tenant-a":
        for cluster in ("", "edge-1"):
            stack.kube(cluster).apply(
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": case.namespace}}
            )
    case.arrange(stack, name)
    body = {
        "apiVersion": "c5c3.io/v1alpha1",
        "kind": "MariaDBDatabase",
        "metadata": {"name": name, "namespace": case.namespace},
        "spec": {"controlPlaneRef": {"name": "cp", "namespace": "openstack"}, **case.spec},
    }
    # A laxer CRD arranged above may take a moment to be served; no case's order is invalid.
    _once_the_schema_settles(lambda: stack.kube(case.cluster).create(body))

    def order() -> dict[str, Any] | None:
        return stack.kube(case.cluster).get_or_none(MARIADB_DATABASE, case.namespace, name)

    def reasons() -> dict[str, str]:
        status = (order() or {}).get("status") or {}
        return {c["type"]: c["reason"] for c in status.get("conditions") or ()}

    wait_for(
        lambda: all(reasons().get(t) == case.reason for t in case.conditions),
        45,
        f"{case.reason} on {case.conditions}; last {reasons()}",
    )
    assert reasons().get("Ready") == "NotAllReady"
    assert (FINALIZER in (order() or {})["metadata"].get("finalizers", [])) is case.finalizer
    if case.reason in WARNING_REASONS:  # what `kubectl describe` shows on-call
        wait_for(
            lambda: _warned(stack, case, name), 20, f"a Warning Event {case.reason} on the order"
        )

    present = _children(stack, case, name)
    for step in (ROLE, DATABASE_CR, ESO, DELIVERED):
        assert present[step] is (step <= case.reached), f"step {step}: {present}"
    if case.id == "delivery-refused":
        foreign = stack.secret(f"{name}-credentials") or {}
        assert foreign == {"mine": "yes"}, "the foreign Secret is left untouched"

    stack.kube(case.cluster).delete(MARIADB_DATABASE, case.namespace, name)
    wait_for(lambda: order() is None, 40, "the order to be deleted")
    gone = _children(stack, case, name)
    assert not any(gone[s] for s in (ROLE, DATABASE_CR, ESO, DELIVERED)), gone
    if case.id == "delivery-refused":
        assert stack.secret(f"{name}-credentials") == {"mine": "yes"}
    assert stack.kube(case.cluster).get_or_none(NAMESPACE, None, case.namespace)


def _warned(stack: Stack, case: Refusal, name: str) -> bool:
    events = stack.kube(case.cluster).list_objects(EVENT, case.namespace)
    return any(
        e.get("type") == "Warning"
        and e.get("reason") == case.reason
        and (e.get("involvedObject") or {}).get("name") == name
        and (e.get("involvedObject") or {}).get("kind") == "MariaDBDatabase"
        for e in events
    )


LONG_CLUSTER = "edge-" + "x" * 59  # 64 characters: one more than a label value carries


@pytest.mark.parametrize("stack", [("edge-1", LONG_CLUSTER)], indirect=True)
def test_an_order_on_a_cluster_with_a_too_long_name_is_refused(stack: Stack) -> None:
    name = stack.name("long")
    stack.apply_order(name, cluster=LONG_CLUSTER)
    for kind in ("DatabaseReady", "DeliveryReady"):
        stack.wait_reason(name, kind, "ClusterNameTooLong", cluster=LONG_CLUSTER)
    order = stack.order(name, cluster=LONG_CLUSTER) or {}
    assert FINALIZER not in order["metadata"].get("finalizers", [])
    names = compute_order_names(LONG_CLUSTER, "tenant-a", name, "openstack")
    assert stack.kube().get_or_none(EXTERNAL_SECRET, "openstack", names.credentials) is None
    assert not stack.role_exists(names.role)
    stack.kube(LONG_CLUSTER).delete(MARIADB_DATABASE, "tenant-a", name)
    wait_for(lambda: stack.order(name, cluster=LONG_CLUSTER) is None, 20, "the deletion")


WORKERS = ("worker-1", "worker-2")


def _provision_errors(stack: Stack) -> float:
    return sum(
        stack.counter(
            worker,
            "c5c3_operator_reconcile_errors_total",
            sub_reconciler="MariaDBDatabaseProvision",
            condition_type="DatabaseReady",
        )
        for worker in WORKERS
    )


def test_a_foreign_external_secret_of_the_childs_name_is_refused_counted_and_retried(
    stack: Stack,
) -> None:
    name = stack.name("foreign-es")
    names = compute_order_names("", "tenant-a", name, "openstack")
    foreign = {
        "apiVersion": "external-secrets.io/v1",
        "kind": "ExternalSecret",
        "metadata": {"name": names.credentials, "namespace": "openstack"},
        "spec": {"refreshInterval": "1h", "data": []},
    }
    stack.kube().apply(foreign)
    stack.apply_order(name)
    condition = stack.wait_reason(name, "DatabaseReady", "DatabaseCollision")
    assert condition["message"] == (
        f"refusing to adopt pre-existing ExternalSecret openstack/{names.credentials}: "
        "it was not created by this order"
    )
    # Backing off is retrying: the error is counted on each attempt, not once and forgotten. The
    # pass writes the condition before its step ends in the error it counts, so the first count
    # may trail the condition by a moment.
    wait_for(lambda: _provision_errors(stack) >= 1, 10, "the refusal to be counted")
    seen = _provision_errors(stack)
    wait_for(lambda: _provision_errors(stack) > seen, 30, "the refusal to be retried")
    live = stack.kube().get(EXTERNAL_SECRET, "openstack", names.credentials)
    assert not live["metadata"].get("labels"), "the foreign ExternalSecret is not claimed"

    stack.kube().delete(EXTERNAL_SECRET, "openstack", names.credentials)
    stack.wait_ready(name)
