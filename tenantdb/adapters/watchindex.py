"""Indexes the watcher keeps in Redis from its watches, for passes to read instead of a list.

A pass that must know which objects of a namespace carry some value (a schema on a MariaDB, a
username on a failover group) would otherwise list the namespace, and so cost as much as there
are objects. Instead the watch of those objects keeps one hash per (cluster, namespace) under a
family of its own: a field per value (a ``Slot``, a tuple of names) whose value lists the names
of the objects that carry it. A pass reads the fields it needs and re-reads the objects they
name from the API server before it decides on them, so a stale entry costs a GET, never a wrong
decision.

An index is trusted only while the watch that keeps it is known to be whole: each watch loop
marks its (cluster, namespace), or the whole cluster, synced with the watcher's leader token
once it has listed, and unmarks it when its stream ends. A pass trusts a field only while a
mark names the current leader. After a gap (a new leader, a 410, a loop that stopped, Redis
unreadable) the mark is gone or names a token that no longer leads, and the pass lists as
before until the relist is written.

Nothing here holds an object's body: object names and the names they carry only.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import redis

Slot = tuple[str, ...]
"""One value objects carry, as the names that spell it (e.g. a MariaDB and a schema)."""


def slot_field(slot: Slot) -> str:
    """A slot as its hash field."""
    return json.dumps(list(slot), separators=(",", ":"))


class WatchIndex:
    """One family of index hashes and their synced marks under a key prefix."""

    def __init__(
        self, client: redis.Redis, prefix: str, family: str, *, leader_key: str = ""
    ) -> None:
        """Bind to Redis, the installation's key prefix, the family and the watcher's leader key."""
        self.redis = client
        self.prefix = f"{prefix}{family}:"
        self.leader_key = leader_key or f"{prefix}leader:watcher"

    def _hash(self, cluster: str, namespace: str) -> str:
        return f"{self.prefix}{cluster}/{namespace}"

    def _synced(self, cluster: str, scope: str) -> str:
        return f"{self.prefix}synced:{cluster}/{scope}"

    # -- the watcher's side ----------------------------------------------------------------------

    def write_many(self, cluster: str, namespace: str, slots: Mapping[Slot, Iterable[str]]) -> None:
        """Set the objects carrying each slot in one round trip; none removes its field."""
        pipe = self.redis.pipeline(transaction=False)
        for slot, names in slots.items():
            listed = sorted(names)
            if listed:
                pipe.hset(self._hash(cluster, namespace), slot_field(slot), json.dumps(listed))
            else:
                pipe.hdel(self._hash(cluster, namespace), slot_field(slot))
        pipe.execute()

    def replace(
        self,
        cluster: str,
        namespaces: Iterable[str],
        fields: Mapping[str, Mapping[Slot, Iterable[str]]],
    ) -> None:
        """Replace what is known of ``namespaces`` (and of every namespace in ``fields``)."""
        self.replace_fields(
            cluster,
            namespaces,
            {
                namespace: {
                    slot_field(slot): json.dumps(sorted(names)) for slot, names in slots.items()
                }
                for namespace, slots in fields.items()
            },
        )

    def replace_fields(
        self, cluster: str, namespaces: Iterable[str], fields: Mapping[str, Mapping[str, str]]
    ) -> None:
        """Replace the hashes of ``namespaces`` (and of every namespace in ``fields``) with the
        raw field values given, in one transaction."""
        pipe = self.redis.pipeline(transaction=True)
        for namespace in set(namespaces) | set(fields):
            pipe.delete(self._hash(cluster, namespace))
        for namespace, values in fields.items():
            for field, value in values.items():
                pipe.hset(self._hash(cluster, namespace), field, value)
        pipe.execute()

    def mark_synced(self, cluster: str, scope: str, term: str) -> None:
        """The watch of ``scope`` (a namespace, "" for the whole cluster) is whole in ``term``."""
        self.redis.set(self._synced(cluster, scope), term)

    def mark_unsynced(self, cluster: str, scope: str) -> None:
        """The watch of ``scope`` may miss events from now until it lists again."""
        self.redis.delete(self._synced(cluster, scope))

    # -- a pass's side ---------------------------------------------------------------------------

    def holders(self, cluster: str, namespace: str, slot: Slot) -> list[str] | None:
        """The names of the objects carrying ``slot`` in a namespace; None when not trusted."""
        found = self.lookup(cluster, namespace, (slot,))
        return None if found is None else found[slot]

    def lookup(
        self, cluster: str, namespace: str, slots: Sequence[Slot]
    ) -> dict[Slot, list[str]] | None:
        """The names carrying each slot, in one round trip; None when the index is not trusted."""
        values = self.trusted_fields(cluster, namespace, [slot_field(s) for s in slots])
        if values is None:
            return None
        return {
            slot: [] if value is None else [str(n) for n in json.loads(value)]
            for slot, value in zip(slots, values, strict=True)
        }

    def trusted_fields(
        self, cluster: str, namespace: str, fields: Sequence[str]
    ) -> list[bytes | str | None] | None:
        """The raw values of fields of a namespace's hash, in one round trip, with whether a
        whole watch of the current leader stands behind them; None when none does."""
        return read_trusted(self.redis, [FieldAsk(self, cluster, namespace, tuple(fields))])[0]


@dataclass(frozen=True, slots=True)
class FieldAsk:
    """Fields of one index's hash for a (cluster, namespace), as ``read_trusted`` reads them."""

    index: WatchIndex
    cluster: str
    namespace: str
    fields: tuple[str, ...]


def read_trusted(
    client: redis.Redis, asks: Sequence[FieldAsk]
) -> list[list[bytes | str | None] | None]:
    """``WatchIndex.trusted_fields`` of each ask, in order, all in one round trip.

    A pass that reads several indexes (the versions of each object it shares with other
    orders, say) pays one round trip for all of them rather than one each.
    """
    if not asks:
        return []
    leaders = sorted({ask.index.leader_key for ask in asks})
    marks = [
        key
        for ask in asks
        for key in (
            ask.index._synced(ask.cluster, ask.namespace),
            ask.index._synced(ask.cluster, ""),
        )
    ]
    pipe = client.pipeline(transaction=False)
    pipe.mget(*marks, *leaders)
    for ask in asks:
        if ask.fields:
            pipe.hmget(ask.index._hash(ask.cluster, ask.namespace), list(ask.fields))
    answers = iter(pipe.execute())
    found = next(answers)
    term = dict(zip(leaders, found[len(marks) :], strict=True))
    out: list[list[bytes | str | None] | None] = []
    for i, ask in enumerate(asks):
        values = list(next(answers)) if ask.fields else []
        leader = term[ask.index.leader_key]
        whole = leader is not None and leader in (found[2 * i], found[2 * i + 1])
        out.append(values if whole else None)
    return out
