"""Which Database CRs carry which schema on which MariaDB, as the watches last saw them, and
the claims of orders about to create one; kept in Redis, for the collision guard.

The guard of a MariaDBDatabase pass must know whether any Database CR in Keystone's namespace
carries the order's schema on the order's MariaDB. Listing the namespace on every pass costs a
pass as much as there are orders. Instead the watcher, which watches every Database CR where a
ControlPlane places Keystone, keeps one hash per (cluster, namespace) here: a field per
(MariaDB, schema) whose value lists the names of the CRs that carry it. A pass reads one field
and re-reads the CRs it names from the API server before it refuses on them.

The index is a ``WatchIndex`` of its own family: trusted only while the watch that keeps it is
known to be whole, so after a gap the pass lists the namespace as before.

A field lags its CRs by the watch's latency, so two orders asking for one schema at the same
moment would both find it free. A claim closes that race: before an order creates its Database
CR it takes ``SET NX`` of the (cluster, namespace, MariaDB, schema) for a while; an order that
finds the claim another's is refused as if the CR existed. The claim runs out on its own, by
which time the claimant's CR (if it made one) is in the index.

Nothing here holds an object's body: names, schema names and order keys only.
"""

from __future__ import annotations

import redis

from tenantdb.adapters.watchindex import WatchIndex, slot_field
from tenantdb.adapters.workqueue.scripts import ADAPTERS_LUA, source

Slot = tuple[str, str]
"""A (MariaDB name, schema name) a Database CR carries."""

CLAIM_SECONDS = 600
"""How long a claim keeps a schema for the order that took it: longer than any wait between a
pass's decision and its Database CR reaching the index, short enough that a claim left by an
order that never created its CR frees the name on a later refresh of the other."""


# A claim's value is "<holder>\n<its Database CR>"; the holder is an order key and uid.


class SchemaIndex(WatchIndex):
    """The schema index and the claims under one key prefix."""

    def __init__(self, client: redis.Redis, prefix: str, *, leader_key: str = "") -> None:
        """Bind to Redis, the installation's key prefix and the watcher's leader key."""
        super().__init__(client, prefix, "schemas", leader_key=leader_key)
        self._claim_script = client.register_script(source("schema_claim", ADAPTERS_LUA))
        self._release_script = client.register_script(source("schema_release", ADAPTERS_LUA))

    def _claim(self, cluster: str, namespace: str, slot: Slot) -> str:
        return f"{self.prefix}claim:{cluster}/{namespace}/{slot_field(slot)}"

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
