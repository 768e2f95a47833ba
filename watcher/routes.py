"""How watch events become order keys: the routes every kind declares, and their dispatch.

A ``Route`` is one watched kind: where it is watched (every engaged cluster, or the management
cluster only; on a target cluster cluster-wide or in the namespaces the ControlPlanes assign or
place Keystone in there), with which selectors, how an object is fingerprinted, which updates
pass, how an event maps to order keys, and what keeps the shared index. Each order kind declares
its routes in a module of its own (``watcher.mariadbdatabase`` for MariaDBDatabase, named in
``tenantdb.core.served.KINDS``) with ``register_routes``; ``routes_for`` gives the watcher every
registered route of a cluster.

The ``Dispatcher`` of one (cluster, route) watch feeds every event through the route's mapper
and update predicate, keeps the fan-out index up to date, and hands the keys to ``enqueue``.
ADDED and DELETED always map; MODIFIED maps only when the predicate passes it against the
fingerprint of the version seen before. A relist hands on, as ADDED, every listed object the watch
had not handed on, had handed on with another uid, or finds changed as the predicate judges it,
and maps the objects that vanished meanwhile as DELETED; an unchanged object wakes nobody. What
was handed on is remembered only once its keys went out, so a gap or a failed hand-on loses no
change, and the level-triggered engine misses nothing. A new leadership term starts with nothing
remembered, so its first relists hand on everything.

It must never decide anything about an order, list or watch by itself, or log an object's body.
"""

from __future__ import annotations

import importlib
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from tenantdb.adapters.kube import Object, Resource, WatchEvent, resource_of
from tenantdb.adapters.metrics import WATCH_EVENTS, WATCH_LAST_EVENT
from tenantdb.core.keys import MANAGEMENT_CLUSTER, InvalidOrderKeyError, OrderKey
from tenantdb.core.kinds import KindIdentity
from tenantdb.core.objects import metadata_of
from tenantdb.core.watching import (
    Fingerprint,
    compute_order_fingerprint,
    should_enqueue_order_update,
    should_wake_on_relist,
)
from watcher.index import ObjectName, Seen, SharedIndex, object_name

log = logging.getLogger(__name__)

Enqueue = Callable[[OrderKey], None]
Mapper = Callable[[Mapping[str, Any], str, SharedIndex], list[OrderKey]]

LISTED = "LISTED"
"""The event type counted for an object a relist hands on."""

OWN_WRITE = "OWN_WRITE"
"""Counted for an event that is the echo of tenantdb's own write, and so names no order."""


class Publisher(Protocol):
    """Keeps an index of one watch in Redis, for passes to read; trusted only while whole."""

    def put(self, obj: Mapping[str, Any]) -> None:
        """An object was added or changed."""

    def drop(self, name: ObjectName) -> None:
        """An object was deleted."""

    def replace(self, objs: list[Object]) -> None:
        """A relist (or a kind the cluster does not serve: no objects) replaces all."""

    def following(self) -> None:
        """A stream is open from where the last one ended: the index is whole again."""

    def interrupted(self) -> None:
        """The stream ended: events may be missed until the next one is open."""


@dataclass(frozen=True, slots=True)
class PublishTo:
    """Where a watch's publisher writes: the Redis of the work queue, under the key prefix,
    for one leadership term, one cluster and one namespace (None: the whole cluster)."""

    redis: Any
    prefix: str
    term: str
    cluster: str
    namespace: str | None


class Tracker(Protocol):
    """Keeps a shared index in step with one watch (one cluster, and one namespace or all)."""

    def put(self, obj: Mapping[str, Any]) -> None:
        """An object was added or changed."""

    def drop(self, name: ObjectName) -> None:
        """An object was deleted."""

    def replace(self, objs: list[Object]) -> None:
        """A relist (or a kind the cluster does not serve: no objects) replaces all the watch's
        objects (and none of another watch's)."""


MakeTracker = Callable[[SharedIndex, str, str | None], Tracker | None]
"""Given the term's shared index, a watch's cluster and its namespace (None: the whole cluster),
what keeps the index in step with that watch; None keeps nothing from it."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Route:
    """One watched kind: where, with which selector, and how its events map. Every field is
    named where a route is declared."""

    resource: Resource
    fingerprint: Callable[[Mapping[str, Any]], Fingerprint]
    """What of an object a change must touch to count (an update that leaves it is an echo)."""
    passes_update: Callable[[Mapping[str, Any], Mapping[str, Any]], bool]
    """Whether an update (old, new) wakes the orders it maps to."""
    map_keys: Mapper
    label_selector: str | None = None
    management_only: bool = False
    """Watched on the management cluster only (a target cluster never holds the kind)."""
    field_selector: str | None = None
    name: str = ""
    """Names the watch where the kind alone does not (two watches of Secrets)."""
    tracker: MakeTracker | None = None
    """Keeps the shared index from each of this kind's watches, on every cluster it is watched
    on and in every namespace (the route's own to decide which it keeps)."""
    waits_for: Callable[[SharedIndex], threading.Event] | None = None
    """What the first relist waits for, so its events map against a filled index."""
    namespaces: Callable[[SharedIndex, str], set[str]] | None = None
    """Where the kind is watched on a target cluster that grants it per namespace: given the
    index and the cluster, the namespaces to watch; None watches it cluster-wide everywhere."""
    publisher: Callable[[PublishTo, SharedIndex], Publisher] | None = None
    """Keeps an index of this watch in Redis for the passes (every cluster, every namespace),
    given where it writes and the term's shared index."""

    @property
    def kind(self) -> str:
        """The watch, as loops, metrics and logs name it: its kind unless named."""
        return self.name or self.resource.kind


def order_route(identity: KindIdentity, **extra: Any) -> Route:
    """The watch of an order kind on every cluster: each event names its own order.

    An update passes on a spec, label or annotation change or when deletion starts, so the
    status and finalizer writes of a pass wake nothing. ``extra`` sets the Route's other fields.
    """

    def map_keys(obj: Mapping[str, Any], cluster: str, index: SharedIndex) -> list[OrderKey]:
        namespace, name = object_name(obj)
        try:
            return [identity.key(namespace, name, cluster)]
        except InvalidOrderKeyError:
            return []

    return Route(
        resource=resource_of(identity),
        fingerprint=compute_order_fingerprint,
        passes_update=should_enqueue_order_update,
        map_keys=map_keys,
        **extra,
    )


_ROUTES: list[Route] = []


def register_routes(routes: Iterable[Route]) -> None:
    """Watch these routes too; a route already registered under its watch name is kept.

    Raises:
        ValueError: a different route already holds the same watch name.
    """
    for route in routes:
        found = next((r for r in _ROUTES if r.kind == route.kind), None)
        if found is None:
            _ROUTES.append(route)
        elif found != route:
            raise ValueError(f"two routes are named {route.kind!r}; name one of them")


def load_routes(modules: Iterable[str]) -> None:
    """Import the modules that declare routes, in order.

    The watcher's entry point names them: the route module of every kind in
    ``tenantdb.core.served.KINDS``, then the settings' kind modules. This module names no kind.
    """
    for module in modules:
        importlib.import_module(module)


def routes_for(cluster: str) -> list[Route]:
    """The watches of a cluster ("" is the management cluster), in registration order."""
    return [r for r in _ROUTES if cluster == MANAGEMENT_CLUSTER or not r.management_only]


def _uid(obj: Mapping[str, Any]) -> str:
    return str(metadata_of(obj).get("uid") or "")


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
        is_own_write: Callable[[str, Mapping[str, Any]], bool] | None = None,
        namespace: str | None = None,
        publish_to: PublishTo | None = None,
    ) -> None:
        """Bind a route to a cluster, the term's shared index and the guarded enqueue.

        Args:
            route: the watched kind.
            cluster: the cluster watched ("" is management).
            index: the shared index of this leadership term.
            enqueue: where keys go; it raises when the key could not be queued.
            stopping: set when the watch is told to stop; nothing is enqueued after it.
            sync_wait: how long the first relist waits for the index it maps against.
            is_own_write: tells the event of one of tenantdb's own writes, which wakes no
                order (the pass that wrote it saw it through); it answers False when unsure.
            namespace: the one namespace watched; None watches the whole cluster.
            publish_to: where the route's publisher writes; None publishes nothing.
        """
        self.route = route
        self.cluster = cluster
        self.namespace = namespace
        self.index = index
        self._enqueue = enqueue
        self._stopping = stopping
        self._sync_wait = sync_wait
        self._is_own_write = is_own_write
        self._seen: dict[ObjectName, Seen] = {}
        self._tracker = (
            route.tracker(index, cluster, namespace) if route.tracker is not None else None
        )
        self._publisher = (
            route.publisher(publish_to, index)
            if route.publisher is not None and publish_to is not None
            else None
        )
        self._label = cluster_label(cluster)
        self.heard_at = time.monotonic()
        """When the watch last handed on an event, a bookmark or a relist (monotonic seconds)."""
        self.where = self._label if namespace is None else f"{self._label}/{namespace}"
        """The cluster, and the namespace when only one is watched, as log lines name it."""

    def _count(self, kind: str, n: int = 1) -> None:
        WATCH_EVENTS.labels(cluster=self._label, kind=self.route.kind, type=kind).inc(n)
        if not self._stopping.is_set():  # a retired watch's last word is not a sign of life
            WATCH_LAST_EVENT.labels(cluster=self._label, kind=self.route.kind).set_to_current_time()
            self.heard_at = time.monotonic()

    def _send(self, keys: list[OrderKey] | tuple[OrderKey, ...]) -> None:
        for key in keys:
            if self._stopping.is_set():
                return
            self._enqueue(key)

    def relisted(self, objs: list[Object]) -> None:
        """Hand on every listed object that is new to the watch or changed since it last handed
        it on (``should_wake_on_relist``), and every vanished one as DELETED."""
        self._wait_for_index()
        if self._tracker is not None:
            self._tracker.replace(objs)
        if self._publisher is not None:
            self._publisher.replace(objs)
        fresh: dict[ObjectName, Seen] = {}
        waking: list[Seen] = []
        for obj in objs:
            name = object_name(obj)
            keys = tuple(self.route.map_keys(obj, self.cluster, self.index))
            seen = fresh[name] = Seen(_uid(obj), self.route.fingerprint(obj), keys)
            before = self._seen.get(name)
            was = None if before is None else (before.uid, before.fingerprint)
            if should_wake_on_relist(was, (seen.uid, seen.fingerprint), self.route.passes_update):
                waking.append(seen)
        gone = [seen for name, seen in self._seen.items() if name not in fresh]
        self._count(LISTED, len(objs))
        for seen in [*waking, *gone]:
            self._send(seen.keys)
        # Only once every key went out: a relist that failed half way compares with the old set.
        self._seen = fresh

    def not_served(self) -> None:
        """The cluster does not serve the kind: nothing is known of it (an answer all the same:
        the watch is alive, and asks again later)."""
        self.heard_at = time.monotonic()
        if self._tracker is not None:
            self._tracker.replace([])
        if self._publisher is not None:
            self._publisher.replace([])
            self._publisher.following()
        self._seen = {}

    def following(self) -> None:
        """A stream is open, from the relist or from where the last one ended (a sign of life:
        a quiet kind may send no bookmark, but its stream is opened again at least every
        server timeout)."""
        self.heard_at = time.monotonic()
        if self._publisher is not None:
            self._publisher.following()

    def interrupted(self) -> None:
        """The stream ended; until the next one is open, events wait or are lost (a 410)."""
        if self._publisher is None:
            return
        try:
            self._publisher.interrupted()
        except Exception as exc:  # the loop goes on; the next open stream marks it again
            log.warning(
                "watch of %s on %s: could not mark its index interrupted (%s)",
                self.route.kind,
                self.where,
                type(exc).__name__,
            )

    def handle(self, event: WatchEvent) -> None:
        """Map one watch event and enqueue its keys when it passes."""
        self._count(event.type)
        if event.type == "BOOKMARK":
            return
        name = object_name(event.obj)
        if event.type == "DELETED":
            if self._tracker is not None:
                self._tracker.drop(name)
            if self._publisher is not None:
                self._publisher.drop(name)
            self._send(self.route.map_keys(event.obj, self.cluster, self.index))
            self._seen.pop(name, None)
            return
        if self._tracker is not None:
            self._tracker.put(event.obj)
        if self._publisher is not None:
            self._publisher.put(event.obj)
        keys = tuple(self.route.map_keys(event.obj, self.cluster, self.index))
        seen = Seen(_uid(event.obj), self.route.fingerprint(event.obj), keys)
        before = self._seen.get(name)
        ignored = (
            event.type == "MODIFIED"
            and before is not None
            and not self.route.passes_update(before.fingerprint, seen.fingerprint)
        )
        if not ignored and self._is_own_write is not None:
            ignored = self._is_own_write(self.cluster, event.obj)
            if ignored:
                self._count(OWN_WRITE)
        if not ignored:
            self._send(seen.keys)
        # Remembered only once its keys went out: if they did not, the relist that follows
        # finds the object changed and hands it on again.
        self._seen[name] = seen

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
                        self.where,
                    )
                return
