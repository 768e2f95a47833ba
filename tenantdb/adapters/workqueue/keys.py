"""The names of the work queue's Redis keys under one prefix."""

from __future__ import annotations

from dataclasses import dataclass

from tenantdb.core.keys import OrderKey
from tenantdb.core.schedule import Timetable

EVENT_PRIORITY = 0
"""The broker priority of a pass that an event, a come-back or an operator asked for.

On the Redis transport 0 is the highest priority: a worker takes these messages, and every chain
step's, before any periodic refresh."""
REFRESH_PRIORITY = 9
"""The broker priority of a periodic refresh: taken only while no other message waits.

A fleet's refreshes can keep every worker busy for minutes (a fleet built at once comes due at
once); they must never hold up a new order, an edit, or the step of a pass already running."""
REFRESH_MARK_SECONDS = 3600
"""The life of a refresh's pending mark, at least: a refresh may wait behind events and other
refreshes longer than an event's mark lives, and its mark must not run out meanwhile, or the
orphan sweep would take its message for lost and publish it again ahead of the events. No event
waits on such a mark (an event publishes its own), and a lost refresh message is found by the
sweep as soon as the queue is empty."""
PRIORITY_STEPS = (EVENT_PRIORITY, REFRESH_PRIORITY)
"""The priorities the Redis transport keeps a list for in each queue, highest first."""
PRIORITY_SEPARATOR = "\x06\x16"
"""How kombu's Redis transport names the list of priority ``n > 0`` of a queue: ``<queue>``,
this separator, then ``n``; the list of priority 0 is the queue's own name."""


@dataclass(frozen=True, slots=True)
class WorkQueueKeys:
    """The Redis key names under one prefix."""

    prefix: str

    def broker_lists(self, queue: str) -> tuple[str, ...]:
        """The Redis lists a broker queue keeps its messages in, one per priority, highest first."""
        return tuple(
            f"{self.prefix}{queue}{PRIORITY_SEPARATOR}{p}" if p else f"{self.prefix}{queue}"
            for p in PRIORITY_STEPS
        )

    def pending(self, key: OrderKey) -> str:
        """The pending mark of a key."""
        return f"{self.prefix}pending:{key}"

    def lock(self, key: OrderKey) -> str:
        """The lock of a key."""
        return f"{self.prefix}lock:{key}"

    def last_pass(self, key: OrderKey) -> str:
        """The hash recording when the key's last pass ended and how."""
        return f"{self.prefix}last:{key}"

    def sequence(self, key: OrderKey) -> str:
        """The hash counting a key's events and the events its last completed pass covered."""
        return f"{self.prefix}seq:{key}"

    def note(self, key: OrderKey) -> str:
        """The note a pass leaves for the steps of its chain."""
        return f"{self.prefix}note:{key}"

    def quiet(self, key: OrderKey) -> str:
        """The basis a converged pass left for the key's quiet refreshes, and their note."""
        return f"{self.prefix}quiet:{key}"

    @property
    def watcher_leader(self) -> str:
        """The watcher's leader lease: its value is the leading replica's token."""
        return f"{self.prefix}leader:watcher"

    def written(self, cluster: str, kind: str, namespace: str, name: str) -> str:
        """The resourceVersion of tenantdb's last write of one object."""
        return f"{self.prefix}written:{cluster}/{kind}/{namespace}/{name}"

    def claims(self, table: Timetable) -> str:
        """The keys a sweep took out of one timetable and has not enqueued yet."""
        return f"{self.prefix}{table.value}:claimed"

    def period(self, name: str, key: OrderKey) -> str:
        """The claim of an order's periodic work ``name`` (e.g. a drift check)."""
        return f"{self.prefix}period:{name}:{key}"

    @property
    def pending_prefix(self) -> str:
        """What the pending marks' names start with (the scripts append the key)."""
        return f"{self.prefix}pending:"

    @property
    def lock_prefix(self) -> str:
        """What the lock names start with (the scripts append the key)."""
        return f"{self.prefix}lock:"

    @property
    def dirty(self) -> str:
        """The sorted set of dirty keys, scored by when to look for an orphan."""
        return f"{self.prefix}dirty"

    def writes(self, writer: str) -> str:
        """The count of the enqueues one process (``writer``) made, by which a Redis that lost
        writes is noticed."""
        return f"{self.prefix}writes:{writer}"

    @property
    def waiting(self) -> str:
        """The published steps' waits ("QUEUE KEY"), scored by when to look at them."""
        return f"{self.prefix}waiting"

    @property
    def due(self) -> str:
        """The due-set: keys scored by the epoch milliseconds they are due at."""
        return self.timetable(Timetable.DUE)

    def timetable(self, table: Timetable) -> str:
        """The sorted set of one timetable."""
        return f"{self.prefix}{table.value}"
