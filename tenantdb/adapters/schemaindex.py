"""Which Database CRs carry which schema on which MariaDB, as the watches last saw them, and
the claims of orders about to create one; kept in Redis, for the collision guard.

The guard of a MariaDBDatabase pass must know whether any Database CR in Keystone's namespace
carries the order's schema on the order's MariaDB. Listing the namespace on every pass costs a
pass as much as there are orders. Instead the watcher, which watches every Database CR where a
ControlPlane places Keystone, keeps one hash per (cluster, namespace) here: a field per
(MariaDB, schema) whose value lists the names of the CRs that carry it. A pass reads one field
and re-reads the CRs it names from the API server before it refuses on them.

The index is trusted only while the watch that keeps it is known to be whole: each watch loop
marks its (cluster, namespace) synced with the watcher's leader token once it has listed, and
unmarks it when its stream ends, so a pass trusts a field only while the mark names the current
leader. After a gap (a new leader, a 410, a loop that stopped) the mark is gone or names a token
that no longer leads, and the pass lists the namespace as before until the relist is written.

A field lags its CRs by the watch's latency, so two orders asking for one schema at the same
moment would both find it free. A claim closes that race: before an order creates its Database
CR it takes ``SET NX`` of the (cluster, namespace, MariaDB, schema) for a while; an order that
finds the claim another's is refused as if the CR existed. The claim runs out on its own, by
which time the claimant's CR (if it made one) is in the index.

Nothing here holds an object's body: names, schema names and order keys only.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping

import redis

Slot = tuple[str, str]
"""A (MariaDB name, schema name) a Database CR carries."""

CLAIM_SECONDS = 600
"""How long a claim keeps a schema for the order that took it: longer than any wait between a
pass's decision and its Database CR reaching the index, short enough that a claim left by an
order that never created its CR frees the name on a later refresh of the other."""


# A claim's value is "<holder>\n<its Database CR>"; the holder is an order key and uid.
_CLAIM = """
local found = redis.call('GET', KEYS[1])
if found and string.sub(found, 1, #ARGV[2]) ~= ARGV[2] then return found end
redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[3])
return false
"""

_RELEASE = """
local found = redis.call('GET', KEYS[1])
if found and string.sub(found, 1, #ARGV[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) end
return 0
"""


def _field(slot: Slot) -> str:
    return json.dumps(list(slot), separators=(",", ":"))


class SchemaIndex:
    """The index and the claims under one key prefix."""

    def __init__(self, client: redis.Redis, prefix: str, *, leader_key: str = "") -> None:
        """Bind to Redis, the installation's key prefix and the watcher's leader key."""
        self.redis = client
        self.prefix = f"{prefix}schemas:"
        self.leader_key = leader_key or f"{prefix}leader:watcher"
        self._claim_script = client.register_script(_CLAIM)
        self._release_script = client.register_script(_RELEASE)

    def _hash(self, cluster: str, namespace: str) -> str:
        return f"{self.prefix}{cluster}/{namespace}"

    def _synced(self, cluster: str, scope: str) -> str:
        return f"{self.prefix}synced:{cluster}/{scope}"

    def _claim(self, cluster: str, namespace: str, slot: Slot) -> str:
        return f"{self.prefix}claim:{cluster}/{namespace}/{_field(slot)}"

    # -- the watcher's side ----------------------------------------------------------------------

    def write(self, cluster: str, namespace: str, slot: Slot, names: Iterable[str]) -> None:
        """Set the CRs carrying ``slot`` in a namespace; none removes the field."""
        listed = sorted(names)
        if listed:
            self.redis.hset(self._hash(cluster, namespace), _field(slot), json.dumps(listed))
        else:
            self.redis.hdel(self._hash(cluster, namespace), _field(slot))

    def replace(
        self,
        cluster: str,
        namespaces: Iterable[str],
        fields: Mapping[str, Mapping[Slot, Iterable[str]]],
    ) -> None:
        """Replace what is known of ``namespaces`` (and of every namespace in ``fields``)."""
        pipe = self.redis.pipeline(transaction=True)
        for namespace in set(namespaces) | set(fields):
            pipe.delete(self._hash(cluster, namespace))
        for namespace, slots in fields.items():
            for slot, names in slots.items():
                pipe.hset(self._hash(cluster, namespace), _field(slot), json.dumps(sorted(names)))
        pipe.execute()

    def mark_synced(self, cluster: str, scope: str, term: str) -> None:
        """The watch of ``scope`` (a namespace, "" for the whole cluster) is whole in ``term``."""
        self.redis.set(self._synced(cluster, scope), term)

    def mark_unsynced(self, cluster: str, scope: str) -> None:
        """The watch of ``scope`` may miss events from now until it lists again."""
        self.redis.delete(self._synced(cluster, scope))

    # -- a pass's side ---------------------------------------------------------------------------

    def holders(self, cluster: str, namespace: str, slot: Slot) -> list[str] | None:
        """The names of the CRs carrying ``slot`` in a namespace; None when not to be trusted."""
        pipe = self.redis.pipeline(transaction=False)
        pipe.mget(self._synced(cluster, namespace), self._synced(cluster, ""), self.leader_key)
        pipe.hget(self._hash(cluster, namespace), _field(slot))
        (in_namespace, cluster_wide, leader), found = pipe.execute()
        if leader is None or leader not in (in_namespace, cluster_wide):
            return None
        return [] if found is None else [str(n) for n in json.loads(found)]

    def claim(
        self, cluster: str, namespace: str, slot: Slot, holder: str, database_cr: str
    ) -> str | None:
        """Claim ``slot`` for ``holder`` (or renew its own claim); the name of the other
        claimant's Database CR when another order holds it."""
        found = self._claim_script(
            keys=[self._claim(cluster, namespace, slot)],
            args=[f"{holder}\n{database_cr}", f"{holder}\n", CLAIM_SECONDS],
        )
        if found is None:
            return None
        text = found.decode() if isinstance(found, bytes) else str(found)
        return text.partition("\n")[2]

    def release(self, cluster: str, namespace: str, slot: Slot, holder: str) -> None:
        """Drop ``holder``'s claim of ``slot``; another's is left alone."""
        self._release_script(keys=[self._claim(cluster, namespace, slot)], args=[f"{holder}\n"])
