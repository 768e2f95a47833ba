"""What keeps one MySQL failover group from costing the others: a circuit and a limit, in Redis.

Owns two pieces of state that every worker process shares, so that what one learns all know:

- **The circuit of a site.** A connect to a site that fails for the connection's sake (refused,
  timed out, a server that accepts TCP and never answers) opens the site's circuit: for a while
  every pass that would dial it is told at once, with the first failure's words, instead of
  waiting out a timeout of its own. The time open doubles with each failure in a row (from
  ``base`` up to ``cap``); when it ends, the next pass tries for real, and a connect that works
  closes the circuit. So a dead site costs the fleet one timeout per open period, not one per
  pass and per process.
- **One dial at a time.** Only one pass connects to a site at once; another that needs a new
  connection meanwhile comes back shortly. A healthy site answers in milliseconds, so this
  costs nothing there; a dead one is learnt by a single connect timeout, not by one per slot.
- **The slots of a group.** At most ``limit`` passes work on one group at once. A pass that
  finds no slot is told the group is busy and comes back shortly; it never queues behind the
  others inside a worker. A slot is a lease: one held by a killed worker runs out by itself.

Both answer in one round trip (a Lua script). Keys carry the deployment's prefix. The circuit's
message is a driver error as ``mysqladmin`` worded it: never a credential. This module decides
nothing about orders; it only says open, busy or go.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from enum import StrEnum

import redis

from tenantdb.adapters.redisclient import reply_text
from tenantdb.adapters.workqueue.scripts import ADAPTERS_LUA, source
from tenantdb.settings import Settings


class Entry(StrEnum):
    """What entering a group said."""

    GO = "go"
    """A slot is held: work, then leave."""
    BUSY = "busy"
    """Every slot of the group is taken."""
    OPEN = "open"
    """The site's circuit is open: it failed a moment ago."""


@dataclass(frozen=True)
class Admission:
    """The answer of ``GroupGuard.enter``: ``message`` is the failure an open circuit keeps."""

    entry: Entry
    token: str = ""
    message: str = ""
    closes_in: float = 0.0
    """With an open circuit: the seconds until it closes."""


class GroupGuard:
    """The circuits of MySQL sites and the slots of failover groups, shared through Redis."""

    def __init__(
        self,
        client: redis.Redis,
        prefix: str,
        *,
        limit: int,
        lease_seconds: float,
        base_seconds: float,
        cap_seconds: float,
    ) -> None:
        """Guard groups with at most ``limit`` passes each, slots leased for ``lease_seconds``,
        and circuits open from ``base_seconds`` doubling up to ``cap_seconds``."""
        self.redis = client
        self.prefix = prefix
        self.limit = limit
        self.lease_ms = int(lease_seconds * 1000)
        self.base_ms = int(base_seconds * 1000)
        self.cap_ms = int(cap_seconds * 1000)
        self._enter = client.register_script(source("guard_enter", ADAPTERS_LUA))
        self._trip = client.register_script(source("guard_trip", ADAPTERS_LUA))

    @classmethod
    def from_settings(cls, client: redis.Redis, settings: Settings) -> GroupGuard:
        """A guard with the deployment's prefix, limits and circuit times."""
        return cls(
            client,
            settings.key_prefix,
            limit=settings.mysql_group_concurrency,
            lease_seconds=settings.mysql_pass_budget_seconds + 30,
            base_seconds=settings.mysql_circuit_seconds,
            cap_seconds=settings.mysql_circuit_max_seconds,
        )

    def _circuit(self, address: str) -> str:
        return f"{self.prefix}mysql-circuit:{address}"

    def _trips(self, address: str) -> str:
        return f"{self.prefix}mysql-trips:{address}"

    def _slots(self, group: str) -> str:
        return f"{self.prefix}mysql-slots:{group}"

    def _dialing(self, address: str) -> str:
        return f"{self.prefix}mysql-dialing:{address}"

    def circuit(self, address: str) -> tuple[str, float] | None:
        """The failure that keeps the site's circuit open and the seconds until it closes, or
        None when it is closed."""
        pipe = self.redis.pipeline(transaction=False)
        pipe.get(self._circuit(address))
        pipe.pttl(self._circuit(address))
        message, ttl_ms = pipe.execute()
        return None if message is None else (reply_text(message), max(int(ttl_ms), 0) / 1000)

    def begin_dial(self, address: str, seconds: float) -> bool:
        """Whether this pass may connect to the site now (no other is connecting); it holds the
        right for at most ``seconds`` (a connect's timeout and a margin)."""
        return bool(self.redis.set(self._dialing(address), "1", nx=True, px=int(seconds * 1000)))

    def end_dial(self, address: str) -> None:
        """Give back the right ``begin_dial`` gave."""
        self.redis.delete(self._dialing(address))

    def enter(self, group: str, address: str) -> Admission:
        """Take a slot of ``group`` to work on the site at ``address``, unless its circuit is open
        or every slot is taken."""
        token = secrets.token_hex(8)
        keys = [self._circuit(address), self._slots(group)]
        answer, message, ttl_ms = self._enter(keys=keys, args=[token, self.limit, self.lease_ms])
        entry = Entry(reply_text(answer))
        closes_in = max(int(ttl_ms), 0) / 1000
        return Admission(entry, token if entry is Entry.GO else "", reply_text(message), closes_in)

    def leave(self, group: str, token: str) -> None:
        """Give back a slot ``enter`` gave."""
        if token:
            self.redis.zrem(self._slots(group), token)

    def trip(self, address: str, message: str) -> float:
        """Open the site's circuit after a failed connect; the seconds it stays open."""
        keys = [self._circuit(address), self._trips(address)]
        open_ms = self._trip(keys=keys, args=[message, self.base_ms, self.cap_ms])
        return int(open_ms) / 1000

    def heal(self, address: str) -> None:
        """Close the site's circuit and forget its failures: a connect worked."""
        self.redis.delete(self._circuit(address), self._trips(address))
