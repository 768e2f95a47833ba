"""The timetables: "come back at T" per key, popped exactly once; and periodic claims.

Two sorted sets hold come-backs (the earliest time wins): the due-set for short waits and the
refresh set for periodic refreshes. A sweep claims due keys into a claims set before it enqueues
them, so no key leaves a timetable for good before its enqueue.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tenantdb.adapters.redisclient import reply_text
from tenantdb.adapters.workqueue.base import QueueBase
from tenantdb.core.keys import OrderKey
from tenantdb.core.schedule import Timetable


@dataclass(frozen=True, slots=True)
class Claimed:
    """A key claimed from a timetable, and when it was due there (epoch seconds)."""

    key: OrderKey
    due_at: float


class Timetables(QueueBase):
    """Schedule, claim and return come-backs; claim periodic work."""

    def schedule(self, key: OrderKey, at: float, table: Timetable = Timetable.DUE) -> None:
        """Ask for a pass of ``key`` at epoch seconds ``at``; an earlier request wins."""
        self.redis.zadd(self.keys.timetable(table), {str(key): int(at * 1000)}, lt=True)

    def replace_timetable(self, key: OrderKey, timetable: dict[Timetable, float | None]) -> None:
        """Set the key's come-back in each table to exactly these times (None: none)."""
        pipe = self.redis.pipeline()
        for table, at in timetable.items():
            if at is None:
                pipe.zrem(self.keys.timetable(table), str(key))
            else:
                pipe.zadd(self.keys.timetable(table), {str(key): int(at * 1000)})
        pipe.execute()

    def due_at(self, key: OrderKey, table: Timetable = Timetable.DUE) -> float | None:
        """When the key is due, in epoch seconds, or None."""
        score = self.redis.zscore(self.keys.timetable(table), str(key))
        return None if score is None else float(score) / 1000

    def claim_due(
        self, now: float, batch: int = 500, table: Timetable = Timetable.DUE
    ) -> list[Claimed]:
        """Take up to ``batch`` keys due by ``now`` out of the timetable into its claims.

        A claimed key is released once enqueued (``release_claims``), put back when its enqueue
        failed (``return_claims``), and found by ``stale_claims`` when the claimer died,
        so no key leaves the timetable for good before its enqueue."""
        found = self._claim_due(
            keys=[self.keys.timetable(table), self.keys.claims(table)],
            args=[int(now * 1000), batch],
        )
        return [
            Claimed(OrderKey.parse(reply_text(member)), float(score) / 1000)
            for member, score in zip(found[::2], found[1::2], strict=True)
        ]

    def release_claims(self, keys: Sequence[OrderKey], table: Timetable = Timetable.DUE) -> None:
        """Forget the claims of enqueued keys."""
        if keys:
            self.redis.zrem(self.keys.claims(table), *(str(k) for k in keys))

    def return_claims(self, keys: Sequence[OrderKey], table: Timetable = Timetable.DUE) -> int:
        """Put the claims of keys that were not enqueued back into the timetable; how many."""
        if not keys:
            return 0
        args: list[str | int] = [0, *(str(k) for k in keys)]
        return int(
            self._return_claims(
                keys=[self.keys.timetable(table), self.keys.claims(table)], args=args
            )
        )

    def stale_claims(self, older_than: float, table: Timetable = Timetable.DUE) -> list[OrderKey]:
        """The keys claimed before ``older_than`` and never released: their claimer died."""
        members = self.redis.zrangebyscore(self.keys.claims(table), "-inf", int(older_than * 1000))
        return [OrderKey.parse(reply_text(m)) for m in members]

    def due_count(self, table: Timetable = Timetable.DUE) -> int:
        """How many keys the timetable holds."""
        return int(self.redis.zcard(self.keys.timetable(table)))

    def forget(self, key: OrderKey) -> None:
        """Drop the key from both timetables (its order is gone)."""
        pipe = self.redis.pipeline()
        for table in Timetable:
            pipe.zrem(self.keys.timetable(table), str(key))
        pipe.execute()

    def claim_period(self, name: str, key: OrderKey, period_ms: int) -> bool:
        """Whether the periodic work ``name`` of an order is due; claim it for a period if so.

        A claim lasts ``period_ms``; ``release_period`` gives it back early (the work failed).
        """
        return bool(self.redis.set(self.keys.period(name, key), "1", nx=True, px=period_ms))

    def release_period(self, name: str, key: OrderKey) -> None:
        """Give back a claim of ``claim_period``: the work is due again at once."""
        self.redis.delete(self.keys.period(name, key))

    def holds_period(self, name: str, key: OrderKey) -> bool:
        """Whether a claim of ``claim_period`` is held, leaving it as it is."""
        return bool(self.redis.exists(self.keys.period(name, key)))

    def take_period(self, name: str, key: OrderKey) -> bool:
        """Whether a claim of ``claim_period`` was held; give it back in the same call.

        For a one-off flag an order's next pass must act on (and clear).
        """
        return bool(self.redis.delete(self.keys.period(name, key)))
