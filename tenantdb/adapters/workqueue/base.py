"""What every part of the work queue shares: the Redis client, the key names, the scripts.

The parts (``queueing``, ``leasing``, ``timetables``, ``notes``) each add their primitives to
``QueueBase``; ``WorkQueue`` is all of them over one client and one key prefix.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass

import redis

from tenantdb.adapters.workqueue.keys import WorkQueueKeys
from tenantdb.adapters.workqueue.scripts import source
from tenantdb.core.keys import OrderKey
from tenantdb.core.seal import SealKeys

Publish = Callable[[OrderKey], None]
PublishLater = Callable[[OrderKey, float], None]
"""Sends the reconcile task for a key to start no sooner than so many seconds from now."""


@dataclass(frozen=True, slots=True)
class Spacing:
    """How the passes of a busy key are spaced.

    A key is busy while its passes end one after another with events that arrived during them
    (an order edited without pause, say). From the ``after``-th such pass in a row, the pass that
    follows waits ``seconds`` before it starts: events meanwhile join it, as they join any pending
    pass, so a key edited for as long as anyone likes costs a pass per ``seconds`` or so instead
    of a pass after every pass. A pass that ends with nothing new ends the streak.
    """

    after: int
    seconds: float
    publish_later: PublishLater


SEQUENCE_TTL = 7 * 24 * 3600
"""Life of a key's event counters after their last change; both fields expire together."""
WRITES_TTL = 7 * 24 * 3600
"""Seconds a process's count of enqueues outlives its last use (``WorkQueue.rolled_back``)."""

PUBLISH_RETRY_SECONDS = 5.0
"""How soon the orphan sweep tries again to enqueue a key whose message could not be published."""

SCRIPTS = (
    "enqueue", "begin", "acquire", "release", "extend", "hold", "extend_wait", "hold_pending",
    "mark_pending", "unmark", "fence", "sweep_orphans", "sweep_lost_waits", "claim_due",
    "return_claims",
)  # fmt: skip
"""The scripts a work queue runs (``lua/NAME.lua``); the others are functions they share."""


class QueueBase:
    """The client, key names, settings and scripts of a work queue for one key prefix."""

    def __init__(
        self,
        client: redis.Redis,
        publish: Publish,
        *,
        publish_refresh: Publish | None = None,
        prefix: str = "tenantdb:",
        lock_ttl: float = 30.0,
        pending_ttl: int = 300,
        spacing: Spacing | None = None,
        seal_keys: SealKeys | None = None,
    ) -> None:
        """Bind the primitives to a Redis client and a publisher.

        Args:
            client: a redis-py client; responses may be bytes or str.
            publish: sends the reconcile task for a key; called only for a newly set pending mark.
            publish_refresh: sends it for a periodic refresh, behind every other message
                (``REFRESH_PRIORITY``); ``publish`` when not given.
            prefix: prefix of every key written.
            lock_ttl: lease length in seconds.
            pending_ttl: life of a pending mark in seconds.
            spacing: how a busy key's passes are spaced (``Spacing``); without it each pass that
                ends with new events is followed by the next at once.
            seal_keys: the keys that seal and open the notes a pass leaves (workers only);
                without them a note cannot be left and none read back is trusted.
        """
        self.redis = client
        self.publish = publish
        self.publish_refresh = publish_refresh or publish
        self.keys = WorkQueueKeys(prefix)
        self.lock_ttl_ms = max(1, int(lock_ttl * 1000))
        self.pending_ttl = pending_ttl
        self.spacing = spacing
        self.seal_keys = seal_keys
        self.writer = uuid.uuid4().hex[:16]
        """Names this process's count of enqueues (``rolled_back``)."""
        self._writes_seen = 0
        self._lost: tuple[int, int] | None = None
        self._writes_lock = threading.Lock()
        scripts = {name: client.register_script(source(name)) for name in SCRIPTS}
        self._scripts = tuple(scripts.values())
        self._enqueue = scripts["enqueue"]
        self._begin = scripts["begin"]
        self._acquire = scripts["acquire"]
        self._release = scripts["release"]
        self._extend = scripts["extend"]
        self._hold = scripts["hold"]
        self._extend_wait = scripts["extend_wait"]
        self._hold_pending = scripts["hold_pending"]
        self._mark_pending = scripts["mark_pending"]
        self._unmark = scripts["unmark"]
        self._fence = scripts["fence"]
        self._sweep = scripts["sweep_orphans"]
        self._sweep_waits = scripts["sweep_lost_waits"]
        self._claim_due = scripts["claim_due"]
        self._return_claims = scripts["return_claims"]

    def load_scripts(self) -> None:
        """Load every script into Redis now, so the first call of each costs one round trip."""
        for script in self._scripts:
            self.redis.script_load(script.script)

    def retry_later(self, key: OrderKey, wait: float) -> None:
        """Drop the key's pending mark and have the sweep enqueue it in ``wait`` seconds.

        For a message that could not be published: without it the mark would only keep every
        event from publishing until it ran out.
        """
        self._unmark(
            keys=[self.keys.pending(key), self.keys.dirty],
            args=[max(1, int(wait * 1000)), str(key), "1"],
        )

    def _publish_or_unmark(
        self, key: OrderKey, *, refresh: bool = False, wait: float = 0.0
    ) -> None:
        try:
            if wait > 0 and self.spacing is not None:
                self.spacing.publish_later(key, wait)
            else:
                (self.publish_refresh if refresh else self.publish)(key)
        except BaseException:
            self.retry_later(key, PUBLISH_RETRY_SECONDS)
            raise
