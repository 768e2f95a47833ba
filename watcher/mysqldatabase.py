"""The watches of the MysqlDatabase kind, and how each of their events names orders.

MysqlDatabases, MysqlFailoverGroups and Secrets on the management cluster, where the kind is
served: an order event names the order; a group event names the orders of its namespace on
the group; a Secret event names the orders whose owner Secret it is. The index of which order
names which group and Secret is kept from the order watch, and so is the claim index in Redis
(which orders carry which schema, owner and users on which group) that a pass reads its peers
from instead of listing the namespace. Peer orders are not woken from here: the pass that
changes what its peers are checked against wakes them. The decisions are core's
(``tenantdb.core.mysqldatabase.mappers``); this module binds them to the kinds and the index.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

from tenantdb.adapters.kube import SECRET
from tenantdb.adapters.mysqldatabase import MYSQL_FAILOVER_GROUP
from tenantdb.adapters.watchindex import WatchIndex
from tenantdb.core.keys import OrderKey
from tenantdb.core.mysqldatabase.mappers import (
    compute_group_fingerprint,
    compute_index_entry,
    compute_secret_fingerprint,
    should_enqueue_digest_update,
)
from tenantdb.core.mysqldatabase.naming import CLAIM_INDEX, IDENTITY
from tenantdb.core.mysqldatabase.reading import compute_claim_slots
from watcher.index import ObjectName, SharedIndex, object_name
from watcher.publishing import IndexPublisher
from watcher.routes import PublishTo, Route, order_route, register_routes


class MysqlIndex:
    """Which order names which group and owner Secret, per namespace."""

    def __init__(self) -> None:
        """Start empty; the order watch fills it from its first list."""
        self._lock = threading.Lock()
        self._orders: dict[ObjectName, tuple[str, str]] = {}
        self.synced = threading.Event()

    def put(self, order: Mapping[str, Any]) -> None:
        """An order was added or changed."""
        with self._lock:
            self._orders[object_name(order)] = compute_index_entry(order)

    def drop(self, name: ObjectName) -> None:
        """An order was deleted."""
        with self._lock:
            self._orders.pop(name, None)

    def replace(self, orders: Iterable[Mapping[str, Any]]) -> None:
        """A relist replaces every order."""
        entries = {object_name(o): compute_index_entry(o) for o in orders}
        with self._lock:
            self._orders = entries
        self.synced.set()

    def naming(self, namespace: str, *, group: str = "", secret: str = "") -> list[OrderKey]:
        """The orders of a namespace naming the group (or the owner Secret)."""
        with self._lock:
            names = sorted(
                n
                for (ns, n), (g, s) in self._orders.items()
                if ns == namespace and ((group and g == group) or (secret and s == secret))
            )
        return [IDENTITY.key(namespace, name) for name in names]


def mysql_index(index: SharedIndex) -> MysqlIndex:
    """This term's MysqlDatabase index."""
    return index.extension("mysqldatabase", MysqlIndex)


def _mysql_tracker(index: SharedIndex, cluster: str, namespace: str | None) -> MysqlIndex:
    """Keeps the index from the order watch (of the management cluster only, where the kind is
    served)."""
    return mysql_index(index)


def _map_group(obj: Mapping[str, Any], cluster: str, index: SharedIndex) -> list[OrderKey]:
    namespace, name = object_name(obj)
    return mysql_index(index).naming(namespace, group=name)


def _map_secret(obj: Mapping[str, Any], cluster: str, index: SharedIndex) -> list[OrderKey]:
    namespace, name = object_name(obj)
    return mysql_index(index).naming(namespace, secret=name)


def _claim_publisher(to: PublishTo) -> IndexPublisher:
    """Keeps the claim index of the order watch (``compute_claim_slots``)."""
    return IndexPublisher(WatchIndex(to.redis, to.prefix, CLAIM_INDEX), to, compute_claim_slots)


ROUTES: tuple[Route, ...] = (
    replace(
        order_route(IDENTITY, tracker=_mysql_tracker, publisher=_claim_publisher),
        management_only=True,
    ),
    Route(
        MYSQL_FAILOVER_GROUP,
        None,
        True,
        compute_group_fingerprint,
        should_enqueue_digest_update,
        _map_group,
        waits_for=lambda index: mysql_index(index).synced,
    ),
    Route(
        SECRET,
        None,
        True,
        compute_secret_fingerprint,
        should_enqueue_digest_update,
        _map_secret,
        name="MysqlOwnerSecret",
        waits_for=lambda index: mysql_index(index).synced,
    ),
)

register_routes(ROUTES)
