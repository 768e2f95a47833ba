"""The Ready state of every order tenantdb serves, kept in Redis for the orders gauges.

Workers write, into one hash under the key prefix (``<prefix>ready``), each order's Ready
state (``tenantdb.core.readiness``) whenever a pass reads the order and after every status
write of a pass, so the hash holds the state each order's status is in, as tenantdb last saw
it; a pass that finds its order gone removes its field. A field is an order key and its value
``<status>/<reason>/<since>``: the hash is read by beat only, never becomes a metric label, and
holds no credential. Beat counts it (``ReadyBook.tally``) into ``tenantdb_orders`` and
``tenantdb_orders_not_ready_seconds``, labelled by kind, status and reason only.

An order deleted while no worker ran keeps its field until its next refresh pass finds it gone
(every order is in the refresh timetable while the resync is on).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import redis

from tenantdb.adapters.metrics import ORDER_READY_SECONDS
from tenantdb.adapters.redisclient import reply_text
from tenantdb.core.keys import InvalidOrderKeyError, OrderKey
from tenantdb.core.readiness import compute_ready_state, decode_state, encode_state

OrderCount = tuple[str, str, str]
"""(kind, status, reason) of the orders gauge."""
NotReadyAge = tuple[str, str]
"""(kind, reason) of the not-Ready age gauge."""


@dataclass(slots=True)
class Tally:
    """What beat exports: orders per (kind, status, reason), and per (kind, reason) of the
    orders not Ready the longest time one of them has been so, in seconds."""

    orders: dict[OrderCount, int] = field(default_factory=dict)
    not_ready_seconds: dict[NotReadyAge, float] = field(default_factory=dict)


class ReadyBook:
    """The hash of Ready states under one key prefix."""

    def __init__(self, client: redis.Redis, prefix: str) -> None:
        """Bind to a Redis client and the installation's key prefix."""
        self.redis = client
        self.name = f"{prefix}ready"
        self.seen = f"{prefix}ready-seen"

    def record(self, key: OrderKey, order: Mapping[str, Any], now: float | None = None) -> None:
        """Remember the Ready state of ``order`` (as read, or as a status write left it); the
        first time an order is seen turning Ready, observe how long it took since its creation.

        An order counts once: its key joins a set when it is first seen Ready, so one that
        falls back and recovers, or that was Ready before this was recorded, is not observed.
        """
        state = compute_ready_state(order)
        field = str(key)
        if not state.ready:
            self.redis.hset(self.name, field, encode_state(state))
            return
        pipe = self.redis.pipeline(transaction=False)
        pipe.hget(self.name, field)
        pipe.hset(self.name, field, encode_state(state))
        pipe.sadd(self.seen, field)
        before, _, first = pipe.execute()
        was_ready = before is not None and (decode_state(reply_text(before)) or state).ready
        created = _created(order)
        if first and before is not None and not was_ready and created is not None:
            elapsed = max(0.0, (time.time() if now is None else now) - created)
            ORDER_READY_SECONDS.labels(kind=key.kind).observe(elapsed)

    def forget(self, key: OrderKey) -> None:
        """The order is gone."""
        pipe = self.redis.pipeline(transaction=False)
        pipe.hdel(self.name, str(key))
        pipe.srem(self.seen, str(key))
        pipe.execute()

    def tally(self, now: float) -> Tally:
        """Count the recorded orders; fields that are not an order key and a state are skipped."""
        found = Tally()
        for raw_key, raw_value in self.redis.hscan_iter(self.name, count=1000):
            try:
                kind = OrderKey.parse(reply_text(raw_key)).kind
            except InvalidOrderKeyError:
                continue
            state = decode_state(reply_text(raw_value))
            if state is None:
                continue
            label = (kind, state.status, state.reason)
            found.orders[label] = found.orders.get(label, 0) + 1
            if not state.ready:
                age = 0.0 if state.since is None else max(0.0, now - state.since)
                slot = (kind, state.reason)
                found.not_ready_seconds[slot] = max(found.not_ready_seconds.get(slot, 0.0), age)
        return found


def _created(order: Mapping[str, Any]) -> float | None:
    meta = order.get("metadata")
    text = meta.get("creationTimestamp") if isinstance(meta, Mapping) else None
    try:
        return datetime.strptime(str(text), "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp()
    except ValueError:
        return None
