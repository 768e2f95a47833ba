"""The publisher that keeps a ``WatchIndex`` in step with one watch.

Each watched object carries some slots (``slots_of``); the publisher remembers them, so an
update or a delete rewrites only the fields the object leaves and enters, in one round trip,
and a relist replaces the namespaces it covers. The loop marks the index synced once a stream
is open after its list, and unsynced when the stream ends (``watcher.routes.Publisher``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from tenantdb.adapters.kube import Object
from tenantdb.adapters.versionindex import VersionIndex
from tenantdb.adapters.watchindex import Slot, WatchIndex
from tenantdb.core.objects import metadata_of
from watcher.index import ObjectName, object_name
from watcher.routes import PublishTo

SlotsOf = Callable[[Mapping[str, Any]], Iterable[Slot]]


class IndexPublisher:
    """Writes the slots of one watch's objects into ``index``."""

    def __init__(self, index: WatchIndex, to: PublishTo, slots_of: SlotsOf) -> None:
        self.index = index
        self.cluster, self.scope, self.term = to.cluster, to.namespace or "", to.term
        self._slots_of = slots_of
        self._slots: dict[ObjectName, frozenset[Slot]] = {}
        self._holders: dict[tuple[str, Slot], set[str]] = {}

    def _move(self, name: ObjectName, slots: frozenset[Slot]) -> None:
        namespace, object_ = name
        before = self._slots.pop(name, frozenset())
        if slots:
            self._slots[name] = slots
        changed: dict[Slot, set[str]] = {}
        for slot in before - slots:
            holders = self._holders.get((namespace, slot), set())
            holders.discard(object_)
            if not holders:
                self._holders.pop((namespace, slot), None)
            changed[slot] = holders
        for slot in slots - before:
            holders = self._holders.setdefault((namespace, slot), set())
            holders.add(object_)
            changed[slot] = holders
        if changed:
            self.index.write_many(self.cluster, namespace, changed)

    def put(self, obj: Mapping[str, Any]) -> None:
        self._move(object_name(obj), frozenset(self._slots_of(obj)))

    def drop(self, name: ObjectName) -> None:
        self._move(name, frozenset())

    def replace(
        self, objs: list[Object], also: Mapping[str, Mapping[Slot, Iterable[str]]] | None = None
    ) -> None:
        """Replace what the index holds of the watch's namespaces with ``objs``' slots, and
        the fields in ``also`` (kept by another writer of the same family) with them."""
        namespaces = {namespace for namespace, _ in self._slots}
        if self.scope:
            namespaces.add(self.scope)
        self._slots.clear()
        self._holders.clear()
        fields: dict[str, dict[Slot, set[str]]] = {
            namespace: {slot: set(names) for slot, names in slots.items()}
            for namespace, slots in (also or {}).items()
        }
        for obj in objs:
            name = object_name(obj)
            slots = frozenset(self._slots_of(obj))
            if not slots:
                continue
            self._slots[name] = slots
            for slot in slots:
                self._holders.setdefault((name[0], slot), set()).add(name[1])
                fields.setdefault(name[0], {}).setdefault(slot, set()).add(name[1])
        self.index.replace(self.cluster, namespaces, fields)

    def following(self) -> None:
        self.index.mark_synced(self.cluster, self.scope, self.term)

    def interrupted(self) -> None:
        self.index.mark_unsynced(self.cluster, self.scope)


def _version(obj: Mapping[str, Any]) -> str:
    return str(metadata_of(obj).get("resourceVersion") or "")


class VersionPublisher:
    """Writes the resourceVersion of each object of one watch into ``index``, so a worker
    process may serve its copy of a shared object while it is current."""

    def __init__(self, index: VersionIndex, to: PublishTo) -> None:
        self.index = index
        self.cluster, self.scope, self.term = to.cluster, to.namespace or "", to.term
        self._namespaces: set[str] = set()

    def put(self, obj: Mapping[str, Any]) -> None:
        namespace, name = object_name(obj)
        version = _version(obj)
        if not version:
            self.drop((namespace, name))
            return
        self._namespaces.add(namespace)
        self.index.put(self.cluster, namespace, name, version)

    def drop(self, name: ObjectName) -> None:
        self.index.drop(self.cluster, *name)

    def replace(self, objs: list[Object]) -> None:
        """Replace what the index holds of the watch's namespaces with the listed versions."""
        versions: dict[str, dict[str, str]] = {}
        for obj in objs:
            namespace, name = object_name(obj)
            version = _version(obj)
            if version:
                versions.setdefault(namespace, {})[name] = version
        namespaces = self._namespaces | ({self.scope} if self.scope else set())
        self._namespaces = set(versions)
        self.index.replace_fields(self.cluster, namespaces, versions)

    def following(self) -> None:
        self.index.mark_synced(self.cluster, self.scope, self.term)

    def interrupted(self) -> None:
        self.index.mark_unsynced(self.cluster, self.scope)


def version_publisher(watch: str) -> Callable[[PublishTo, Any], VersionPublisher]:
    """The publisher factory a route of a shared kind names, keeping the versions of ``watch``."""

    def build(to: PublishTo, index: Any) -> VersionPublisher:
        return VersionPublisher(VersionIndex(to.redis, to.prefix, watch), to)

    return build
