"""The watches of the MariaDBDatabase kind, and how each of their events names orders.

After the MariaDBDatabase reconciler's watches: orders, labelled Secrets and mariadb-operator
Database CRs on every engaged cluster (every Database CR, whoever wrote it: the same watch keeps
the schema index the collision guard reads, ``tenantdb.adapters.schemaindex``); ExternalSecrets,
VaultDynamicSecrets and ControlPlanes on the management cluster only, and there too the shared
OpenBao client certificate, so orders waiting for cert-manager go on when it is issued. On a
target cluster that grants them per namespace, orders and delivered Secrets are watched in each
namespace the ControlPlanes assign there, and Database CRs in each namespace where one places
Keystone. The decisions are core's (``tenantdb.core.mariadbdatabase.mappers``); this module
binds them to the kinds and the index.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tenantdb.adapters.kube import (
    CONTROL_PLANE,
    DATABASE,
    EXTERNAL_SECRET,
    SECRET,
    VAULT_DYNAMIC_SECRET,
)
from tenantdb.adapters.schemaindex import SchemaIndex, Slot
from tenantdb.core.keys import OrderKey
from tenantdb.core.mariadbdatabase.controlplane import (
    compute_assigned_namespaces,
    compute_placed_namespaces,
)
from tenantdb.core.mariadbdatabase.mappers import (
    map_client_certificate,
    map_control_plane,
    map_database_cr,
    map_delivered_secret,
    map_labelled_child,
    should_enqueue_child_update,
    should_enqueue_control_plane_update,
)
from tenantdb.core.mariadbdatabase.naming import (
    CLIENT_CERTIFICATE,
    IDENTITY,
    LABEL_NAME,
    MANAGEMENT_CLUSTER,
)
from tenantdb.core.mariadbdatabase.provision import compute_database_slot
from tenantdb.core.watching import (
    compute_child_fingerprint,
    compute_control_plane_fingerprint,
)
from watcher.index import SharedIndex, object_name
from watcher.publishing import IndexPublisher
from watcher.routes import PublishTo, Route, order_route, register_routes

# Only objects carrying the order's name label can map to an order; the selector keeps every
# unrelated Secret of a cluster off the wire.
ORDER_LABELLED = LABEL_NAME


class _OrderTracker:
    def __init__(self, index: SharedIndex) -> None:
        self.put = index.put_order
        self.drop = index.drop_order
        self.replace = index.replace_orders


class _ControlPlaneTracker:
    def __init__(self, index: SharedIndex) -> None:
        self.put = index.put_control_plane
        self.drop = index.drop_control_plane
        self.replace = index.replace_control_planes


def _database_slots(obj: Mapping[str, Any]) -> tuple[Slot, ...]:
    """The (MariaDB, schema) a Database CR carries, tenantdb's own or anyone else's."""
    slot = compute_database_slot(obj)
    return () if slot is None else (slot,)


def _schema_publisher(to: PublishTo) -> IndexPublisher:
    """Keeps the schema index of one Database CR watch (``tenantdb.adapters.schemaindex``)."""
    return IndexPublisher(SchemaIndex(to.redis, to.prefix), to, _database_slots)


def _map_secret(obj: Mapping[str, Any], cluster: str, index: SharedIndex) -> list[OrderKey]:
    delivered = map_delivered_secret(obj, cluster)
    if delivered or cluster != MANAGEMENT_CLUSTER:
        return delivered
    # The Secret ESO writes beside the ExternalSecret carries the labels through its template.
    return map_labelled_child(obj)


def _map_certificate(obj: Mapping[str, Any], cluster: str, index: SharedIndex) -> list[OrderKey]:
    return map_client_certificate(obj, index.orders())


def _map_labelled(obj: Mapping[str, Any], cluster: str, index: SharedIndex) -> list[OrderKey]:
    return map_labelled_child(obj)


def _map_database(obj: Mapping[str, Any], cluster: str, index: SharedIndex) -> list[OrderKey]:
    return map_database_cr(obj, cluster, index.control_planes())


def _assigned(index: SharedIndex, cluster: str) -> set[str]:
    return compute_assigned_namespaces(index.control_planes(), cluster)


def _placed(index: SharedIndex, cluster: str) -> set[str]:
    return compute_placed_namespaces(index.control_planes(), cluster)


def _map_control_plane(obj: Mapping[str, Any], cluster: str, index: SharedIndex) -> list[OrderKey]:
    namespace, name = object_name(obj)
    return map_control_plane(obj, index.orders_referencing(f"{namespace}/{name}"))


ROUTES: tuple[Route, ...] = (
    order_route(IDENTITY, tracker=_OrderTracker, namespaces=_assigned),
    Route(
        CONTROL_PLANE,
        None,
        True,
        compute_control_plane_fingerprint,
        should_enqueue_control_plane_update,
        _map_control_plane,
        tracker=_ControlPlaneTracker,
        waits_for=lambda index: index.orders_synced,
    ),
    Route(
        SECRET,
        ORDER_LABELLED,
        False,
        compute_child_fingerprint,
        should_enqueue_child_update,
        _map_secret,
        namespaces=_assigned,
    ),
    Route(
        EXTERNAL_SECRET,
        ORDER_LABELLED,
        True,
        compute_child_fingerprint,
        should_enqueue_child_update,
        _map_labelled,
    ),
    Route(
        VAULT_DYNAMIC_SECRET,
        ORDER_LABELLED,
        True,
        compute_child_fingerprint,
        should_enqueue_child_update,
        _map_labelled,
    ),
    Route(
        SECRET,
        None,
        True,
        compute_child_fingerprint,
        should_enqueue_child_update,
        _map_certificate,
        field_selector=f"metadata.name={CLIENT_CERTIFICATE}",
        name="ClientCertificate",
        waits_for=lambda index: index.orders_synced,
    ),
    # Every Database CR, not only tenantdb's: the collision guard asks the schema index which
    # CRs carry a schema, whoever wrote them. Only labelled ones map to an order.
    Route(
        DATABASE,
        None,
        False,
        compute_child_fingerprint,
        should_enqueue_child_update,
        _map_database,
        waits_for=lambda index: index.control_planes_synced,
        namespaces=_placed,
        publisher=_schema_publisher,
    ),
)

register_routes(ROUTES)
