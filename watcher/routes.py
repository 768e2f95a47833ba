"""Which kinds are watched on which cluster, and how each event becomes order keys.

Owns the table of watched kinds (``ROUTES``, after mariadbdatabase.md §9): orders and labelled
Secrets and mariadb-operator Database CRs on every engaged cluster, ExternalSecrets,
VaultDynamicSecrets and ControlPlanes on the management cluster only, and there too the
shared OpenBao client certificate, so orders waiting for cert-manager go on when it is issued;
and the ``Dispatcher`` of one (cluster, kind) watch, which feeds every event through the core
mappers and update predicates, keeps the fan-out index up to date, and hands the keys to
``enqueue``. ADDED and DELETED always map; MODIFIED maps only when the kind's predicate passes it
against the fingerprint of the version seen before. A relist hands every listed object on as
ADDED and maps the objects that vanished meanwhile as DELETED, so the level-triggered engine
misses nothing.

It must never decide anything about an order, list or watch by itself, or log an object's body.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from tenantdb.adapters.kube import (
    CONTROL_PLANE,
    DATABASE,
    EXTERNAL_SECRET,
    MARIADB_DATABASE,
    SECRET,
    VAULT_DYNAMIC_SECRET,
    Object,
    Resource,
    WatchEvent,
)
from tenantdb.adapters.metrics import WATCH_EVENTS
from tenantdb.core.keys import OrderKey
from tenantdb.core.mariadbdatabase.mappers import (
    map_client_certificate,
    map_control_plane,
    map_database_cr,
    map_delivered_secret,
    map_labelled_child,
    map_order,
    should_enqueue_child_update,
    should_enqueue_control_plane_update,
    should_enqueue_order_update,
)
from tenantdb.core.mariadbdatabase.naming import CLIENT_CERTIFICATE, LABEL_NAME, MANAGEMENT_CLUSTER
from tenantdb.core.watching import (
    Fingerprint,
    compute_child_fingerprint,
    compute_control_plane_fingerprint,
    compute_order_fingerprint,
)
from watcher.index import ObjectName, Seen, SharedIndex, object_name

log = logging.getLogger(__name__)

Enqueue = Callable[[OrderKey], None]
Mapper = Callable[[Mapping[str, Any], str, SharedIndex], list[OrderKey]]

LISTED = "LISTED"
"""The event type counted for an object a relist hands on."""

# Only objects carrying the order's name label can map to an order; the selector keeps every
# unrelated Secret of a cluster off the wire.
ORDER_LABELLED = LABEL_NAME


class Tracker(Protocol):
    """Keeps a shared index in step with one watch."""

    def put(self, obj: Mapping[str, Any]) -> None:
        """An object was added or changed."""

    def drop(self, name: ObjectName) -> None:
        """An object was deleted."""

    def replace(self, objs: list[Object]) -> None:
        """A relist (or a kind the cluster does not serve: no objects) replaces all."""


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


def _map_order(obj: Mapping[str, Any], cluster: str, index: SharedIndex) -> list[OrderKey]:
    return map_order(obj, cluster)


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


def _map_control_plane(obj: Mapping[str, Any], cluster: str, index: SharedIndex) -> list[OrderKey]:
    namespace, name = object_name(obj)
    return map_control_plane(obj, index.orders_referencing(f"{namespace}/{name}"))


@dataclass(frozen=True, slots=True)
class Route:
    """One watched kind: where, with which selector, and how its events map."""

    resource: Resource
    label_selector: str | None
    management_only: bool
    fingerprint: Callable[[Mapping[str, Any]], Fingerprint]
    passes_update: Callable[[Mapping[str, Any], Mapping[str, Any]], bool]
    map_keys: Mapper
    field_selector: str | None = None
    name: str = ""
    """Names the watch where the kind alone does not (two watches of Secrets)."""
    tracker: Callable[[SharedIndex], Tracker] | None = None
    """Keeps the shared index from this kind's management-cluster watch."""
    waits_for: Callable[[SharedIndex], threading.Event] | None = None
    """What the first relist waits for, so its events map against a filled index."""

    @property
    def kind(self) -> str:
        """The watch, as loops, metrics and logs name it: its kind unless named."""
        return self.name or self.resource.kind


ROUTES: tuple[Route, ...] = (
    Route(
        MARIADB_DATABASE,
        None,
        False,
        compute_order_fingerprint,
        should_enqueue_order_update,
        _map_order,
        tracker=_OrderTracker,
    ),
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
    Route(
        DATABASE,
        ORDER_LABELLED,
        False,
        compute_child_fingerprint,
        should_enqueue_child_update,
        _map_database,
        waits_for=lambda index: index.control_planes_synced,
    ),
)


def routes_for(cluster: str) -> list[Route]:
    """The kinds watched on a cluster ("" is the management cluster)."""
    return [r for r in ROUTES if cluster == MANAGEMENT_CLUSTER or not r.management_only]


def cluster_label(cluster: str) -> str:
    """A cluster as metrics and logs name it."""
    return cluster or "management"


class Dispatcher:
    """Turns the events of one (cluster, kind) watch into enqueued order keys."""

    def __init__(
        self,
        route: Route,
        cluster: str,
        index: SharedIndex,
        enqueue: Enqueue,
        stopping: threading.Event,
        *,
        sync_wait: float = 10.0,
    ) -> None:
        """Bind a route to a cluster, the term's shared index and the guarded enqueue.

        Args:
            route: the watched kind.
            cluster: the cluster watched ("" is management).
            index: the shared index of this leadership term.
            enqueue: where keys go; it raises when the key could not be queued.
            stopping: set when the watch is told to stop; nothing is enqueued after it.
            sync_wait: how long the first relist waits for the index it maps against.
        """
        self.route = route
        self.cluster = cluster
        self.index = index
        self._enqueue = enqueue
        self._stopping = stopping
        self._sync_wait = sync_wait
        self._seen: dict[ObjectName, Seen] = {}
        self._tracker = (
            route.tracker(index)
            if route.tracker is not None and cluster == MANAGEMENT_CLUSTER
            else None
        )
        self._label = cluster_label(cluster)

    def _count(self, kind: str, n: int = 1) -> None:
        WATCH_EVENTS.labels(cluster=self._label, kind=self.route.kind, type=kind).inc(n)

    def _send(self, keys: list[OrderKey] | tuple[OrderKey, ...]) -> None:
        for key in keys:
            if self._stopping.is_set():
                return
            self._enqueue(key)

    def relisted(self, objs: list[Object]) -> None:
        """Hand on every listed object as ADDED, and every vanished one as DELETED."""
        self._wait_for_index()
        if self._tracker is not None:
            self._tracker.replace(objs)
        fresh: dict[ObjectName, Seen] = {}
        for obj in objs:
            keys = tuple(self.route.map_keys(obj, self.cluster, self.index))
            fresh[object_name(obj)] = Seen(self.route.fingerprint(obj), keys)
        gone = [seen for name, seen in self._seen.items() if name not in fresh]
        self._count(LISTED, len(objs))
        for seen in [*fresh.values(), *gone]:
            self._send(seen.keys)
        # Only once every key went out: a relist that failed half way compares with the old set.
        self._seen = fresh

    def not_served(self) -> None:
        """The cluster does not serve the kind: nothing is known of it."""
        if self._tracker is not None:
            self._tracker.replace([])
        self._seen = {}

    def handle(self, event: WatchEvent) -> None:
        """Map one watch event and enqueue its keys when it passes."""
        self._count(event.type)
        if event.type == "BOOKMARK":
            return
        name = object_name(event.obj)
        if event.type == "DELETED":
            self._seen.pop(name, None)
            if self._tracker is not None:
                self._tracker.drop(name)
            self._send(self.route.map_keys(event.obj, self.cluster, self.index))
            return
        if self._tracker is not None:
            self._tracker.put(event.obj)
        fingerprint = self.route.fingerprint(event.obj)
        keys = tuple(self.route.map_keys(event.obj, self.cluster, self.index))
        before = self._seen.get(name)
        self._seen[name] = Seen(fingerprint, keys)
        if (
            event.type == "MODIFIED"
            and before is not None
            and not self.route.passes_update(before.fingerprint, fingerprint)
        ):
            return
        self._send(keys)

    def _wait_for_index(self) -> None:
        if self.route.waits_for is None:
            return
        ready = self.route.waits_for(self.index)
        deadline = time.monotonic() + self._sync_wait
        while not ready.wait(0.05):
            if self._stopping.is_set() or time.monotonic() >= deadline:
                if not ready.is_set():
                    log.info(
                        "watch of %s on %s: mapping its relist before the index is filled",
                        self.route.kind,
                        self._label,
                    )
                return
