"""Leader election through a Redis lease, for the roles that must run once: watcher and beat.

A replica leads while it holds ``<prefix>leader:<role>`` with its own random token. The leader
renews the lease every third of its TTL; a standby tries to take it every ``retry`` seconds, so a
dead leader is replaced within TTL + retry. ``is_leader`` is also bounded by a local deadline (the
last successful renewal plus most of the TTL), so a leader cut off from Redis stops acting before
any standby can take over, rather than trusting a stale flag.

A lease the leader has to take afresh, rather than renew, starts a new term, and the replica is
told so (a loss, then a gain): its key ran out (renewals slower than the TTL) or Redis lost its
data (a restart without persistence, a failover). Either way events may have gone unqueued and
what Redis held (pending marks, timetables) may be gone, so the watcher relists everything on
every new term. No separate epoch key is needed: the leader key is the one written most often,
so it is the first to show a loss of data.
"""

from __future__ import annotations

import logging
import secrets
import threading
import time
from collections.abc import Callable

import redis

from tenantdb.adapters.workqueue.scripts import ADAPTERS_LUA, source

log = logging.getLogger(__name__)


# A leader considers itself leader only for this share of the TTL after its last renewal.
_SAFE_SHARE = 0.8


class LeaderLease:
    """One replica's view of the lease of a role."""

    def __init__(
        self,
        client: redis.Redis,
        role: str,
        *,
        prefix: str = "tenantdb:",
        ttl: float = 10.0,
        retry: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """Prepare a lease for ``role`` (``watcher``, ``beat``); nothing is taken yet."""
        self.redis = client
        self.key = f"{prefix}leader:{role}"
        self.role = role
        self.ttl = ttl
        self.retry = retry
        self.token = secrets.token_hex(16)
        self._clock = clock
        self._valid_until = 0.0
        self.term = 0
        """How many times this replica took the lease afresh; a renewal keeps the term."""
        self._renew = client.register_script(source("lease_renew", ADAPTERS_LUA))
        self._release = client.register_script(source("lease_release", ADAPTERS_LUA))

    @property
    def is_leader(self) -> bool:
        """Whether this replica holds the lease, as of its last successful renewal."""
        return self._clock() < self._valid_until

    def _mark(self, held: bool, started: float) -> bool:
        self._valid_until = started + self.ttl * _SAFE_SHARE if held else 0.0
        return held

    def try_acquire(self) -> bool:
        """Take the lease if nobody holds it, or renew it if we do."""
        started = self._clock()
        ttl_ms = int(self.ttl * 1000)
        if self.redis.set(self.key, self.token, nx=True, px=ttl_ms):
            self.term += 1
            return self._mark(True, started)
        return self._mark(
            bool(int(self._renew(keys=[self.key], args=[self.token, ttl_ms]))), started
        )

    def release(self) -> None:
        """Give the lease up at once, so a standby need not wait for the TTL."""
        self._valid_until = 0.0
        self._release(keys=[self.key], args=[self.token])

    def run(
        self,
        stop: threading.Event,
        on_change: Callable[[bool], None] = lambda _: None,
    ) -> None:
        """Campaign and renew until ``stop`` is set; call ``on_change`` on every gain or loss.

        A new term while leading is told as a loss and then a gain.
        """
        leading, term = False, self.term
        while not stop.is_set():
            try:
                held = self.try_acquire()
            except redis.RedisError as exc:
                log.warning("leader lease of %s: Redis error %s", self.role, type(exc).__name__)
                held = self.is_leader
            if held and leading and self.term != term:
                log.warning(
                    "%s had to take its leader lease afresh (it ran out, or Redis lost its data);"
                    " starting a new term",
                    self.role,
                )
                on_change(False)
                leading = False
            term = self.term
            if held != leading:
                leading = held
                log.info("%s %s the leader lease", self.role, "took" if held else "lost")
                on_change(held)
            stop.wait(self.ttl / 3 if leading else self.retry)
        if leading:
            self.release()
            on_change(False)
