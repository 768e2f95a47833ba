"""The little the watcher remembers: each kind's own index, and per watch the fingerprints.

Owns the index shared by the watches of one leadership term (each kind keeps its own in it, as
an extension: MariaDBDatabase its ControlPlane fan-out, MysqlDatabase its claims), the signal
that a kind's watched namespaces may have changed, and, per watch, each object's fingerprint
and the keys it mapped to last, which the update predicates and a relist that finds an object
gone need. Everything is rebuilt from a relist, so a new leadership term starts empty. It must
never hold an object's body (Secrets!), list anything or enqueue.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from tenantdb.core.keys import OrderKey
from tenantdb.core.watching import Fingerprint

T = TypeVar("T")

ObjectName = tuple[str, str]
"""An object's (namespace, name) within one watch."""


def object_name(obj: Mapping[str, Any]) -> ObjectName:
    """The (namespace, name) of a raw object."""
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    return str(meta.get("namespace", "")), str(meta.get("name", ""))


class SharedIndex:
    """State shared by the watches of one leadership term: each kind's own index, built on
    first use, and the signal that the namespaces a kind's routes watch may have changed."""

    def __init__(self) -> None:
        """Start empty; the watches fill the kinds' indexes from their first list."""
        self._lock = threading.Lock()
        self._extensions: dict[str, object] = {}
        self.namespaces_changed = threading.Event()
        """Set when what a route's namespaces follow changed (on a target cluster, the watches
        follow the namespaces a kind's routes name); whoever acts on it clears it first."""

    def extension(self, name: str, build: Callable[[], T]) -> T:
        """The index a kind's routes keep of their own in this term, built on first use."""
        with self._lock:
            found = self._extensions.get(name)
            if found is None:
                found = self._extensions[name] = build()
        return found  # type: ignore[return-value]


@dataclass(frozen=True, slots=True)
class Seen:
    """What one watch last handed on of an object: its uid, its fingerprint and the keys it
    mapped to."""

    uid: str
    fingerprint: Fingerprint
    keys: tuple[OrderKey, ...]
