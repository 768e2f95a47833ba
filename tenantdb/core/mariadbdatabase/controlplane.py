"""What a MariaDBDatabase reads off its ControlPlane: placement, consent and the shared database.

Owns the helpers the reference shares with the ControlPlane's own DB credential: Keystone's
namespace and cluster, the effective Keystone database, whether that database issues dynamic
credentials, the namespace assignment lookup, the namespaces assigned and placed on a cluster
(where a target cluster's watches look), and the TLS test. It must never fetch the
ControlPlane or decide an order's conditions.
"""

from __future__ import annotations

from collections.abc import Iterable

from tenantdb.core.mariadbdatabase.models import (
    ControlPlane,
    DatabaseDeclaration,
    NamespaceAssignment,
)
from tenantdb.core.mariadbdatabase.naming import MANAGEMENT_CLUSTER

DB_CREDENTIALS_READY = "DBCredentialsReady"
STATIC = "Static"
DEFAULT_DATABASE_PORT = 3306


def compute_keystone_namespace(cp: ControlPlane) -> str:
    """Return Keystone's namespace: its declared namespace, else the ControlPlane's."""
    keystone = cp.spec.services.keystone if cp.spec.services else None
    if keystone is not None and keystone.namespace is not None and keystone.namespace.name:
        return keystone.namespace.name
    return cp.metadata.namespace


def compute_keystone_cluster(cp: ControlPlane) -> str:
    """Return the cluster Keystone (and so the shared MariaDB) runs on; "" is management."""
    keystone = cp.spec.services.keystone if cp.spec.services else None
    if keystone is None or keystone.target_cluster_ref is None:
        return MANAGEMENT_CLUSTER
    return keystone.target_cluster_ref.name


def compute_effective_keystone_database(cp: ControlPlane) -> DatabaseDeclaration | None:
    """Return Keystone's dedicated database if declared, else the shared one, else None."""
    keystone = cp.spec.services.keystone if cp.spec.services else None
    dedicated = keystone.dedicated_backing_services if keystone else None
    if dedicated is not None and dedicated.database is not None:
        return dedicated.database
    if cp.spec.infrastructure is not None:
        return cp.spec.infrastructure.database or DatabaseDeclaration()
    return None


def is_dynamic_credentials_enabled(cp: ControlPlane) -> bool:
    """Report whether the effective Keystone database issues dynamic credentials.

    False for a dedicated Keystone database (the engine has no connection for it), a missing or
    brownfield database (no root credential), or credentialsMode Static (the Keystone override
    wins over the shared database's mode).
    """
    keystone = cp.spec.services.keystone if cp.spec.services else None
    dedicated = keystone.dedicated_backing_services if keystone else None
    if dedicated is not None and dedicated.database is not None:
        return False
    database = compute_effective_keystone_database(cp)
    if database is None or database.cluster_ref is None or not database.cluster_ref.name:
        return False
    override = keystone.database_credentials_mode if keystone else ""
    mode = override or database.credentials_mode
    return mode != STATIC


def find_namespace_assignment(
    cp: ControlPlane, namespace: str, cluster: str
) -> NamespaceAssignment | None:
    """Return the first entry assigning the namespace on the cluster, if any."""
    for entry in cp.spec.namespace_assignments:
        entry_cluster = entry.target_cluster_ref.name if entry.target_cluster_ref else ""
        if entry.namespace == namespace and entry_cluster == cluster:
            return entry
    return None


def compute_assigned_namespaces(control_planes: Iterable[ControlPlane], cluster: str) -> set[str]:
    """Return every namespace some ControlPlane assigns on the cluster ("" is management)."""
    return {
        entry.namespace
        for cp in control_planes
        for entry in cp.spec.namespace_assignments
        if entry.namespace
        and (entry.target_cluster_ref.name if entry.target_cluster_ref else "") == cluster
    }


def compute_placed_namespaces(control_planes: Iterable[ControlPlane], cluster: str) -> set[str]:
    """Return every namespace some ControlPlane places Keystone in on the cluster."""
    return {
        compute_keystone_namespace(cp)
        for cp in control_planes
        if compute_keystone_cluster(cp) == cluster and compute_keystone_namespace(cp)
    }


def is_db_credentials_ready(cp: ControlPlane) -> bool:
    """Report whether the ControlPlane's DBCredentialsReady reads True."""
    return cp.status.is_true(DB_CREDENTIALS_READY)


def is_tls_enabled(database: DatabaseDeclaration) -> bool:
    """Report whether the database's tls block is on (mode neither empty nor disabled)."""
    return database.tls is not None and database.tls.mode not in ("", "disabled")


def compute_cluster_ref(database: DatabaseDeclaration) -> str:
    """Return the MariaDB CR name of a managed database."""
    return database.cluster_ref.name if database.cluster_ref else ""


def compute_in_cluster_address(database: DatabaseDeclaration, keystone_namespace: str) -> str:
    """Return `<clusterRef>.<namespace>.svc:<port>` (managed) or `<host>:<port>` (brownfield)."""
    port = database.port if database.port > 0 else DEFAULT_DATABASE_PORT
    if database.cluster_ref is not None and database.cluster_ref.name:
        return f"{database.cluster_ref.name}.{keystone_namespace}.svc:{port}"
    return f"{database.host}:{port}"
