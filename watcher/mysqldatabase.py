"""The watches of the MysqlDatabase kind, and how each of their events names orders.

MysqlDatabases, MysqlFailoverGroups and Secrets on the management cluster, where the kind is
served: an order event names the order; a group event names the orders of its namespace on
the group; a Secret event names the orders whose owner Secret it is and the orders on every
group that names it as a credential Secret or as its CA Secret. The index of which order names
which group and Secret is kept from the order watch, which Secrets each group names from the
group watch, and the claim index in Redis (which orders carry which schema, owner and users on
which group) that a pass reads its peers from instead of listing the namespace is kept from the
order watch too. The owner-name index (which Secrets name which username, as a digest), from
which a pass learns which peers without a recorded owner claim one of its users, is kept from
the Secret watch. So every object a pass reads wakes the order when it changes, which is what
lets a refresh trust the watches (``tenantdb.core.quiet``). Peer orders are not woken from
here: the pass that changes what its peers are checked against wakes them. The decisions are
core's (``tenantdb.core.mysqldatabase.mappers``); this module binds them to the kinds and the
index.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from typing import Any, Protocol

from tenantdb.adapters.kube import SECRET, Object
from tenantdb.adapters.mysqldatabase import MYSQL_FAILOVER_GROUP
from tenantdb.adapters.watchindex import WatchIndex
from tenantdb.core.keys import OrderKey
from tenantdb.core.mysqldatabase.mappers import (
    IndexEntry,
    compute_group_fingerprint,
    compute_group_secrets,
    compute_index_entry,
    compute_secret_fingerprint,
    should_enqueue_digest_update,
)
from tenantdb.core.mysqldatabase.naming import CLAIM_INDEX, IDENTITY, OWNER_NAME_INDEX
from tenantdb.core.mysqldatabase.reading import (
    Slot,
    compute_claim_slots,
    compute_owner_name_slots,
    unresolved_slot,
)
from watcher.index import ObjectName, SharedIndex, object_name
from watcher.publishing import IndexPublisher
from watcher.routes import PublishTo, Route, order_route, register_routes


class UnresolvedWriter(Protocol):
    """Where the index writes which orders await an owner their Secret does not name."""

    def write_unresolved(self, namespace: str, slots: Mapping[Slot, Iterable[str]]) -> None:
        """Set the orders carrying each slot of a namespace; none removes its field."""


class MysqlIndex:
    """Which order names which group and owner Secret, and which Secrets each group names for
    its credentials, per namespace; looked up by name, so an event costs the same however many
    orders there are. Joins the order and Secret watches for the owner-name index: which
    orders await an owner while their owner Secret names no username (``unresolved_slot``)."""

    def __init__(self) -> None:
        """Start empty; the order and group watches fill it from their first lists."""
        self._lock = threading.Lock()
        self._orders: dict[ObjectName, IndexEntry] = {}
        self._on_group: dict[ObjectName, set[str]] = {}
        self._owning: dict[ObjectName, set[str]] = {}
        self._group_secrets: dict[ObjectName, tuple[str, ...]] = {}
        self._credential_of: dict[ObjectName, set[str]] = {}
        self._named: set[ObjectName] = set()
        self._unresolved: dict[ObjectName, set[str]] = {}
        self._unresolved_on: dict[ObjectName, str] = {}
        self._writer: UnresolvedWriter | None = None
        self.synced = threading.Event()
        """Set once the order watch has listed."""
        self.groups_synced = threading.Event()
        """Set once the group watch has listed (which it does only after the order watch)."""

    # -- orders, from the order watch

    def put(self, order: Mapping[str, Any]) -> None:
        """An order was added or changed."""
        name = object_name(order)
        with self._lock:
            self._put_order(name, compute_index_entry(order))
            self._publish(self._resolve(name))

    def drop(self, name: ObjectName) -> None:
        """An order was deleted."""
        with self._lock:
            self._drop_order(name)
            self._publish(self._resolve(name))

    def replace(self, orders: Iterable[Mapping[str, Any]]) -> None:
        """A relist replaces every order."""
        entries = {object_name(o): compute_index_entry(o) for o in orders}
        with self._lock:
            gone = set(self._orders) - set(entries)
            self._orders, self._on_group, self._owning = {}, {}, {}
            for name, entry in entries.items():
                self._put_order(name, entry)
            changed: set[ObjectName] = set()
            for name in (*gone, *entries):
                changed |= self._resolve(name)
            self._publish(changed)
        self.synced.set()

    def _put_order(self, name: ObjectName, entry: IndexEntry) -> None:
        self._drop_order(name)
        namespace, order = name
        self._orders[name] = entry
        self._on_group.setdefault((namespace, entry.group), set()).add(order)
        self._owning.setdefault((namespace, entry.owner_secret), set()).add(order)

    def _drop_order(self, name: ObjectName) -> None:
        entry = self._orders.pop(name, None)
        if entry is None:
            return
        namespace, order = name
        _discard(self._on_group, (namespace, entry.group), order)
        _discard(self._owning, (namespace, entry.owner_secret), order)

    # -- owner Secrets, from the Secret watch

    def put_secret(self, secret: Mapping[str, Any]) -> None:
        """A Secret was added or changed."""
        with self._lock:
            self._publish(self._set_named(object_name(secret), compute_owner_name_slots(secret)))

    def drop_secret(self, name: ObjectName) -> None:
        """A Secret was deleted."""
        with self._lock:
            self._publish(self._set_named(name, ()))

    def replace_secrets(self, secrets: Iterable[Mapping[str, Any]]) -> None:
        """A relist of the Secrets replaces every Secret."""
        named = {object_name(s) for s in secrets if compute_owner_name_slots(s)}
        with self._lock:
            flipped, self._named = self._named ^ named, named
            changed: set[ObjectName] = set()
            for namespace, secret in flipped:
                for order in tuple(self._owning.get((namespace, secret), ())):
                    changed |= self._resolve((namespace, order))
            self._publish(changed)

    def _set_named(self, name: ObjectName, slots: tuple[Slot, ...]) -> set[ObjectName]:
        if bool(slots) == (name in self._named):
            return set()
        if slots:
            self._named.add(name)
        else:
            self._named.discard(name)
        changed: set[ObjectName] = set()
        namespace, secret = name
        for order in tuple(self._owning.get((namespace, secret), ())):
            changed |= self._resolve((namespace, order))
        return changed

    # -- the orders awaiting an owner their Secret does not name

    def _resolve(self, name: ObjectName) -> set[ObjectName]:
        """Move the order into or out of its group's unresolved set; the (namespace, group)
        sets that changed."""
        namespace, order = name
        entry = self._orders.get(name)
        unresolved = (
            entry is not None
            and entry.awaits_owner
            and (namespace, entry.owner_secret) not in self._named
        )
        now = entry.group if unresolved and entry is not None else None
        was = self._unresolved_on.get(name)
        if was == now:
            return set()
        changed: set[ObjectName] = set()
        if was is not None:
            _discard(self._unresolved, (namespace, was), order)
            del self._unresolved_on[name]
            changed.add((namespace, was))
        if now is not None:
            self._unresolved.setdefault((namespace, now), set()).add(order)
            self._unresolved_on[name] = now
            changed.add((namespace, now))
        return changed

    def _publish(self, changed: set[ObjectName]) -> None:
        if self._writer is None or not changed:
            return
        by_namespace: dict[str, dict[Slot, set[str]]] = {}
        for namespace, group in changed:
            names = self._unresolved.get((namespace, group), set())
            by_namespace.setdefault(namespace, {})[unresolved_slot(group)] = set(names)
        for namespace, slots in by_namespace.items():
            self._writer.write_unresolved(namespace, slots)

    def attach(self, writer: UnresolvedWriter) -> None:
        """Write the unresolved orders through ``writer`` from now on."""
        with self._lock:
            self._writer = writer

    def with_unresolved(self, write: Callable[[dict[str, dict[Slot, set[str]]]], None]) -> None:
        """Call ``write`` with every unresolved field by namespace, no change meanwhile."""
        with self._lock:
            fields: dict[str, dict[Slot, set[str]]] = {}
            for (namespace, group), names in self._unresolved.items():
                fields.setdefault(namespace, {})[unresolved_slot(group)] = set(names)
            write(fields)

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


class _SecretTracker:
    """Keeps which Secrets name a username in the index, from the Secret watch."""

    def __init__(self, index: MysqlIndex) -> None:
        self.index = index

    def put(self, obj: Mapping[str, Any]) -> None:
        self.index.put_secret(obj)

    def drop(self, name: ObjectName) -> None:
        self.index.drop_secret(name)

    def replace(self, objs: list[Object]) -> None:
        self.index.replace_secrets(objs)


class _OwnerNamePublisher(IndexPublisher):
    """Keeps the owner-name index: which Secrets name which username, from the Secret watch,
    and which orders await an owner their Secret does not name, from the index's join of the
    order and Secret watches."""

    def __init__(self, to: PublishTo, mysql: MysqlIndex) -> None:
        index = WatchIndex(to.redis, to.prefix, OWNER_NAME_INDEX)
        super().__init__(index, to, compute_owner_name_slots)
        self.mysql = mysql
        mysql.attach(self)

    def write_unresolved(self, namespace: str, slots: Mapping[Slot, Iterable[str]]) -> None:
        self.index.write_many(self.cluster, namespace, slots)

    def replace(
        self, objs: list[Object], also: Mapping[str, Mapping[Slot, Iterable[str]]] | None = None
    ) -> None:
        self.mysql.with_unresolved(
            lambda fields: super(_OwnerNamePublisher, self).replace(
                objs, {**fields, **(also or {})}
            )
        )


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


def _claim_publisher(to: PublishTo, index: SharedIndex) -> IndexPublisher:
    """Keeps the claim index of the order watch (``compute_claim_slots``)."""
    return IndexPublisher(WatchIndex(to.redis, to.prefix, CLAIM_INDEX), to, compute_claim_slots)


def _owner_name_publisher(to: PublishTo, index: SharedIndex) -> IndexPublisher:
    """Keeps the owner-name index of the Secret watch (``_OwnerNamePublisher``)."""
    return _OwnerNamePublisher(to, mysql_index(index))


def _secret_tracker(index: SharedIndex, cluster: str, namespace: str | None) -> _SecretTracker:
    """Keeps which Secrets name a username in the index from the Secret watch."""
    return _SecretTracker(mysql_index(index))


def _after_orders(index: SharedIndex) -> threading.Event:
    """Set once the order watch has listed: which order names which group is known."""
    return mysql_index(index).synced


def _after_groups(index: SharedIndex) -> threading.Event:
    """Set once the group watch has listed: which Secrets each group names is known."""
    return mysql_index(index).groups_synced


ROUTES: tuple[Route, ...] = (
    replace(
        order_route(IDENTITY, tracker=_mysql_tracker, publisher=_claim_publisher),
        management_only=True,
    ),
    Route(
        resource=MYSQL_FAILOVER_GROUP,
        management_only=True,
        fingerprint=compute_group_fingerprint,
        passes_update=should_enqueue_digest_update,
        map_keys=_map_group,
        tracker=_group_tracker,
        waits_for=_after_orders,
    ),
    Route(
        resource=SECRET,
        management_only=True,
        fingerprint=compute_secret_fingerprint,
        passes_update=should_enqueue_digest_update,
        map_keys=_map_secret,
        name="MysqlOwnerSecret",
        tracker=_secret_tracker,
        waits_for=_after_groups,
        publisher=_owner_name_publisher,
    ),
)

register_routes(ROUTES)
