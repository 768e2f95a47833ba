"""In-memory object store of one simulated cluster: objects, resourceVersions and watch history.

Owns the single monotonically increasing resourceVersion counter, the objects by kind, namespace
and name (in etcd's key order), the uid index, the bounded history of events that watches replay
from and that lists at an earlier resourceVersion are rebuilt from, and, per kind, the version
its watch cache has reached (its last change, or the latest version once a consistent read made
the cache catch up, as etcd's progress notifications do for the real watch cache).

The history is one window shared by every kind, but a watch of a kind is too old only when an
event of that kind after its resourceVersion has left the window, as the real API server keeps a
watch cache per resource: a kind nobody writes can resume from its last change however busy the
other kinds are. Lists at an exact earlier resourceVersion use the shared window, as etcd's
compaction is one for the whole store. It must never
apply API semantics (validation, defaults, ownership); `devstack.kube.api` does that and hands
the store finished objects. Stored objects are never mutated after `put`.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

Obj = dict[str, Any]


@dataclass(frozen=True)
class Event:
    """One change: ADDED, MODIFIED or DELETED, with the object before it when there was one."""

    rv: int
    type: str
    key: str
    namespace: str
    obj: Obj
    old: Obj | None


class Store:
    """Objects and their history, guarded by one lock with a condition for watchers."""

    def __init__(self, history: int = 10_000) -> None:
        self.lock = threading.RLock()
        self.changed = threading.Condition(self.lock)
        self.rv = 1
        self._objects: dict[str, dict[tuple[str, str], Obj]] = {}
        self._uids: dict[str, tuple[str, str, str]] = {}
        self._events: deque[Event] = deque()
        self._history = history
        self.kill_epoch = 0
        self._kind_changed: dict[str, int] = {}
        self._kind_seen: dict[str, int] = {}
        self._kind_forgotten: dict[str, int] = {}

    # ------------------------------------------------------------ reads

    def get(self, key: str, namespace: str, name: str) -> Obj | None:
        """Return the stored object or None."""
        return self._objects.get(key, {}).get((namespace, name))

    def items(self, key: str, namespace: str | None = None) -> list[Obj]:
        """Return the objects of a kind in key order, optionally within one namespace."""
        return _in_key_order(self._objects.get(key, {}), namespace)

    def items_at(self, key: str, namespace: str | None, rv: int) -> list[Obj] | None:
        """The objects of a kind as they were at resourceVersion `rv`, in key order; None when
        the history no longer reaches back that far."""
        with self.lock:
            if rv >= self.rv:
                return self.items(key, namespace)
            if not self._events or self._events[0].rv > rv + 1:
                return None
            bucket = dict(self._objects.get(key, {}))
            for event in reversed(self._events):
                if event.rv <= rv:
                    break
                if event.key != key:
                    continue
                where = (event.namespace, str(event.obj["metadata"]["name"]))
                if event.old is None:
                    bucket.pop(where, None)
                else:
                    bucket[where] = event.old
            return _in_key_order(bucket, namespace)

    def kind_changed(self, key: str) -> int:
        """The resourceVersion of the last change to an object of a kind (0 if none)."""
        return self._kind_changed.get(key, 0)

    def kind_rv(self, key: str) -> int:
        """The resourceVersion a kind's watch cache has reached: its last change, or later when
        a consistent read brought it up to date (`catch_up`)."""
        return max(self._kind_changed.get(key, 0), self._kind_seen.get(key, 0))

    def catch_up(self, key: str) -> None:
        """A consistent read of a kind: its watch cache is now at the latest resourceVersion."""
        with self.lock:
            self._kind_seen[key] = self.rv

    def kinds(self) -> list[str]:
        """Return every kind key that has held objects."""
        return list(self._objects)

    def by_uid(self, uid: str) -> tuple[str, str, str] | None:
        """Return (key, namespace, name) of a live object by uid."""
        return self._uids.get(uid)

    def all_objects(self) -> Iterator[tuple[str, Obj]]:
        """Iterate over (key, object) for every stored object."""
        for key, bucket in list(self._objects.items()):
            for obj in list(bucket.values()):
                yield key, obj

    # ------------------------------------------------------------ writes

    def _record(
        self, event_type: str, key: str, namespace: str, obj: Obj, old: Obj | None
    ) -> Event:
        event = Event(self.rv, event_type, key, namespace, obj, old)
        self._kind_changed[key] = self.rv
        self._events.append(event)
        self._trim()
        self.changed.notify_all()
        return event

    def put(self, key: str, obj: Obj) -> Obj:
        """Store a new version of an object, stamping the next resourceVersion."""
        with self.lock:
            self.rv += 1
            meta = obj["metadata"]
            meta["resourceVersion"] = str(self.rv)
            namespace = str(meta.get("namespace", ""))
            bucket = self._objects.setdefault(key, {})
            old = bucket.get((namespace, meta["name"]))
            bucket[(namespace, meta["name"])] = obj
            self._uids[str(meta["uid"])] = (key, namespace, str(meta["name"]))
            self._record("ADDED" if old is None else "MODIFIED", key, namespace, obj, old)
            return obj

    def remove(self, key: str, obj: Obj) -> Obj:
        """Delete an object; the DELETED event carries a fresh resourceVersion."""
        with self.lock:
            self.rv += 1
            meta = obj["metadata"]
            namespace = str(meta.get("namespace", ""))
            old = self._objects.get(key, {}).pop((namespace, meta["name"]), None)
            self._uids.pop(str(meta.get("uid")), None)
            final = {**obj, "metadata": {**meta, "resourceVersion": str(self.rv)}}
            self._record("DELETED", key, namespace, final, old)
            return final

    # ------------------------------------------------------------ history

    def set_history(self, size: int) -> None:
        """Keep only the last `size` events for watches (smaller means earlier 410s)."""
        with self.lock:
            self._history = max(size, 0)
            self._trim()

    def _trim(self) -> None:
        """Drop the events beyond the window, remembering per kind the newest one dropped."""
        while len(self._events) > self._history:
            gone = self._events.popleft()
            self._kind_forgotten[gone.key] = gone.rv

    def oldest_rv(self, key: str) -> int:
        """The oldest resourceVersion a watch of kind `key` resumes from."""
        with self.lock:
            return self._kind_forgotten.get(key, 0)

    def events_after(self, rv: int, key: str) -> list[Event] | None:
        """The kept events newer than `rv` (other kinds' among them) for a watch of kind `key`,
        or None when an event of that kind newer than `rv` is no longer kept."""
        with self.lock:
            if rv >= self.rv:
                return []
            if self._kind_forgotten.get(key, 0) > rv:
                return None
            first = self._events[0].rv if self._events else self.rv + 1
            start = max(0, rv + 1 - first)
            return [self._events[i] for i in range(start, len(self._events))]

    def kill_watches(self) -> None:
        """Make every open watch end."""
        with self.lock:
            self.kill_epoch += 1
            self.changed.notify_all()


def sort_key(namespace: str, name: str) -> str:
    """Where an object sorts among its kind: etcd orders keys `<namespace>/<name>` as bytes."""
    return f"{namespace}/{name}" if namespace else name


def _in_key_order(bucket: dict[tuple[str, str], Obj], namespace: str | None) -> list[Obj]:
    keys = sorted(
        (k for k in bucket if namespace is None or k[0] == namespace), key=lambda k: sort_key(*k)
    )
    return [bucket[k] for k in keys]
