"""The watches of the MysqlDatabase kind, and how each of their events names orders.

MysqlDatabases, MysqlFailoverGroups and Secrets on the management cluster, where the kind is
served: an order event names the order; a group event names the orders of its namespace on
the group; a Secret event names the orders whose owner Secret it is and the orders on every
group that names it as a credential Secret or as its CA Secret. The index of which order names
which group and Secret is kept from the order watch, which Secrets each group names from the
group watch, and the claim index in Redis (which orders carry which schema, owner and users on
which group) that a pass reads its peers from instead of listing the namespace is kept from the
order watch too. So every object a pass reads wakes the order when it changes, which is what
lets a refresh trust the watches (``tenantdb.core.quiet``). Peer orders are not woken from
here: the pass that changes what its peers are checked against wakes them. The decisions are
core's (``tenantdb.core.mysqldatabase.mappers``); this module binds them to the kinds and the
index.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

from tenantdb.adapters.kube import SECRET, Object
from tenantdb.adapters.mysqldatabase import MYSQL_FAILOVER_GROUP
from tenantdb.adapters.watchindex import WatchIndex
from tenantdb.core.keys import OrderKey
from tenantdb.core.mysqldatabase.mappers import (
    compute_group_fingerprint,
    compute_group_secrets,
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
    """Which order names which group and owner Secret, and which Secrets each group names for
    its credentials, per namespace; looked up by name, so an event costs the same however many
    orders there are."""

    def __init__(self) -> None:
        """Start empty; the order and group watches fill it from their first lists."""
        self._lock = threading.Lock()
        self._orders: dict[ObjectName, tuple[str, str]] = {}
        self._on_group: dict[ObjectName, set[str]] = {}
        self._owning: dict[ObjectName, set[str]] = {}
        self._group_secrets: dict[ObjectName, tuple[str, ...]] = {}
        self._credential_of: dict[ObjectName, set[str]] = {}
        self.synced = threading.Event()
        """Set once the order watch has listed."""
        self.groups_synced = threading.Event()
        """Set once the group watch has listed (which it does only after the order watch)."""

    # -- orders, from the order watch

    def put(self, order: Mapping[str, Any]) -> None:
        """An order was added or changed."""
        with self._lock:
            self._put_order(object_name(order), compute_index_entry(order))

    def drop(self, name: ObjectName) -> None:
        """An order was deleted."""
        with self._lock:
            self._drop_order(name)

    def replace(self, orders: Iterable[Mapping[str, Any]]) -> None:
        """A relist replaces every order."""
        entries = {object_name(o): compute_index_entry(o) for o in orders}
        with self._lock:
            self._orders, self._on_group, self._owning = {}, {}, {}
            for name, entry in entries.items():
                self._put_order(name, entry)
        self.synced.set()

    def _put_order(self, name: ObjectName, entry: tuple[str, str]) -> None:
        self._drop_order(name)
        namespace, order = name
        self._orders[name] = entry
        group, owner = entry
        self._on_group.setdefault((namespace, group), set()).add(order)
        self._owning.setdefault((namespace, owner), set()).add(order)

    def _drop_order(self, name: ObjectName) -> None:
        entry = self._orders.pop(name, None)
        if entry is None:
            return
        namespace, order = name
        _discard(self._on_group, (namespace, entry[0]), order)
        _discard(self._owning, (namespace, entry[1]), order)

    # -- groups, from the group watch

    def put_group(self, group: Mapping[str, Any]) -> None:
        """A group was added or changed."""
        with self._lock:
            self._put_group(object_name(group), compute_group_secrets(group))

    def drop_group(self, name: ObjectName) -> None:
        """A group was deleted."""
        with self._lock:
            self._drop_group(name)

    def replace_groups(self, groups: Iterable[Mapping[str, Any]]) -> None:
        """A relist of the groups replaces every group."""
        entries = {object_name(g): compute_group_secrets(g) for g in groups}
        with self._lock:
            self._group_secrets, self._credential_of = {}, {}
            for name, secrets in entries.items():
                self._put_group(name, secrets)
        self.groups_synced.set()

    def _put_group(self, name: ObjectName, secrets: tuple[str, ...]) -> None:
        self._drop_group(name)
        namespace, group = name
        self._group_secrets[name] = secrets
        for secret in secrets:
            self._credential_of.setdefault((namespace, secret), set()).add(group)

    def _drop_group(self, name: ObjectName) -> None:
        namespace, group = name
        for secret in self._group_secrets.pop(name, ()):
            _discard(self._credential_of, (namespace, secret), group)

    # -- lookups

    def naming(self, namespace: str, *, group: str = "", secret: str = "") -> list[OrderKey]:
        """The orders of a namespace naming the group, or depending on the Secret: as their
        owner Secret, or as a credential Secret of the group they name."""
        with self._lock:
            names: set[str] = set()
            if group:
                names |= self._on_group.get((namespace, group), set())
            if secret:
                names |= self._owning.get((namespace, secret), set())
                for named in self._credential_of.get((namespace, secret), ()):
                    names |= self._on_group.get((namespace, named), set())
        return [IDENTITY.key(namespace, name) for name in sorted(names)]


def _discard(index: dict[ObjectName, set[str]], at: ObjectName, name: str) -> None:
    found = index.get(at)
    if found is not None:
        found.discard(name)
        if not found:
            del index[at]


class _GroupTracker:
    """Keeps the groups' credential Secrets in the index from the group watch."""

    def __init__(self, index: MysqlIndex) -> None:
        self.index = index

    def put(self, obj: Mapping[str, Any]) -> None:
        self.index.put_group(obj)

    def drop(self, name: ObjectName) -> None:
        self.index.drop_group(name)

    def replace(self, objs: list[Object]) -> None:
        self.index.replace_groups(objs)


def mysql_index(index: SharedIndex) -> MysqlIndex:
    """This term's MysqlDatabase index."""
    return index.extension("mysqldatabase", MysqlIndex)


def _mysql_tracker(index: SharedIndex, cluster: str, namespace: str | None) -> MysqlIndex:
    """Keeps the index from the order watch (of the management cluster only, where the kind is
    served)."""
    return mysql_index(index)


def _group_tracker(index: SharedIndex, cluster: str, namespace: str | None) -> _GroupTracker:
    """Keeps the groups' credential Secrets in the index from the group watch."""
    return _GroupTracker(mysql_index(index))


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
        tracker=_group_tracker,
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
        waits_for=lambda index: mysql_index(index).groups_synced,
    ),
)

register_routes(ROUTES)
