"""Which MariaDBDatabase orders a watch event concerns.

Owns the pure mapping decisions the watcher makes: an event on an order (and the predicate
that ignores tenantdb's own status and finalizer writes), on its delivered Secret (by the
controller owner reference), on a labelled Secret, ExternalSecret or VaultDynamicSecret on the
management cluster, on a mariadb-operator Database (only in a namespace where a ControlPlane
places Keystone on that cluster), on a ControlPlane (a spec change, a deletion, or a flip of
DBCredentialsReady fans out to the orders that reference it, on whichever cluster each one
lives), and on the shared objects a pass reads beside the order's own: the MariaDB Keystone's
database lives on, the SecretStore or ClusterSecretStore the OpenBao connection comes from, and
the ServiceAccount, Certificate and client-certificate Secret every order of a ControlPlane
namespace shares. Each of these wakes exactly the orders whose pass reads that object, as
``scope.compute_order_scope`` resolves it from their ControlPlane, and each order's key names
the cluster the order lives on. Objects come in as the raw dicts a watch yields; orders may come
reduced to an index entry (``watching.compute_order_index_entry``), which carries its cluster.
It must never list, fetch or enqueue anything.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from tenantdb.core.keys import InvalidOrderKeyError, OrderKey
from tenantdb.core.mariadbdatabase.controlplane import (
    DB_CREDENTIALS_READY,
    compute_cluster_ref,
    compute_effective_keystone_database,
    compute_keystone_cluster,
    compute_keystone_namespace,
)
from tenantdb.core.mariadbdatabase.models import ControlPlane
from tenantdb.core.mariadbdatabase.naming import (
    CLIENT_CERTIFICATE,
    GROUP,
    KIND,
    LABEL_CLUSTER,
    LABEL_NAME,
    LABEL_NAMESPACE,
    MANAGEMENT_CLUSTER,
    SHARED_SERVICE_ACCOUNT,
    SINGULAR,
)
from tenantdb.core.mariadbdatabase.openbao import (
    CLUSTER_STORE_KIND,
    StoreLocation,
    compute_store_location,
)
from tenantdb.core.objects import metadata_of
from tenantdb.core.watching import should_enqueue_order_update as should_enqueue_order_update

ORDER_KIND = SINGULAR
"""The kind part of a MariaDBDatabase order key."""

ORDER_CLUSTER = "cluster"
"""Where an order's index entry carries the cluster the order lives on (no Kubernetes field:
an order does not say which cluster it is on; the watch it came from does)."""

OrdersReferencing = Callable[[str], Iterable[Mapping[str, Any]]]
"""Given `<namespace>/<name>` of a ControlPlane, the orders naming it, on every cluster."""

_VOLATILE_METADATA = ("resourceVersion", "managedFields")


def _str_map(value: Any) -> dict[str, str]:
    if not isinstance(value, Mapping):
        return {}
    return {str(k): str(v) for k, v in value.items()}


def compute_order_key(cluster: str, namespace: str, name: str) -> OrderKey | None:
    """Return the order key, or None when the parts cannot name an order."""
    if not namespace or not name:
        return None
    try:
        return OrderKey(kind=ORDER_KIND, namespace=namespace, name=name, cluster=cluster)
    except InvalidOrderKeyError:
        return None


def _keys(key: OrderKey | None) -> list[OrderKey]:
    return [key] if key is not None else []


def map_order(obj: Mapping[str, Any], cluster: str) -> list[OrderKey]:
    """Map an event on an order to its own key, on the cluster the event came from."""
    meta = metadata_of(obj)
    return _keys(
        compute_order_key(cluster, str(meta.get("namespace", "")), str(meta.get("name", "")))
    )


def compute_order_cluster(order: Mapping[str, Any]) -> str:
    """Return the cluster an order lives on, as its index entry carries it; an order that does
    not carry one (a whole object, as a watch yields it) reads as on the management cluster."""
    cluster = order.get(ORDER_CLUSTER)
    return cluster if isinstance(cluster, str) else MANAGEMENT_CLUSTER


def map_order_entry(order: Mapping[str, Any]) -> list[OrderKey]:
    """Map an order (or its index entry) to its own key, on the cluster it lives on."""
    return map_order(order, compute_order_cluster(order))


def map_delivered_secret(obj: Mapping[str, Any], cluster: str) -> list[OrderKey]:
    """Map a Secret to the order that controls it, on the event's cluster."""
    meta = metadata_of(obj)
    for ref in meta.get("ownerReferences") or ():
        if not isinstance(ref, Mapping) or not ref.get("controller"):
            continue
        api_version = str(ref.get("apiVersion", ""))
        if ref.get("kind") == KIND and api_version.split("/")[0] == GROUP:
            return _keys(
                compute_order_key(cluster, str(meta.get("namespace", "")), str(ref.get("name", "")))
            )
    return []


def map_labelled_child(obj: Mapping[str, Any]) -> list[OrderKey]:
    """Map a labelled child to its order: name and namespace labels, cluster from its label.

    Both the name and the namespace label must be non-empty; an absent cluster label reads as
    the management cluster.
    """
    labels = _str_map(metadata_of(obj).get("labels"))
    name, namespace = labels.get(LABEL_NAME, ""), labels.get(LABEL_NAMESPACE, "")
    return _keys(compute_order_key(labels.get(LABEL_CLUSTER, MANAGEMENT_CLUSTER), namespace, name))


def is_keystone_placed(
    namespace: str, cluster: str, control_planes: Iterable[ControlPlane]
) -> bool:
    """Report whether some ControlPlane places Keystone in that namespace on that cluster."""
    return any(
        compute_keystone_namespace(cp) == namespace and compute_keystone_cluster(cp) == cluster
        for cp in control_planes
    )


def map_database_cr(
    obj: Mapping[str, Any], cluster: str, control_planes: Iterable[ControlPlane]
) -> list[OrderKey]:
    """Map a mariadb-operator Database to its order, only where a ControlPlane puts Keystone.

    An unlabelled CR maps to nothing before any ControlPlane is looked at; a CR an owner writes
    in an assigned namespace wakes no order, whatever its labels.
    """
    keys = map_labelled_child(obj)
    if not keys:
        return []
    namespace = str(metadata_of(obj).get("namespace", ""))
    return keys if is_keystone_placed(namespace, cluster, control_planes) else []


def compute_control_plane_index_key(order: Mapping[str, Any]) -> str:
    """Return `<resolved namespace>/<name>` of an order's controlPlaneRef (the fan-out index)."""
    spec = order.get("spec")
    ref = spec.get("controlPlaneRef") if isinstance(spec, Mapping) else None
    if not isinstance(ref, Mapping):
        return ""
    namespace = ref.get("namespace") or metadata_of(order).get("namespace", "")
    return f"{namespace}/{ref.get('name', '')}"


def map_control_plane(cp: Mapping[str, Any], orders: Iterable[Mapping[str, Any]]) -> list[OrderKey]:
    """Fan a ControlPlane event out to the orders that reference it, each on its own cluster
    (an order on a target cluster names a ControlPlane of the management cluster)."""
    meta = metadata_of(cp)
    wanted = f"{meta.get('namespace', '')}/{meta.get('name', '')}"
    keys: list[OrderKey] = []
    for order in orders:
        if compute_control_plane_index_key(order) == wanted:
            keys += map_order_entry(order)
    return keys


def _condition_status(obj: Mapping[str, Any], condition_type: str) -> str:
    status = obj.get("status")
    conditions = status.get("conditions") if isinstance(status, Mapping) else None
    for condition in conditions or ():
        if isinstance(condition, Mapping) and condition.get("type") == condition_type:
            return str(condition.get("status", ""))
    return ""


def _is_true(obj: Mapping[str, Any], condition_type: str) -> bool:
    return _condition_status(obj, condition_type) == "True"


def should_enqueue_control_plane_update(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """Pass a ControlPlane update on a spec change, a deletion, or a DBCredentialsReady flip."""
    old_meta, new_meta = metadata_of(old), metadata_of(new)
    if old_meta.get("generation") != new_meta.get("generation"):
        return True
    if old_meta.get("deletionTimestamp") != new_meta.get("deletionTimestamp"):
        return True
    return _is_true(old, DB_CREDENTIALS_READY) != _is_true(new, DB_CREDENTIALS_READY)


def should_enqueue_child_update(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """Pass a child update unless nothing but bookkeeping changed (a resync or a no-op write)."""
    return _strip_volatile(old) != _strip_volatile(new)


def _strip_volatile(obj: Mapping[str, Any]) -> dict[str, Any]:
    stripped = dict(obj)
    meta = {k: v for k, v in metadata_of(obj).items() if k not in _VOLATILE_METADATA}
    stripped["metadata"] = meta
    return stripped


def _orders_in_control_plane_namespace(
    obj: Mapping[str, Any], name: str, orders: Iterable[Mapping[str, Any]]
) -> list[OrderKey]:
    meta = metadata_of(obj)
    if meta.get("name") != name:
        return []
    namespace = str(meta.get("namespace", ""))
    keys: list[OrderKey] = []
    for order in orders:
        if compute_control_plane_index_key(order).split("/", 1)[0] == namespace:
            keys += map_order_entry(order)
    return keys


def map_client_certificate(
    secret: Mapping[str, Any], orders: Iterable[Mapping[str, Any]]
) -> list[OrderKey]:
    """Map the shared OpenBao client certificate to the orders of its ControlPlane namespace,
    each on its own cluster.

    The reference waits out its 10 s requeue until cert-manager has issued the certificate;
    mapping the Secret's events lets the orders waiting on it go on as soon as it is written.
    """
    return _orders_in_control_plane_namespace(secret, CLIENT_CERTIFICATE, orders)


def map_client_certificate_cr(
    certificate: Mapping[str, Any], orders: Iterable[Mapping[str, Any]]
) -> list[OrderKey]:
    """Map the cert-manager Certificate of the client certificate to the orders of its
    ControlPlane namespace, each on its own cluster.

    Every order resolving its controlPlaneRef to that namespace applies the same Certificate
    and compares it with what it wants, so an edit or a deletion of it is theirs to repair.
    """
    return _orders_in_control_plane_namespace(certificate, CLIENT_CERTIFICATE, orders)


def map_shared_service_account(
    account: Mapping[str, Any], orders: Iterable[Mapping[str, Any]]
) -> list[OrderKey]:
    """Map the shared ServiceAccount ESO's generator logs in as to the orders of its ControlPlane
    namespace, each on its own cluster: each of them applies it and compares it with what it
    wants."""
    return _orders_in_control_plane_namespace(account, SHARED_SERVICE_ACCOUNT, orders)


def _orders_of(cp: ControlPlane, orders_referencing: OrdersReferencing) -> list[OrderKey]:
    keys: list[OrderKey] = []
    for order in orders_referencing(f"{cp.metadata.namespace}/{cp.metadata.name}"):
        keys += map_order_entry(order)
    return keys


def compute_mariadb_name(cp: ControlPlane) -> str:
    """Return the name of the MariaDB an order of the ControlPlane reads ("" when none)."""
    database = compute_effective_keystone_database(cp)
    return compute_cluster_ref(database) if database is not None else ""


def map_mariadb(
    obj: Mapping[str, Any],
    cluster: str,
    control_planes: Iterable[ControlPlane],
    orders_referencing: OrdersReferencing,
) -> list[OrderKey]:
    """Map a mariadb-operator MariaDB to the orders whose pass reads it.

    A pass reads the MariaDB its ControlPlane's effective Keystone database names, in Keystone's
    namespace on Keystone's cluster, for its Ready condition; so a MariaDB wakes the orders of
    each ControlPlane that places Keystone on this cluster and in this namespace with a database
    of this name, and no other.
    """
    meta = metadata_of(obj)
    namespace, name = str(meta.get("namespace", "")), str(meta.get("name", ""))
    if not name:
        return []
    keys: list[OrderKey] = []
    for cp in control_planes:
        if (
            compute_mariadb_name(cp) == name
            and compute_keystone_namespace(cp) == namespace
            and compute_keystone_cluster(cp) == cluster
        ):
            keys += _orders_of(cp, orders_referencing)
    return keys


def compute_event_store_location(obj: Mapping[str, Any], kind: str) -> StoreLocation:
    """Return where a SecretStore or ClusterSecretStore event's object sits, as the store an
    order's scope names would (a cluster store has no namespace)."""
    meta = metadata_of(obj)
    namespace = "" if kind == CLUSTER_STORE_KIND else str(meta.get("namespace", ""))
    return StoreLocation(kind, str(meta.get("name", "")), namespace)


def map_secret_store(
    obj: Mapping[str, Any],
    kind: str,
    control_planes: Iterable[ControlPlane],
    orders_referencing: OrdersReferencing,
) -> list[OrderKey]:
    """Map a SecretStore or ClusterSecretStore (``kind``) to the orders whose pass reads it.

    A pass copies the OpenBao server and Kubernetes-auth mount from the store its ControlPlane
    names (``openbao.compute_store_location``), so a store wakes the orders of the ControlPlanes
    naming that store, and no other.
    """
    location = compute_event_store_location(obj, kind)
    if not location.name:
        return []
    keys: list[OrderKey] = []
    for cp in control_planes:
        if compute_store_location(cp) == location:
            keys += _orders_of(cp, orders_referencing)
    return keys
