"""Enqueue and sweep: one message per burst of events, and nothing lost on the way.

``enqueue`` counts an event and publishes only for a newly set pending mark; the sweeps find
the keys whose holder died or whose message was lost and enqueue them again; ``rolled_back``
tells a Redis that lost acknowledged writes.
"""

from __future__ import annotations

from collections.abc import Sequence

from tenantdb.adapters.redisclient import reply_text
from tenantdb.adapters.workqueue.base import (
    PUBLISH_RETRY_SECONDS,
    SEQUENCE_TTL,
    WRITES_TTL,
    QueueBase,
)
from tenantdb.adapters.workqueue.keys import REFRESH_MARK_SECONDS
from tenantdb.core.keys import OrderKey
from tenantdb.core.tasknames import Queue


class Queueing(QueueBase):
    """Enqueue, pending marks, and the sweeps that recover lost passes."""

    def enqueue(self, key: OrderKey, *, force: bool = False, refresh: bool = False) -> bool:
        """Count an event for ``key`` and publish a reconcile unless one is pending or running.

        A refresh's message is published behind every other message (``REFRESH_PRIORITY``) and
        its pending mark says so: an event that finds only such a message waiting publishes one
        of its own ahead of it (the refresh's message, when its turn comes, ends as stale or
        runs the pass the events since ask for).

        Args:
            key: the order.
            force: publish even when a pass is pending (the mark is set all the same); a running
                pass asks for the next one itself.
            refresh: the event is the order's periodic refresh, which does not count as a touch
                (``tenantdb.core.quiet``); every other enqueue does.

        Returns:
            Whether a task was published.
        """
        # One enqueue at a time per process, so each is told the next count (``rolled_back``).
        with self._writes_lock:
            answer, writes = self._enqueue(
                keys=[
                    self.keys.pending(key),
                    self.keys.sequence(key),
                    self.keys.lock(key),
                    self.keys.dirty,
                    self.keys.writes(self.writer),
                ],
                args=[
                    max(self.pending_ttl, REFRESH_MARK_SECONDS) if refresh else self.pending_ttl,
                    SEQUENCE_TTL,
                    "1" if force else "0",
                    str(key),
                    self.lock_ttl_ms,
                    WRITES_TTL,
                    "1" if refresh else "0",
                ],
            )
            self._count_write(int(writes))
        found = int(answer)
        if found in (1, 3):
            self._publish_or_unmark(key, refresh=refresh)
        elif found == 0 and force:
            (self.publish_refresh if refresh else self.publish)(key)
        return found in (1, 3) or (found == 0 and force)

    def _count_write(self, count: int) -> None:
        # Called under the lock: without a loss, Redis tells each enqueue the count after the
        # last one's. A count not above it was told before: the writes since went missing.
        if count <= self._writes_seen and self._lost is None:
            self._lost = (self._writes_seen, count - 1)
        self._writes_seen = count

    def rolled_back(self) -> tuple[int, int] | None:
        """Whether Redis lost writes it had acknowledged to this process since the last look.

        Each process counts its own enqueues in Redis, one at a time, so the count each is told
        is one above the last. ``(seen, now)`` when the count went back (``seen`` is the last
        count this process was told, ``now`` what Redis holds, or held when a later enqueue
        counted on from it): Redis lost the last writes while other keys (a leader lease, say)
        stayed. A count gone altogether counts as going back to 0. A loss is told once. A look
        keeps the count alive however seldom the process enqueues.
        """
        count = self.keys.writes(self.writer)
        with self._writes_lock:
            now = int(reply_text(self.redis.get(count) or "0"))
            self.redis.expire(count, WRITES_TTL)
            lost, self._lost = self._lost, None
            if lost is None and now < self._writes_seen:
                lost = (self._writes_seen, now)
            self._writes_seen = now
        return lost

    def mark_pending(self, key: OrderKey, wait: float) -> bool:
        """Set the key's pending mark for a message about to be published ``wait`` seconds out.

        Covered by a dirty mark like every pending mark (see ``enqueue``). False when a mark is
        already set: a message is queued for the key.
        """
        ttl_ms = int((wait + self.pending_ttl) * 1000)
        return bool(
            int(
                self._mark_pending(
                    keys=[self.keys.pending(key), self.keys.dirty],
                    args=[ttl_ms, str(key), self.lock_ttl_ms],
                )
            )
        )

    def clear_pending(self, key: OrderKey) -> None:
        """Drop the pending mark."""
        self.redis.delete(self.keys.pending(key))

    def is_pending(self, key: OrderKey) -> bool:
        """Whether a reconcile of the key is queued and not yet started."""
        return bool(self.redis.exists(self.keys.pending(key)))

    def request_pass(self, key: OrderKey) -> bool:
        """Ask for another pass, for work a pass did not finish; counted as an event.

        A lost lease or a killed holder leaves work no completed pass covers. Counting it as an
        event makes sure the next pass runs even when the counters are gone (Redis lost its data,
        so the next ``begin`` would otherwise find nothing uncovered and end as stale), and a pass
        holding the key now asks for the next one itself when it releases. Returns whether a task
        was published.
        """
        return self.enqueue(key)

    def sweep_orphans(self, batch: int = 500) -> list[OrderKey]:
        """Enqueue dirty keys whose lock holder vanished, or whose entry message was lost.

        Returns the keys enqueued.
        """
        members = self._sweep(
            keys=[self.keys.dirty],
            args=[
                batch,
                self.keys.lock_prefix,
                self.keys.pending_prefix,
                self.queue_depth(Queue.RECONCILE.value),
                self.lock_ttl_ms,
            ],
        )
        found = [OrderKey.parse(reply_text(m)) for m in members]
        self._request_passes(found)
        return found

    def _request_passes(self, found: Sequence[OrderKey]) -> None:
        """Ask for a pass of each key a sweep took out of its set.

        A publish that fails puts that key (see ``enqueue``) and every one after it back into the
        dirty set for a retry, so a broker outage in the middle of a batch forgets none of them.
        """
        for done, key in enumerate(found):
            try:
                self.request_pass(key)
            except Exception:
                self._mark_dirty(found[done + 1 :], PUBLISH_RETRY_SECONDS)
                raise

    def _mark_dirty(self, found: Sequence[OrderKey], wait: float) -> None:
        pipe = self.redis.pipeline(transaction=False)
        for key in found:
            self._unmark(
                keys=[self.keys.pending(key), self.keys.dirty],
                args=[int(wait * 1000), str(key), "0"],
                client=pipe,
            )
        pipe.execute()

    def sweep_lost_waits(self, queues: Sequence[str], batch: int = 500) -> list[OrderKey]:
        """End the passes whose next step's message was lost on its way to a worker; enqueue them.

        A worker that pops a message from the broker and dies before it holds it (the message is
        then in no queue and in no unacknowledged set) would otherwise block its order until the
        hand-over's wait runs out, up to the visibility timeout. A pass is taken for lost when its
        fence still waits, unheld, a lease after the publish while its queue is empty; a queue
        with messages in it is looked at again a lease later.

        Args:
            queues: the broker queues steps are published to.
            batch: at most this many keys looked at.
        """
        depths: list[str | int] = []
        for name in queues:
            depths += [name, self.queue_depth(name)]
        members = self._sweep_waits(
            keys=[self.keys.waiting],
            args=[batch, self.keys.lock_prefix, self.lock_ttl_ms, *depths],
        )
        found = [OrderKey.parse(reply_text(m)) for m in members]
        self._request_passes(found)
        return found

    def pending_count(self) -> int:
        """How many keys carry a pending mark (a scan: call it seldom)."""
        return sum(
            1 for _ in self.redis.scan_iter(match=f"{self.keys.prefix}pending:*", count=1000)
        )

    def queue_depth(self, queue: str) -> int:
        """Messages waiting in one broker queue, at every priority (kombu keeps a list for each)."""
        pipe = self.redis.pipeline(transaction=False)
        for name in self.keys.broker_lists(queue):
            pipe.llen(name)
        return sum(int(n) for n in pipe.execute())
