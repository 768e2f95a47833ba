"""Where one MariaDBDatabase's reads and writes go.

Owns the resolution of an order against its ControlPlane (or against nothing, once the
ControlPlane is gone): the ControlPlane namespace its children live in, Keystone's namespace and
cluster where the Database CR lives, the shared MariaDB's name, every child name, the labels,
the TLS switch and the store the OpenBao connection comes from. The engine reads this to know
what to fetch; the plans read it to know what to build. It must never fetch anything.
"""

from __future__ import annotations

from dataclasses import dataclass

from tenantdb.core.mariadbdatabase.controlplane import (
    compute_cluster_ref,
    compute_effective_keystone_database,
    compute_keystone_cluster,
    compute_keystone_namespace,
    is_tls_enabled,
)
from tenantdb.core.mariadbdatabase.models import ControlPlane, MariaDBDatabase
from tenantdb.core.mariadbdatabase.naming import (
    MANAGEMENT_CLUSTER,
    OrderNames,
    build_label_selector,
    build_order_labels,
    compute_effective_database_name,
    compute_order_names,
)
from tenantdb.core.mariadbdatabase.openbao import StoreLocation, compute_store_location


@dataclass(frozen=True)
class OrderScope:
    """The places and names one order's pass works with."""

    cluster: str
    """The cluster the order lives on ("" is management)."""
    cp_namespace: str
    """The resolved controlPlaneRef namespace: children, shared identity, role name."""
    cp_name: str
    keystone_namespace: str
    """Where the Database CR and the MariaDB live."""
    keystone_cluster: str
    """The cluster Keystone, the MariaDB and the Database CR run on."""
    cluster_ref: str
    """The name of the shared MariaDB CR ("" when the ControlPlane declares none)."""
    schema: str
    names: OrderNames
    labels: dict[str, str]
    label_selector: str
    tls: bool
    ca_bundle_secret: str
    store: StoreLocation


def compute_order_scope(
    order: MariaDBDatabase, cluster: str, cp: ControlPlane | None
) -> OrderScope:
    """Resolve an order's places; with the ControlPlane gone, everything is in childNS.

    The ControlPlane namespace is the resolved reference in both cases; without a ControlPlane
    Keystone's namespace reads as that namespace and its cluster as the management cluster.
    """
    meta = order.metadata
    cp_namespace = order.control_plane_namespace()
    database = compute_effective_keystone_database(cp) if cp is not None else None
    tls = database is not None and is_tls_enabled(database)
    ca_ref = database.tls.ca_bundle_secret_ref if database and database.tls else None
    return OrderScope(
        cluster=cluster,
        cp_namespace=cp_namespace,
        cp_name=order.spec.control_plane_ref.name,
        keystone_namespace=compute_keystone_namespace(cp) if cp is not None else cp_namespace,
        keystone_cluster=compute_keystone_cluster(cp) if cp is not None else MANAGEMENT_CLUSTER,
        cluster_ref=compute_cluster_ref(database) if database is not None else "",
        schema=compute_effective_database_name(order.spec.database_name, meta.name),
        names=compute_order_names(cluster, meta.namespace, meta.name, cp_namespace),
        labels=build_order_labels(cluster, meta.namespace, meta.name),
        label_selector=build_label_selector(cluster, meta.namespace, meta.name),
        tls=tls,
        ca_bundle_secret=ca_ref.name if ca_ref else "",
        store=compute_store_location(cp),
    )
