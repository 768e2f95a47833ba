"""Leases: one pass at a time per order, fenced from step to step of its chain.

``begin`` starts a pass (or finds it busy or stale), ``hand_over`` and ``claim`` move its fence
from one chain step to the next, ``hold`` keeps a received step's lease, ``release`` ends the
pass and asks for the next one when events arrived meanwhile. A ``Heartbeat`` keeps a running
step's lease and stops it before a write once the lease is gone.
"""

from __future__ import annotations

import enum
import hashlib
import logging
import secrets
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from types import TracebackType
from typing import Self

import redis

from tenantdb.adapters.errors import SafeError
from tenantdb.adapters.redisclient import reply_text
from tenantdb.adapters.workqueue.base import SEQUENCE_TTL, QueueBase
from tenantdb.core.keys import OrderKey
from tenantdb.core.tasknames import Queue

log = logging.getLogger(__name__)


class LeaseLostError(SafeError, RuntimeError):
    """The order's lease ran out or was taken over; the step must not write."""

    def __init__(self, key: OrderKey) -> None:
        super().__init__(f"lease on {key} was lost; stopping before the next write")
        self.key = key


class Start(enum.Enum):
    """How ``WorkQueue.begin`` started a pass."""

    LEASED = "leased"
    """The pass holds the lease and runs."""
    BUSY = "busy"
    """Another pass holds the lease; the key is marked dirty and this message ends."""
    STALE = "stale"
    """A completed pass already covers every event; this message ends."""


class Claim(enum.Enum):
    """What ``WorkQueue.claim`` found when a chain step started."""

    CLAIMED = "claimed"
    """The step holds the fence and runs."""
    MOVED = "moved"
    """The pass's fence is elsewhere: this is a duplicate or late copy of a step; it ends."""
    LOST = "lost"
    """The pass's lease is gone."""


class Release(enum.Enum):
    """What ``WorkQueue.release`` found."""

    CLEAN = "clean"
    """Released; nothing arrived for the key meanwhile."""
    DIRTY = "dirty"
    """Released; an event arrived during the pass, so the key was enqueued again."""
    LOST = "lost"
    """The lease was no longer ours; nothing was released."""


def pass_name(token: str) -> str:
    """The public name of the pass holding lease token ``token``."""
    return hashlib.sha256(token.encode()).hexdigest()[:12]


def ready_fence(step: int, attempt: int) -> str:
    """The fence that lets attempt ``attempt`` (0 first) of chain step ``step`` start."""
    return f"{step}.{attempt}"


@dataclass(frozen=True, slots=True)
class Lease:
    """A held lock on one order: the key, the token that proves ownership, the events covered.

    A pass's token ends with ``:`` and the events counted when it began (``started``), so the
    count lives with the lease in Redis and a step learns it from there.

    ``fence`` is the chain step the lease is at ("" for the entry task), see ``claim``.
    """

    key: OrderKey
    token: str
    started: int = 0
    fence: str = ""

    @property
    def name(self) -> str:
        """The pass's public name: 12 hex digits of a digest of its token.

        Task arguments, logs and User-Agents name a pass by it; the token itself never leaves
        Redis, so nothing that shows a task's arguments (Flower, say) can act as the pass.
        """
        return pass_name(self.token)

    @property
    def value(self) -> str:
        """What the lock holds while this lease is current."""
        return f"{self.token}#{self.fence}" if self.fence else self.token

    def at(self, fence: str) -> Lease:
        """The same lease at another fence."""
        return replace(self, fence=fence)


class Leasing(QueueBase):
    """Take, fence, hold, extend and release the lease of an order."""

    def begin(self, key: OrderKey) -> tuple[Start, Lease | None]:
        """Start a pass for a consumed message: clear the pending mark, then lease or skip.

        Returns:
            ``(LEASED, lease)`` when the pass may run; ``(BUSY, None)`` when another pass holds the
            key (which is now marked dirty); ``(STALE, None)`` when a completed pass already
            covers every event counted for the key.
        """
        token = secrets.token_hex(16)
        outcome, events = self._begin(
            keys=[
                self.keys.lock(key),
                self.keys.dirty,
                self.keys.pending(key),
                self.keys.sequence(key),
            ],
            args=[token, self.lock_ttl_ms, str(key)],
        )
        if int(outcome) == 1:
            return Start.LEASED, Lease(key, f"{token}:{int(events)}", int(events))
        return (Start.BUSY if int(outcome) == 0 else Start.STALE), None

    def acquire(self, key: OrderKey) -> Lease | None:
        """Take the key's lock, or mark the key dirty when another holder has it."""
        token = secrets.token_hex(16)
        got = self._acquire(
            keys=[self.keys.lock(key), self.keys.dirty],
            args=[token, self.lock_ttl_ms, str(key)],
        )
        return Lease(key, token) if int(got) == 1 else None

    def extend(self, lease: Lease, ttl_ms: int | None = None) -> bool:
        """Renew the lease for another full TTL (or ``ttl_ms``); False when it is no longer ours."""
        return bool(
            int(
                self._extend(
                    keys=[self.keys.lock(lease.key)], args=[lease.value, ttl_ms or self.lock_ttl_ms]
                )
            )
        )

    def hold(self, lease: Lease) -> bool:
        """Hold the waiting fence ``lease`` is at for one lease length, for a worker holding the
        step's message; call it again to renew.

        The fence is marked held, so the hand-over no longer extends it over a queue wait, and the
        key is marked dirty for when the hold runs out. False once the fence moved on (the step
        started, or the pass is gone): the holder lets go.
        """
        return bool(
            int(
                self._hold(
                    keys=[self.keys.lock(lease.key), self.keys.dirty],
                    args=[lease.value, self.lock_ttl_ms, str(lease.key)],
                )
            )
        )

    def hold_pending(self, key: OrderKey) -> bool:
        """Renew the key's pending mark for one lease length, for a worker holding its entry.

        False once the mark is gone (the pass began): the holder lets go.
        """
        return bool(
            int(
                self._hold_pending(
                    keys=[self.keys.pending(key), self.keys.dirty],
                    args=[self.lock_ttl_ms, str(key)],
                )
            )
        )

    def extend_wait(self, lease: Lease, ttl_ms: int, queue: str) -> bool:
        """Cover a waiting fence's wait in ``queue``, now that the step's message is published.

        Nothing changes when a worker already holds the step (``hold``) or the fence moved on.
        The wait is looked at again after one lease (``sweep_lost_waits``). The key's records
        in the other chain queues (an earlier step's) go, so the sweep never judges a step by a
        queue its message is not in.
        """
        stale = [f"{q.value} {lease.key}" for q in Queue if q.value != queue]
        return bool(
            int(
                self._extend_wait(
                    keys=[self.keys.lock(lease.key), self.keys.dirty, self.keys.waiting],
                    args=[lease.value, ttl_ms, str(lease.key), f"{queue} {lease.key}",
                          self.lock_ttl_ms, *stale],
                )
            )
        )  # fmt: skip

    def hand_over(self, lease: Lease, fence: str, ttl_ms: int) -> Lease | None:
        """Move the pass's fence on to ``fence`` for the next step; None when the lease is gone.

        The lease is set to ``ttl_ms`` and the key marked dirty for when that runs out, so a next
        step that never runs is noticed. Hand over for one lease, publish the step, then cover
        its wait in the queue with ``extend_wait``: a process that dies before the publish then
        blocks the order for one lease only.
        """
        moved = lease.at(fence)
        done = self._run_fence(lease, lease.value, moved.value, ttl_ms, mark=True)
        return moved if done == 1 else None

    def claim(self, lease: Lease, fence: str) -> tuple[Claim, Lease | None]:
        """Take the fence ``fence`` a hand-over left for this step; return the running lease."""
        running = lease.at(fence + "!")
        # Marked dirty for when this lease ends: a step that dies running is swept after it.
        done = self._run_fence(
            lease, lease.at(fence).value, running.value, self.lock_ttl_ms, mark=True, held=True
        )
        if done == 1:
            return Claim.CLAIMED, running
        return (Claim.MOVED if done == 0 else Claim.LOST), None

    def find(self, key: OrderKey, name: str) -> Lease | None:
        """The lease of the pass named ``name`` (``Lease.name``) at its current fence, if held.

        What the pass covers when it ends comes from its token in Redis, never from the message
        that names the pass: a forged or mangled step cannot make a pass cover events it never saw.
        """
        value = reply_text(self.redis.get(self.keys.lock(key)) or "")
        token, _, fence = value.partition("#")
        if not token or pass_name(token) != name:
            return None
        _, _, started = token.rpartition(":")
        return Lease(key, token, int(started) if started.isdigit() else 0, fence)

    def _run_fence(
        self,
        lease: Lease,
        expected: str,
        new: str,
        ttl_ms: int,
        *,
        mark: bool = False,
        held: bool = False,
    ) -> int:
        flags = ["1" if mark else "0", "1" if held else "0"]
        return int(
            self._fence(
                keys=[self.keys.lock(lease.key), self.keys.dirty],
                args=[lease.token, expected, new, ttl_ms, str(lease.key), *flags],
            )
        )

    def holds(self, lease: Lease) -> bool:
        """Whether the lease is still ours, without renewing it."""
        value = self.redis.get(self.keys.lock(lease.key))
        return reply_text(value) == lease.value

    def progress(self, key: OrderKey) -> tuple[int, int]:
        """How many events were counted for the key, and how many a finished pass covered."""
        events, covered = self.redis.hmget(self.keys.sequence(key), ["events", "covered"])
        return int(events or 0), int(covered or 0)

    def record_pass(self, key: OrderKey, reason: str, at: float) -> None:
        """Remember when the key's last pass ended and with which reason (for ``status``)."""
        name = self.keys.last_pass(key)
        self.redis.hset(name, mapping={"at": f"{at:.3f}", "result": reason})
        self.redis.expire(name, SEQUENCE_TTL)

    def last_pass(self, key: OrderKey) -> tuple[float, str] | None:
        """When the key's last pass ended, and its reason; None before any."""
        return self.last_passes([key])[0]

    def last_passes(
        self, keys: Sequence[OrderKey], *, batch: int = 1000
    ) -> list[tuple[float, str] | None]:
        """``last_pass`` of each key, in order, read in pipelines of ``batch`` keys."""
        out: list[tuple[float, str] | None] = []
        for start in range(0, len(keys), batch):
            pipe = self.redis.pipeline(transaction=False)
            for key in keys[start : start + batch]:
                pipe.hmget(self.keys.last_pass(key), ["at", "result"])
            out += [
                None if at is None else (float(at), reply_text(reason))
                for at, reason in pipe.execute()
            ]
        return out

    def is_locked(self, key: OrderKey) -> bool:
        """Whether some pass holds the key's lock."""
        return bool(self.redis.exists(self.keys.lock(key)))

    def release(
        self, lease: Lease, *, completed: bool = True, retry_in: float | None = None
    ) -> Release:
        """Release the lease; enqueue the key again when events arrived during the pass.

        The next pass of a busy key (see ``Spacing``) is published to start after the spacing's
        wait; any other starts at once.

        Args:
            lease: the lease to release.
            completed: whether the pass finished; only a finished pass covers the events it saw.
            retry_in: for a pass that failed, when its retry is due (seconds): the key stays
                dirty until then, so the sweep brings the pass should the retry's message never
                be published. Without it the release removes the key's dirty mark.
        """
        retry_ms = 0 if retry_in is None else max(1, int(retry_in * 1000))
        spacing = self.spacing
        found, wait_ms, busy = self._release(
            keys=[
                self.keys.lock(lease.key),
                self.keys.dirty,
                self.keys.sequence(lease.key),
                self.keys.pending(lease.key),
                self.keys.note(lease.key),
            ],
            args=[
                lease.value,
                str(lease.key),
                lease.started,
                "1" if completed else "0",
                SEQUENCE_TTL,
                self.pending_ttl,
                retry_ms,
                self.lock_ttl_ms,
                spacing.after if spacing else 0,
                max(1, int(spacing.seconds * 1000)) if spacing else 0,
            ],
        )
        found, wait_ms = int(found), int(wait_ms)
        if wait_ms and int(busy) == (spacing.after if spacing else 0):
            log.info(
                "events arrive during every pass; the next passes wait %g s each",
                wait_ms / 1000,
                extra={"order": str(lease.key)},
            )
        if found < 0:
            return Release.LOST
        if found == 0:
            return Release.CLEAN
        if found == 2:  # the script newly set the pending mark
            self._publish_or_unmark(lease.key, wait=wait_ms / 1000)
        return Release.DIRTY

    @contextmanager
    def heartbeat(self, lease: Lease, interval: float | None = None) -> Iterator[Heartbeat]:
        """Extend the lease in the background while the body runs."""
        beat = Heartbeat(self, lease, interval or self.lock_ttl_ms / 3000)
        with beat:
            yield beat


class Heartbeat:
    """Keeps a lease alive from a daemon thread and guards writes against a lost lease."""

    def __init__(self, queue: Leasing, lease: Lease, interval: float) -> None:
        """Prepare a heartbeat; it starts when entered as a context manager."""
        self.queue = queue
        self.lease = lease
        self.interval = interval
        self._stop = threading.Event()
        self._lost = threading.Event()
        self._thread = threading.Thread(
            target=self._run, name=f"lease-heartbeat {lease.key}", daemon=True
        )

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stop.set()
        self._thread.join()

    @property
    def lost(self) -> bool:
        """Whether the heartbeat has seen the lease go."""
        return self._lost.is_set()

    def check(self) -> None:
        """Renew the lease now; raise ``LeaseLostError`` when it is gone. Call before each write."""
        if self._lost.is_set() or not self.queue.extend(self.lease):
            self._lost.set()
            raise LeaseLostError(self.lease.key)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                if not self.queue.extend(self.lease):
                    self._lost.set()
                    return
            except redis.RedisError:
                # A blip is survivable while the lease has time left; check() decides for writes.
                log.warning(
                    "lease heartbeat could not reach Redis", extra={"order": str(self.lease.key)}
                )
