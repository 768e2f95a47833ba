"""The watches of the MariaDBDatabase kind, and how each of their events names orders.

After the MariaDBDatabase reconciler's watches: orders, labelled Secrets and mariadb-operator
Database CRs on every engaged cluster (every Database CR, whoever wrote it: the same watch keeps
the schema index the collision guard reads, ``tenantdb.adapters.schemaindex``); ExternalSecrets,
VaultDynamicSecrets and ControlPlanes on the management cluster only, and there too the shared
OpenBao client certificate, so orders waiting for cert-manager go on when it is issued. Beside
those, every other object a pass reads is watched too, so that a change to any of them wakes
the orders that read it: the MariaDB Keystone's database lives on (where Database CRs are
watched), and on the management cluster the SecretStores and ClusterSecretStores the OpenBao
connection comes from, and the shared ServiceAccount and client-certificate Certificate of each
ControlPlane namespace. On a target cluster that grants them per namespace, orders and
delivered Secrets are watched in each namespace the ControlPlanes assign there, and Database CRs
and MariaDBs in each namespace where one places Keystone. The order watch of every cluster
keeps the index a ControlPlane or shared object's event is fanned out through, so those events
wake the orders of a target cluster as they do the management cluster's. The decisions are core's
(``tenantdb.core.mariadbdatabase.mappers``); this module binds them to the kinds and the index.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from typing import Any

from tenantdb.adapters.kube import SECRET, SERVICE_ACCOUNT, Object
from tenantdb.adapters.mariadbdatabase import (
    CERTIFICATE,
    CLIENT_CERTIFICATE_WATCH,
    CLUSTER_SECRET_STORE,
    CONTROL_PLANE,
    DATABASE,
    EXTERNAL_SECRET,
    MARIADB,
    SECRET_STORE,
    VAULT_DYNAMIC_SECRET,
)
from tenantdb.adapters.schemaindex import SchemaIndex, Slot
from tenantdb.core.keys import OrderKey
from tenantdb.core.mariadbdatabase.controlplane import (
    compute_assigned_namespaces,
    compute_placed_namespaces,
)
from tenantdb.core.mariadbdatabase.mappers import (
    compute_control_plane_index_key,
    map_client_certificate,
    map_client_certificate_cr,
    map_control_plane,
    map_database_cr,
    map_delivered_secret,
    map_labelled_child,
    map_mariadb,
    map_secret_store,
    map_shared_service_account,
    should_enqueue_child_update,
    should_enqueue_control_plane_update,
)
from tenantdb.core.mariadbdatabase.models import ControlPlane
from tenantdb.core.mariadbdatabase.naming import (
    CLIENT_CERTIFICATE,
    IDENTITY,
    LABEL_NAME,
    MANAGEMENT_CLUSTER,
    SHARED_SERVICE_ACCOUNT,
)
from tenantdb.core.mariadbdatabase.openbao import CLUSTER_STORE_KIND, NAMESPACED_STORE_KIND
from tenantdb.core.mariadbdatabase.provision import compute_database_slot
from tenantdb.core.mariadbdatabase.watching import (
    compute_control_plane_fingerprint,
    compute_keystone_placement,
    compute_mariadb_fingerprint,
    compute_order_index_entry,
    compute_spec_fingerprint,
)
from tenantdb.core.watching import compute_child_fingerprint
from watcher.index import ObjectName, SharedIndex, object_name
from watcher.publishing import IndexPublisher, version_publisher
from watcher.routes import PublishTo, Route, order_route, register_routes

# Only objects carrying the order's name label can map to an order; the selector keeps every
# unrelated Secret of a cluster off the wire.
ORDER_LABELLED = LABEL_NAME


OrderName = tuple[str, str, str]
"""An order's (cluster, namespace, name): which watch it came from, and its name there."""


class ControlPlaneIndex:
    """This term's ControlPlane fan-out: the orders of every engaged cluster by the ControlPlane
    they name (each reduced to its cluster, name and controlPlaneRef), and the ControlPlanes
    reduced to Keystone's placement, the shared MariaDB's name, the secret store and their
    namespace assignments (which Database CR, MariaDB and store events are judged by, and which
    a target cluster's namespaced watches follow)."""

    def __init__(self, changed: threading.Event) -> None:
        """Start empty; ``changed`` is set whenever what is known of the ControlPlanes changes."""
        self._lock = threading.Lock()
        self._orders: dict[OrderName, dict[str, Any]] = {}
        self._by_control_plane: dict[str, set[OrderName]] = {}
        self._placements: dict[ObjectName, ControlPlane] = {}
        self._changed = changed
        self.orders_synced = threading.Event()
        """Set once the management cluster's order watch has listed its orders (a target
        cluster's are mapped by their own watch's relist, whenever it comes)."""
        self.control_planes_synced = threading.Event()

    # -- orders ----------------------------------------------------------------------------------

    def put_order(self, cluster: str, order: Mapping[str, Any]) -> None:
        """Remember an order of a cluster and its controlPlaneRef (replacing what was known)."""
        with self._lock:
            self._put_order(cluster, order)

    def drop_order(self, cluster: str, name: ObjectName) -> None:
        """Forget a deleted order of a cluster."""
        with self._lock:
            self._drop_order((cluster, *name))

    def replace_orders(
        self, cluster: str, namespace: str | None, orders: Iterable[Mapping[str, Any]]
    ) -> None:
        """Replace the orders of one watch's scope with its relist's: those of the cluster in
        that namespace, or in every namespace (None); every other order is kept."""
        with self._lock:
            for known in [
                n
                for n in self._orders
                if n[0] == cluster and (namespace is None or n[1] == namespace)
            ]:
                self._drop_order(known)
            for order in orders:
                self._put_order(cluster, order)
        if cluster == MANAGEMENT_CLUSTER:
            self.orders_synced.set()

    def _put_order(self, cluster: str, order: Mapping[str, Any]) -> None:
        name = (cluster, *object_name(order))
        entry = compute_order_index_entry(order, cluster)
        self._drop_order(name)
        self._orders[name] = entry
        self._by_control_plane.setdefault(compute_control_plane_index_key(entry), set()).add(name)

    def _drop_order(self, name: OrderName) -> None:
        entry = self._orders.pop(name, None)
        if entry is None:
            return
        index_key = compute_control_plane_index_key(entry)
        names = self._by_control_plane.get(index_key)
        if names is not None:
            names.discard(name)
            if not names:
                del self._by_control_plane[index_key]

    def orders_referencing(self, index_key: str) -> list[dict[str, Any]]:
        """The reduced orders, of every cluster, whose controlPlaneRef resolves to
        ``<namespace>/<name>``."""
        with self._lock:
            return [self._orders[n] for n in sorted(self._by_control_plane.get(index_key, ()))]

    def orders(self) -> list[dict[str, Any]]:
        """Every known order of every cluster, reduced to what the mappers read."""
        with self._lock:
            return [self._orders[n] for n in sorted(self._orders)]

    # -- ControlPlanes ---------------------------------------------------------------------------

    def put_control_plane(self, cp: Mapping[str, Any]) -> None:
        """Remember where a ControlPlane places Keystone."""
        placed = compute_keystone_placement(cp)
        name = object_name(cp)
        with self._lock:
            before = self._placements.pop(name, None)
            if placed is not None:
                self._placements[name] = placed
        if before != placed:
            self._changed.set()

    def drop_control_plane(self, name: ObjectName) -> None:
        """Forget a deleted ControlPlane."""
        with self._lock:
            before = self._placements.pop(name, None)
        if before is not None:
            self._changed.set()

    def replace_control_planes(self, cps: Iterable[Mapping[str, Any]]) -> None:
        """Replace every ControlPlane with a relist's."""
        with self._lock:
            self._placements.clear()
        for cp in cps:
            self.put_control_plane(cp)
        self.control_planes_synced.set()
        self._changed.set()

    def control_planes(self) -> list[ControlPlane]:
        """The known ControlPlanes, reduced to Keystone's placement, the shared MariaDB's name,
        the secret store and the namespace assignments."""
        with self._lock:
            return list(self._placements.values())


def control_plane_index(index: SharedIndex) -> ControlPlaneIndex:
    """This term's ControlPlane index."""
    return index.extension("mariadbdatabase", lambda: ControlPlaneIndex(index.namespaces_changed))


class _OrderTracker:
    """Keeps the index's orders in step with one order watch: its cluster, and its namespace
    (None: every namespace of the cluster). A watch that stops leaves its orders in the index
    (a namespace no longer assigned: its orders still read the ControlPlane); the next watch of
    that scope replaces them when it lists, and a new leadership term starts empty."""

    def __init__(self, index: SharedIndex, cluster: str, namespace: str | None) -> None:
        self._found = control_plane_index(index)
        self._cluster = cluster
        self._namespace = namespace

    def put(self, obj: Mapping[str, Any]) -> None:
        """An order of the watch was added or changed."""
        self._found.put_order(self._cluster, obj)

    def drop(self, name: ObjectName) -> None:
        """An order of the watch was deleted."""
        self._found.drop_order(self._cluster, name)

    def replace(self, objs: list[Object]) -> None:
        """The watch relisted: its scope's orders are these."""
        self._found.replace_orders(self._cluster, self._namespace, objs)


class _ControlPlaneTracker:
    def __init__(self, index: SharedIndex) -> None:
        found = control_plane_index(index)
        self.put = found.put_control_plane
        self.drop = found.drop_control_plane
        self.replace = found.replace_control_planes


def _control_plane_tracker(
    index: SharedIndex, cluster: str, namespace: str | None
) -> _ControlPlaneTracker | None:
    """Keeps the ControlPlanes from the management cluster's watch only (where they live)."""
    return _ControlPlaneTracker(index) if cluster == MANAGEMENT_CLUSTER else None


def _database_slots(obj: Mapping[str, Any]) -> tuple[Slot, ...]:
    """The (MariaDB, schema) a Database CR carries, tenantdb's own or anyone else's."""
    slot = compute_database_slot(obj)
    return () if slot is None else (slot,)


def _schema_publisher(to: PublishTo, index: SharedIndex) -> IndexPublisher:
    """Keeps the schema index of one Database CR watch (``tenantdb.adapters.schemaindex``)."""
    return IndexPublisher(SchemaIndex(to.redis, to.prefix), to, _database_slots)


def _map_secret(obj: Mapping[str, Any], cluster: str, index: SharedIndex) -> list[OrderKey]:
    delivered = map_delivered_secret(obj, cluster)
    if delivered or cluster != MANAGEMENT_CLUSTER:
        return delivered
    # The Secret ESO writes beside the ExternalSecret carries the labels through its template.
    return map_labelled_child(obj)


def _map_certificate(obj: Mapping[str, Any], cluster: str, index: SharedIndex) -> list[OrderKey]:
    return map_client_certificate(obj, control_plane_index(index).orders())


def _map_labelled(obj: Mapping[str, Any], cluster: str, index: SharedIndex) -> list[OrderKey]:
    return map_labelled_child(obj)


def _map_database(obj: Mapping[str, Any], cluster: str, index: SharedIndex) -> list[OrderKey]:
    return map_database_cr(obj, cluster, control_plane_index(index).control_planes())


def _map_mariadb(obj: Mapping[str, Any], cluster: str, index: SharedIndex) -> list[OrderKey]:
    found = control_plane_index(index)
    return map_mariadb(obj, cluster, found.control_planes(), found.orders_referencing)


def _map_secret_store(obj: Mapping[str, Any], cluster: str, index: SharedIndex) -> list[OrderKey]:
    found = control_plane_index(index)
    return map_secret_store(
        obj, NAMESPACED_STORE_KIND, found.control_planes(), found.orders_referencing
    )


def _map_cluster_secret_store(
    obj: Mapping[str, Any], cluster: str, index: SharedIndex
) -> list[OrderKey]:
    found = control_plane_index(index)
    return map_secret_store(
        obj, CLUSTER_STORE_KIND, found.control_planes(), found.orders_referencing
    )


def _map_service_account(
    obj: Mapping[str, Any], cluster: str, index: SharedIndex
) -> list[OrderKey]:
    return map_shared_service_account(obj, control_plane_index(index).orders())


def _map_certificate_cr(obj: Mapping[str, Any], cluster: str, index: SharedIndex) -> list[OrderKey]:
    return map_client_certificate_cr(obj, control_plane_index(index).orders())


def _listed_control_planes(index: SharedIndex) -> list[ControlPlane]:
    # Empty until the ControlPlanes are listed: a namespace watched early could be one they drop.
    found = control_plane_index(index)
    return found.control_planes() if found.control_planes_synced.is_set() else []


def _assigned(index: SharedIndex, cluster: str) -> set[str]:
    return compute_assigned_namespaces(_listed_control_planes(index), cluster)


def _placed(index: SharedIndex, cluster: str) -> set[str]:
    return compute_placed_namespaces(_listed_control_planes(index), cluster)


def _map_control_plane(obj: Mapping[str, Any], cluster: str, index: SharedIndex) -> list[OrderKey]:
    namespace, name = object_name(obj)
    return map_control_plane(
        obj, control_plane_index(index).orders_referencing(f"{namespace}/{name}")
    )


def _after_orders(index: SharedIndex) -> threading.Event:
    """Set once the order watches have listed: a ControlPlane's orders are known."""
    return control_plane_index(index).orders_synced


def _after_control_planes(index: SharedIndex) -> threading.Event:
    """Set once the ControlPlanes have listed: where Keystone is placed is known."""
    return control_plane_index(index).control_planes_synced


ROUTES: tuple[Route, ...] = (
    order_route(IDENTITY, tracker=_OrderTracker, namespaces=_assigned),
    Route(
        resource=CONTROL_PLANE,
        management_only=True,
        fingerprint=compute_control_plane_fingerprint,
        passes_update=should_enqueue_control_plane_update,
        map_keys=_map_control_plane,
        tracker=_control_plane_tracker,
        publisher=version_publisher(CONTROL_PLANE.kind),
        waits_for=_after_orders,
    ),
    Route(
        resource=SECRET,
        label_selector=ORDER_LABELLED,
        fingerprint=compute_child_fingerprint,
        passes_update=should_enqueue_child_update,
        map_keys=_map_secret,
        namespaces=_assigned,
    ),
    Route(
        resource=EXTERNAL_SECRET,
        label_selector=ORDER_LABELLED,
        management_only=True,
        fingerprint=compute_child_fingerprint,
        passes_update=should_enqueue_child_update,
        map_keys=_map_labelled,
    ),
    Route(
        resource=VAULT_DYNAMIC_SECRET,
        label_selector=ORDER_LABELLED,
        management_only=True,
        fingerprint=compute_child_fingerprint,
        passes_update=should_enqueue_child_update,
        map_keys=_map_labelled,
    ),
    Route(
        resource=SECRET,
        management_only=True,
        fingerprint=compute_child_fingerprint,
        passes_update=should_enqueue_child_update,
        map_keys=_map_certificate,
        field_selector=f"metadata.name={CLIENT_CERTIFICATE}",
        name=CLIENT_CERTIFICATE_WATCH,
        publisher=version_publisher(CLIENT_CERTIFICATE_WATCH),
        waits_for=_after_orders,
    ),
    # Every Database CR, not only tenantdb's: the collision guard asks the schema index which
    # CRs carry a schema, whoever wrote them. Only labelled ones map to an order.
    Route(
        resource=DATABASE,
        fingerprint=compute_child_fingerprint,
        passes_update=should_enqueue_child_update,
        map_keys=_map_database,
        waits_for=_after_control_planes,
        namespaces=_placed,
        publisher=_schema_publisher,
    ),
    # The MariaDB a pass reads for its Ready condition, where Keystone is placed: an update
    # passes when that condition flips, since it wakes every order placed on the MariaDB.
    Route(
        resource=MARIADB,
        fingerprint=compute_mariadb_fingerprint,
        passes_update=should_enqueue_child_update,
        map_keys=_map_mariadb,
        publisher=version_publisher(MARIADB.kind),
        waits_for=_after_control_planes,
        namespaces=_placed,
    ),
    # The store the OpenBao server and auth mount are copied from: its spec is what is read, so
    # a status write (the store validated again) wakes none of the orders sharing it.
    Route(
        resource=SECRET_STORE,
        management_only=True,
        fingerprint=compute_spec_fingerprint,
        passes_update=should_enqueue_child_update,
        map_keys=_map_secret_store,
        publisher=version_publisher(SECRET_STORE.kind),
        waits_for=_after_control_planes,
    ),
    Route(
        resource=CLUSTER_SECRET_STORE,
        management_only=True,
        fingerprint=compute_spec_fingerprint,
        passes_update=should_enqueue_child_update,
        map_keys=_map_cluster_secret_store,
        publisher=version_publisher(CLUSTER_SECRET_STORE.kind),
        waits_for=_after_control_planes,
    ),
    # The shared children every order of a ControlPlane namespace applies and compares (never
    # their status, so a renewal's bookkeeping wakes none of them).
    Route(
        resource=SERVICE_ACCOUNT,
        management_only=True,
        fingerprint=compute_spec_fingerprint,
        passes_update=should_enqueue_child_update,
        map_keys=_map_service_account,
        publisher=version_publisher(SERVICE_ACCOUNT.kind),
        field_selector=f"metadata.name={SHARED_SERVICE_ACCOUNT}",
        waits_for=_after_orders,
    ),
    Route(
        resource=CERTIFICATE,
        management_only=True,
        fingerprint=compute_spec_fingerprint,
        passes_update=should_enqueue_child_update,
        map_keys=_map_certificate_cr,
        publisher=version_publisher(CERTIFICATE.kind),
        field_selector=f"metadata.name={CLIENT_CERTIFICATE}",
        waits_for=_after_orders,
    ),
)

register_routes(ROUTES)
