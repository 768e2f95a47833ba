"""Builders of MariaDBDatabase test objects, shaped like what the API server returns.

Owns the defaults the unit tests share (an order app-db in tenant-a against ControlPlane cp in
default, whose shared MariaDB openstack-db is Ready and Dynamic), so each test states only what
it varies. Never used outside the unit tests.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from tenantdb.core.mariadbdatabase.models import (
    ControlPlane,
    DatabaseCR,
    ExternalSecret,
    MariaDB,
    MariaDBDatabase,
)
from tenantdb.core.mariadbdatabase.naming import (
    FINALIZER,
    OrderNames,
    build_order_labels,
    compute_order_names,
)
from tenantdb.core.mariadbdatabase.openbao import OpenBaoConnection
from tenantdb.core.mariadbdatabase.scope import OrderScope, compute_order_scope
from tenantdb.core.objects import KubeObject, Secret

NOW = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)
LATER = datetime(2026, 3, 1, 12, 5, 0, 123456, tzinfo=UTC)
ORDER_UID = "0b1c-order-uid"
PASSWORD = "s3cr3t-pw"
CONNECTION = OpenBaoConnection()


def b64(value: str) -> str:
    """Encode a Secret value as the API returns it."""
    return base64.b64encode(value.encode()).decode()


def make_order(
    *,
    name: str = "app-db",
    namespace: str = "tenant-a",
    cp_name: str = "cp",
    cp_namespace: str | None = "default",
    database_name: str | None = None,
    deletion_policy: str | None = None,
    finalizers: tuple[str, ...] = (FINALIZER,),
    generation: int = 1,
    deleting: bool = False,
    status: dict[str, Any] | None = None,
) -> MariaDBDatabase:
    """Build an order as read from the API server."""
    ref: dict[str, Any] = {"name": cp_name}
    if cp_namespace is not None:
        ref["namespace"] = cp_namespace
    spec: dict[str, Any] = {"controlPlaneRef": ref}
    if database_name is not None:
        spec["databaseName"] = database_name
    if deletion_policy is not None:
        spec["deletionPolicy"] = deletion_policy
    meta: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "uid": ORDER_UID,
        "generation": generation,
        "finalizers": list(finalizers),
        "resourceVersion": "42",
        "managedFields": [{"manager": "kubectl"}],
    }
    if deleting:
        meta["deletionTimestamp"] = "2026-03-01T11:00:00Z"
    raw: dict[str, Any] = {
        "apiVersion": "c5c3.io/v1alpha1",
        "kind": "MariaDBDatabase",
        "metadata": meta,
        "spec": spec,
    }
    if status is not None:
        raw["status"] = status
    return MariaDBDatabase.model_validate(raw)


def make_control_plane(
    *,
    namespace: str = "default",
    name: str = "cp",
    assignments: list[dict[str, Any]] | None = None,
    database: dict[str, Any] | None = None,
    infrastructure: bool = True,
    published: str = "",
    keystone: dict[str, Any] | None = None,
    db_credentials_ready: str = "True",
    store_ref: dict[str, str] | None = None,
) -> ControlPlane:
    """Build a ControlPlane assigning tenant-a on the management cluster by default."""
    spec: dict[str, Any] = {
        "namespaceAssignments": (
            assignments if assignments is not None else [{"namespace": "tenant-a"}]
        ),
        "unknownField": {"kept": "out"},
    }
    if infrastructure:
        spec["infrastructure"] = {
            "database": database
            if database is not None
            else {"clusterRef": {"name": "openstack-db"}},
            "publishedDatabaseEndpoint": published,
        }
    if keystone is not None:
        spec["services"] = {"keystone": keystone}
    if store_ref is not None:
        spec["secretStoreRef"] = store_ref
    return ControlPlane.model_validate(
        {
            "metadata": {"name": name, "namespace": namespace, "generation": 3},
            "spec": spec,
            "status": {
                "conditions": [{"type": "DBCredentialsReady", "status": db_credentials_ready}]
            },
        }
    )


def ready_status(ready: bool = True) -> dict[str, Any]:
    """Return a status with a Ready condition of the given truth."""
    return {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}


def make_mariadb(ready: bool = True) -> MariaDB:
    """Build the shared MariaDB openstack-db."""
    return MariaDB.model_validate(
        {
            "metadata": {"name": "openstack-db", "namespace": "default"},
            "status": ready_status(ready),
        }
    )


def make_database_cr(
    *,
    name: str,
    schema: str = "",
    mariadb: str = "openstack-db",
    labels: dict[str, str] | None = None,
    ready: bool = True,
    cleanup_policy: str = "Skip",
) -> DatabaseCR:
    """Build a mariadb-operator Database in namespace default."""
    spec: dict[str, Any] = {"mariaDbRef": {"name": mariadb}, "cleanupPolicy": cleanup_policy}
    if schema:
        spec["name"] = schema
    return DatabaseCR.model_validate(
        {
            "metadata": {"name": name, "namespace": "default", "labels": labels or {}},
            "spec": spec,
            "status": ready_status(ready),
        }
    )


def make_secret(
    name: str,
    namespace: str,
    data: dict[str, str],
    *,
    labels: dict[str, str] | None = None,
    controller_uid: str | None = None,
) -> Secret:
    """Build a Secret whose data is given in clear and stored base64 as the API does."""
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "labels": labels or {}}
    if controller_uid is not None:
        meta["ownerReferences"] = [
            {
                "apiVersion": "c5c3.io/v1alpha1",
                "kind": "MariaDBDatabase",
                "name": "app-db",
                "uid": controller_uid,
                "controller": True,
            }
        ]
    return Secret.model_validate(
        {"metadata": meta, "type": "Opaque", "data": {k: b64(v) for k, v in data.items()}}
    )


def client_certificate(keys: tuple[str, ...] = ("tls.crt", "tls.key", "ca.crt")) -> Secret:
    """Build the shared client-certificate Secret with the given keys filled."""
    return make_secret("order-db-openbao-client", "default", {k: "PEM" for k in keys})


def scope_for(order: MariaDBDatabase, cp: ControlPlane | None, cluster: str = "") -> OrderScope:
    """Resolve the scope of an order."""
    return compute_order_scope(order, cluster, cp)


def child_labels(
    cluster: str = "", namespace: str = "tenant-a", name: str = "app-db"
) -> dict[str, str]:
    """Return the three ownership labels."""
    return build_order_labels(cluster, namespace, name)


def names_for(cluster: str = "", namespace: str = "tenant-a", name: str = "app-db") -> OrderNames:
    """Return the child names of an order against cp in default."""
    return compute_order_names(cluster, namespace, name, "default")


def make_labelled(kind_name: str, labels: dict[str, str]) -> KubeObject:
    """Build a labelled object known only by its metadata."""
    return KubeObject.model_validate(
        {"metadata": {"name": kind_name, "namespace": "default", "labels": labels}}
    )


def make_external_secret(
    *, ready: bool = True, labels: dict[str, str] | None = None, cluster: str = ""
) -> ExternalSecret:
    """Build the order's ExternalSecret."""
    names = names_for(cluster)
    return ExternalSecret.model_validate(
        {
            "metadata": {
                "name": names.credentials,
                "namespace": "default",
                "labels": labels if labels is not None else child_labels(cluster),
            },
            "status": {
                "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
                "refreshTime": "2026-03-01T10:00:00Z",
            },
        }
    )


def engine_username() -> str:
    """Return a username shaped like the ones the OpenBao MySQL plugin issues."""
    return "v-kubernetes-order.def-AbCdEf"


def materialised(
    username: str | None = None, password: str = PASSWORD, cluster: str = ""
) -> Secret:
    """Build the Secret ESO writes from the generator."""
    user = engine_username() if username is None else username
    return make_secret(
        names_for(cluster).credentials,
        "default",
        {"username": user, "password": password},
        labels=child_labels(cluster),
    )


def own_database_cr(
    ready: bool = True, cleanup_policy: str = "Skip", cluster: str = ""
) -> DatabaseCR:
    """Build the order's own Database CR."""
    return make_database_cr(
        name=names_for(cluster).database_cr,
        schema="app_db",
        labels=child_labels(cluster),
        ready=ready,
        cleanup_policy=cleanup_policy,
    )


@dataclass(frozen=True)
class World:
    """Everything a pass could observe; the defaults are a converged management-cluster order."""

    order: MariaDBDatabase = field(default_factory=make_order)
    cluster: str = ""
    cp: ControlPlane | None = field(default_factory=make_control_plane)
    keystone_cluster_error: str | None = None
    delivery_keystone_cluster_error: str | None = None
    mariadb: MariaDB | None = field(default_factory=make_mariadb)
    databases: tuple[DatabaseCR, ...] = field(default_factory=lambda: (own_database_cr(),))
    client_certificate: Secret | None = field(default_factory=client_certificate)
    vault_dynamic_secret: KubeObject | None = None
    external_secret: ExternalSecret | None = field(default_factory=make_external_secret)
    materialised: Secret | None = field(default_factory=materialised)
    ca_bundle: Secret | None = None
    delivered: Secret | None = None
    role_error: tuple[str, int | None] | None = None
    applied: Secret | None = None
    """The apply response; None echoes the applied manifest back."""
    cp_raw: dict[str, Any] | None = None
    """The ControlPlane as stored, read through the adapter's parsing instead of ``cp``."""
    database_raws: tuple[dict[str, Any], ...] | None = None
    """The Database CRs as stored, read through the adapter's parsing instead of ``databases``."""
    store_raw: dict[str, Any] | None = None
    """The order's SecretStore as stored, read through the adapter's parsing (None: defaults)."""
    order_raw: dict[str, Any] | None = None
    """The order as stored, read through the kind's parsing instead of ``order``."""
    claimed_by: str | None = None
    """The Database CR of another order that claimed the schema first (None: no such claim)."""
    children_live: bool = False
    """Every child the pass would apply, the delivered Secret included, already stands as the
    pass wants it (what the API server would answer for a converged order)."""
    openbao_role: str = "unobserved"
    """How the OpenBao role stands: "unobserved" (OpenBao is not asked), "desired", "absent" or
    "drifted" (another max_ttl)."""


def target_world(
    cluster: str = "edge-1", published: str = "db.example.test:3306", **overrides: Any
) -> World:
    """Return a converged world for the order on a target cluster, assigned there."""
    cp = make_control_plane(
        assignments=[{"namespace": "tenant-a", "targetClusterRef": {"name": cluster}}],
        published=published,
    )
    defaults: dict[str, Any] = {
        "cluster": cluster,
        "cp": cp,
        "databases": (own_database_cr(cluster=cluster),),
        "external_secret": make_external_secret(cluster=cluster),
        "materialised": materialised(cluster=cluster),
    }
    defaults.update(overrides)
    return World(**defaults)
