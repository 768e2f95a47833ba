"""The resourceVersions the watcher last saw of the objects many orders share, and the copies of
those objects a worker process keeps while they are current.

Every MariaDBDatabase pass reads the objects all the orders of a ControlPlane share: the
ControlPlane, the MariaDB Keystone's database lives on, the secret store, the shared
ServiceAccount, the OpenBao client Certificate and its Secret. Read live, they are half of a
converged pass's requests and of a new order's. They change seldom, and the watcher already
watches each of them to wake the orders that read it.

So the watch of each such kind keeps, per (cluster, namespace), a hash of object name to the
resourceVersion it last saw (a ``WatchIndex`` family of its own, trusted only while that watch
is whole in the current leader's term). A worker process keeps the copy it last read of each
object with the resourceVersion it came with, and serves it again while the index names that
same version; otherwise (another version, no version known, the index not trusted, Redis
unreadable) it reads the object from the API server and keeps that copy.

A copy served is at most as old as the watch's delivery of the change: the change's own event
brings the next pass of every order that reads the object, and that pass finds the new version.
Only resourceVersions enter Redis, never a body; a Secret's body stays in the memory of the
worker process that read it.
"""

from __future__ import annotations

import copy
import logging
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import redis
from redis.exceptions import RedisError

from tenantdb.adapters.kube import KindNotServedError, KubeClient, NotFoundError, Resource
from tenantdb.adapters.watchindex import FieldAsk, WatchIndex, read_trusted

log = logging.getLogger(__name__)

KEPT_OBJECTS = 4096
"""How many shared objects one worker process keeps copies of (a handful per ControlPlane)."""


class VersionIndex(WatchIndex):
    """The resourceVersions one watch last saw, by (cluster, namespace) and object name."""

    def __init__(
        self, client: redis.Redis, prefix: str, watch: str, *, leader_key: str = ""
    ) -> None:
        """Bind to Redis, the installation's key prefix, the watch (as the watcher names it)
        and the watcher's leader key."""
        super().__init__(client, prefix, f"versions:{watch}", leader_key=leader_key)

    # -- the watcher's side ----------------------------------------------------------------------

    def put(self, cluster: str, namespace: str, name: str, version: str) -> None:
        """The watch saw ``version`` of an object."""
        self.redis.hset(self._hash(cluster, namespace), name, version)

    def drop(self, cluster: str, namespace: str, name: str) -> None:
        """The watch saw an object deleted."""
        self.redis.hdel(self._hash(cluster, namespace), name)


def _text(value: bytes | str | None) -> str | None:
    if value is None:
        return None
    return value.decode() if isinstance(value, bytes) else str(value)


class SharedRef(NamedTuple):
    """One shared object as a pass names it: its cluster, the watch that keeps its versions
    (as the watcher names it), its namespace ("" for a cluster-scoped object) and its name."""

    cluster: str
    watch: str
    namespace: str
    name: str


Versions = Mapping[SharedRef, str | None]
"""The versions a pass looked up at once (``SharedObjects.versions``); None where unknown."""


class SharedObjects:
    """The copies of shared objects one worker process read, served while current.

    Not thread-safe on purpose: a worker process runs one pass at a time.
    """

    def __init__(self, client: redis.Redis, prefix: str, *, kept: int = KEPT_OBJECTS) -> None:
        """Bind to the Redis the watcher keeps its version indexes in, under the key prefix."""
        self._redis, self._prefix, self._kept = client, prefix, kept
        self._indexes: dict[str, VersionIndex] = {}
        self._copies: OrderedDict[SharedRef, tuple[str, dict[str, Any]]] = OrderedDict()

    def _index(self, watch: str) -> VersionIndex:
        found = self._indexes.get(watch)
        if found is None:
            found = self._indexes[watch] = VersionIndex(self._redis, self._prefix, watch)
        return found

    def _current(self, ref: SharedRef) -> str | None:
        return self.versions([ref])[ref]

    def versions(self, refs: Sequence[SharedRef]) -> dict[SharedRef, str | None]:
        """The version the whole watch last saw of each object, all in one round trip; None
        for an object the watch saw none of, or when its index is not trusted or Redis is
        unreadable."""
        asks = [
            FieldAsk(self._index(ref.watch), ref.cluster, ref.namespace, (ref.name,))
            for ref in refs
        ]
        try:
            found = read_trusted(self._redis, asks)
        except RedisError as exc:
            watches = ", ".join(sorted({ref.watch for ref in refs}))
            log.warning(
                "version index unreadable (%s); reading %s live", type(exc).__name__, watches
            )
            return dict.fromkeys(refs)
        return {
            ref: _text(values[0]) if values else None
            for ref, values in zip(refs, found, strict=True)
        }

    def get(
        self,
        client: KubeClient,
        cluster: str,
        resource: Resource,
        watch: str,
        namespace: str | None,
        name: str,
        *,
        versions: Versions | None = None,
    ) -> dict[str, Any] | None:
        """The object, from this process's copy when the watch ``watch`` last saw the version
        it holds, else from the API server; None when the server has no such object.

        ``versions`` are versions the pass looked up for several objects at once; an object
        not among them has its version looked up alone. The caller gets a copy of its own to
        read or change.

        Raises:
            KubeError: the API server could not be read.
        """
        key = SharedRef(cluster, watch, namespace or "", name)
        current = versions[key] if versions is not None and key in versions else self._current(key)
        held = self._copies.get(key)
        if current is not None and held is not None and held[0] == current:
            self._copies.move_to_end(key)
            return copy.deepcopy(held[1])
        try:
            raw = client.get(resource, namespace, name)
        except (NotFoundError, KindNotServedError):
            self._copies.pop(key, None)
            return None
        version = str((raw.get("metadata") or {}).get("resourceVersion") or "")
        if version:
            self._copies[key] = (version, copy.deepcopy(raw))
            self._copies.move_to_end(key)
            while len(self._copies) > self._kept:
                self._copies.popitem(last=False)
        return raw
