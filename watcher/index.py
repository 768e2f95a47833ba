"""The little the watcher remembers: a ControlPlane fan-out index, placements and fingerprints.

Owns the index of management-cluster orders by ``compute_control_plane_index_key`` (each order
reduced to its name and its controlPlaneRef) that a ControlPlane event fans out through, the
ControlPlanes reduced to Keystone's placement and their namespace assignments (which a Database
CR event is judged by, and which a target cluster's namespaced watches follow), and, per
watch, each object's fingerprint and the keys it mapped to last, which the update predicates and
a relist that finds an object gone need. Everything is rebuilt from a relist, so a new leadership
term starts empty. It must never hold an object's body (Secrets!), list anything or enqueue.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from tenantdb.core.keys import OrderKey
from tenantdb.core.mariadbdatabase.mappers import compute_control_plane_index_key
from tenantdb.core.mariadbdatabase.models import ControlPlane
from tenantdb.core.watching import (
    Fingerprint,
    compute_keystone_placement,
    compute_order_index_entry,
)

T = TypeVar("T")

ObjectName = tuple[str, str]
"""An object's (namespace, name) within one watch."""


def object_name(obj: Mapping[str, Any]) -> ObjectName:
    """The (namespace, name) of a raw object."""
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    return str(meta.get("namespace", "")), str(meta.get("name", ""))


class SharedIndex:
    """State shared by the watches of one leadership term, guarded by one lock."""

    def __init__(self) -> None:
        """Start empty; the order and ControlPlane watches fill it from their first list."""
        self._lock = threading.Lock()
        self._orders: dict[ObjectName, dict[str, Any]] = {}
        self._by_control_plane: dict[str, set[ObjectName]] = {}
        self._placements: dict[ObjectName, ControlPlane] = {}
        self.orders_synced = threading.Event()
        self.control_planes_synced = threading.Event()
        self.placements_changed = threading.Event()
        """Set when what is known of the ControlPlanes changed (the watches of a target cluster
        follow its assigned and placed namespaces); whoever acts on it clears it first."""
        self._extensions: dict[str, object] = {}

    def extension(self, name: str, build: Callable[[], T]) -> T:
        """The index a kind's routes keep of their own in this term, built on first use."""
        with self._lock:
            found = self._extensions.get(name)
            if found is None:
                found = self._extensions[name] = build()
        return found  # type: ignore[return-value]

    # -- management-cluster orders ---------------------------------------------------------------

    def put_order(self, order: Mapping[str, Any]) -> None:
        """Remember an order's controlPlaneRef (replacing what was known of it)."""
        name = object_name(order)
        entry = compute_order_index_entry(order)
        with self._lock:
            self._drop_order(name)
            self._orders[name] = entry
            self._by_control_plane.setdefault(compute_control_plane_index_key(entry), set()).add(
                name
            )

    def drop_order(self, name: ObjectName) -> None:
        """Forget a deleted order."""
        with self._lock:
            self._drop_order(name)

    def replace_orders(self, orders: Iterable[Mapping[str, Any]]) -> None:
        """Replace every order with a relist's."""
        with self._lock:
            self._orders.clear()
            self._by_control_plane.clear()
        for order in orders:
            self.put_order(order)
        self.orders_synced.set()

    def _drop_order(self, name: ObjectName) -> None:
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
        """The reduced orders whose controlPlaneRef resolves to ``<namespace>/<name>``."""
        with self._lock:
            return [self._orders[n] for n in sorted(self._by_control_plane.get(index_key, ()))]

    def orders(self) -> list[dict[str, Any]]:
        """Every management-cluster order, reduced to what the mappers read."""
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
            self.placements_changed.set()

    def drop_control_plane(self, name: ObjectName) -> None:
        """Forget a deleted ControlPlane."""
        with self._lock:
            before = self._placements.pop(name, None)
        if before is not None:
            self.placements_changed.set()

    def replace_control_planes(self, cps: Iterable[Mapping[str, Any]]) -> None:
        """Replace every ControlPlane with a relist's."""
        with self._lock:
            self._placements.clear()
        for cp in cps:
            self.put_control_plane(cp)
        self.control_planes_synced.set()
        self.placements_changed.set()

    def control_planes(self) -> list[ControlPlane]:
        """The known ControlPlanes, reduced to Keystone's placement and namespace assignments."""
        with self._lock:
            return list(self._placements.values())


@dataclass(frozen=True, slots=True)
class Seen:
    """What one watch keeps of an object: its fingerprint and the keys it mapped to last."""

    fingerprint: Fingerprint
    keys: tuple[OrderKey, ...]
