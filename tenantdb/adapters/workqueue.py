"""The Redis work queue: deduplicated enqueue, per-order leases, dirty marks and the due-set.

These primitives give the engine its guarantees:

* ``enqueue`` counts an event for the key and sets a pending mark with NX; only a newly set mark
  publishes a task, so a burst of events for one order costs one message. While a pass holds the
  key's lock and no message is pending, the count alone is enough: the release asks for the next
  pass, so no message is spent on finding the lock busy.
* ``begin`` starts a pass: in one script it clears the pending mark (so later events publish
  again), drops the message when every counted event is already covered by a completed pass (a
  message made redundant by a pass that started after its event), and takes the order's lock with
  a random token and a lease, remembering how many events the pass covers. When the lock is busy
  it marks the key dirty instead.
* ``release`` removes the lock, records a completed pass's coverage, and reports in the same
  script whether events arrived during the pass, in which case the key is enqueued again. So an
  event during a pass is never lost, and a burst during a pass costs exactly one more pass.
* Every lease taken marks its key dirty for when it would run out; a release removes the mark.
  Every pending mark set marks its key dirty for a lease (and a second) later. By then its
  message is in the entry queue, or held by the worker that received it (``hold_pending`` marks
  the mark held), or lost: its publisher died before the publish, or a worker popped it and died
  before holding it. The sweep takes a mark neither held nor behind a queued message for lost,
  removes it and enqueues the key; the pass the message starts replaces the dirty mark.
* A dirty mark carries the time the busy lease runs out, so when its holder dies (and never
  releases) the sweep (``sweep_orphans``) finds the key and enqueues it.
* A worker that has received a step's message and not started it yet (prefetched, or waiting
  out a retry's countdown) holds the pass's lease to one lease length (``hold``), renewing it,
  so a worker that dies with the message only blocks the order until that lease runs out. An
  entry's message is held the same way through the key's pending mark (``hold_pending``).
* A worker can die after popping a message from the broker and before holding it; the message is
  then gone for good. A step's wait is looked at a lease after its publish (``sweep_lost_waits``):
  a fence still waiting unheld while its queue is empty lost its message, and the pass is ended
  and started afresh.
* A ``Heartbeat`` extends the lease while a step runs; ``Heartbeat.check`` is called before every
  write and raises ``LeaseLostError`` once the lease is gone, so a step that lost it stops before
  writing.
* A pass that goes on in a chain fences each step: the lock's value is the pass's token and a
  fence (``token#3.0`` means "step 3, first attempt, may start"). ``hand_over`` moves the fence
  to the next step (or the next attempt of a retried one) and extends the lease over the wait in
  the queue; ``claim`` takes the fence atomically when a step starts (``token#3.0!``). A
  duplicate or redelivered copy of a step finds the fence moved and ends without writing, and
  every write checks the whole value, so two copies of one step never both write. A hand-over and
  a refused claim also mark the key dirty for when the lease runs out, so a chain whose next
  message never runs is found by the orphan sweep.
* A pass that goes on in a chain leaves what it observed and decided for its steps in a note
  (``save_note``), under its token, so no step reads the world again; a note never holds a
  credential and ends with the pass.
* Two timetables hold "come back at T" per key (the earliest time wins) and pop due keys exactly
  once, in batches: the due-set for short waits and the refresh set for periodic refreshes.

Every key lives under a configurable prefix. The scripts build lock key names from the prefix, so
they need a single Redis (or Sentinel), not Redis Cluster.

This module never decides anything about an order and never logs anything but order keys.
"""

from __future__ import annotations

import enum
import hashlib
import logging
import secrets
import threading
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from types import TracebackType
from typing import Any, Self

import redis

from tenantdb.core.keys import OrderKey
from tenantdb.core.schedule import Timetable
from tenantdb.core.tasknames import Queue

log = logging.getLogger(__name__)

Publish = Callable[[OrderKey], None]

SEQUENCE_TTL = 7 * 24 * 3600
"""Life of a key's event counters after their last change; both fields expire together."""
WRITES_TTL = 7 * 24 * 3600
"""Seconds a process's count of enqueues outlives its last use (``WorkQueue.rolled_back``)."""

PUBLISH_RETRY_SECONDS = 5.0
"""How soon the orphan sweep tries again to enqueue a key whose message could not be published."""

# Every script that reads the clock reads the server's, so that all of them agree with each other
# and with the TTLs Redis keeps, whichever host the caller runs on.
_NOW_MS = """
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
"""

# While a pass holds the key's lock, the counted event is enough: the pass's release finds it
# and asks for the next pass itself, so no message is sent that could only find the lock busy.
# The key is marked dirty for when the lease ends, in case its holder dies instead.
# A pending mark set ('1') is covered by a dirty mark a lease (ARGV[5], ms) and a second later:
# the sweep then finds its message queued, held by a worker, or lost (see ``sweep_orphans``).
# A forced enqueue's message is a new one in the queue: its mark is unheld again.
# Every enqueue also counts one write in KEYS[5], the enqueuing process's own count (kept ARGV[6]
# seconds after its last use), in the same script: a Redis that lost the enqueue's effects (a
# partial loss: the last second of an AOF, a replica a little behind) lost the count with them,
# and the process that was told the count can tell (``rolled_back``). The count is the process's
# own, so enqueues by others after the loss cannot move it back up past what was lost.
_ENQUEUE = (
    _NOW_MS
    + """
local writes = redis.call('INCR', KEYS[5])
redis.call('EXPIRE', KEYS[5], ARGV[6])
local look = math.min(tonumber(ARGV[1]) * 1000, tonumber(ARGV[5])) + 1000
redis.call('HINCRBY', KEYS[2], 'events', 1)
redis.call('EXPIRE', KEYS[2], ARGV[2])
local now = now_ms()
local pttl = redis.call('PTTL', KEYS[3])
if pttl > 0 and redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('ZADD', KEYS[4], now + pttl, ARGV[4])
  return {2, writes}
end
if redis.call('SET', KEYS[1], '1', 'NX', 'EX', ARGV[1]) then
  redis.call('ZADD', KEYS[4], now + look, ARGV[4])
  return {1, writes}
end
if ARGV[3] == '1' then
  redis.call('SET', KEYS[1], '1', 'EX', ARGV[1])
  redis.call('ZADD', KEYS[4], now + look, ARGV[4])
end
return {0, writes}
"""
)

# Shared by begin and acquire: take the lock, or mark the key dirty until the busy lease ends.
# A lease taken joins the dirty set too, to be looked at when it would run out: a holder that
# dies without releasing (a hard time limit, a hand-off whose publish failed) leaves an orphan
# beat finds, and the release of a pass that ends well removes the mark.
_LOCK_OR_MARK = (
    _NOW_MS
    + """
local function lock_or_mark(lock, dirty, token, ttl, member)
  local now = now_ms()
  if redis.call('SET', lock, token, 'NX', 'PX', ttl) then
    redis.call('ZADD', dirty, now + tonumber(ttl), member)
    return true
  end
  local pttl = redis.call('PTTL', lock)
  if pttl < 0 then pttl = 0 end
  redis.call('ZADD', dirty, now + pttl, member)
  return false
end
"""
)

_BEGIN = (
    _LOCK_OR_MARK
    + """
redis.call('DEL', KEYS[3])
local events = tonumber(redis.call('HGET', KEYS[4], 'events') or '0')
local covered = tonumber(redis.call('HGET', KEYS[4], 'covered') or '0')
if events <= covered then
  -- Nothing to do: no pass is owed, so no mark stays to bring one.
  if redis.call('EXISTS', KEYS[1]) == 0 then redis.call('ZREM', KEYS[2], ARGV[3]) end
  return {-1, events}
end
-- The events the pass covers when it ends travel in its token, where no message can alter them.
local token = ARGV[1] .. ':' .. events
if lock_or_mark(KEYS[1], KEYS[2], token, ARGV[2], ARGV[3]) then return {1, events} end
return {0, events}
"""
)

_ACQUIRE = (
    _LOCK_OR_MARK
    + """
if lock_or_mark(KEYS[1], KEYS[2], ARGV[1], ARGV[2], ARGV[3]) then return 1 end
return 0
"""
)

# A pass that did not finish (ARGV[7] > 0) leaves its key dirty for when its retry is due: should
# the retry never be published (the broker refused it, the process died first), the orphan sweep
# brings the pass then. A pass that finished removes the mark.
_RELEASE = (
    _NOW_MS
    + """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return -1 end
redis.call('DEL', KEYS[1], KEYS[5])
local retry = tonumber(ARGV[7])
if retry > 0 then
  redis.call('ZADD', KEYS[2], now_ms() + retry, ARGV[2])
else
  redis.call('ZREM', KEYS[2], ARGV[2])
end
local started = tonumber(ARGV[3])
if ARGV[4] == '1' then
  local covered = tonumber(redis.call('HGET', KEYS[3], 'covered') or '0')
  if started > covered then
    redis.call('HSET', KEYS[3], 'covered', started)
    redis.call('EXPIRE', KEYS[3], ARGV[5])
  end
end
local events = tonumber(redis.call('HGET', KEYS[3], 'events') or '0')
if events <= started then return 0 end
-- Ask for the next pass before the lock is free to take, without counting a new event: a pass
-- that takes the lock from here on covers these events, and this message then ends as stale.
if redis.call('SET', KEYS[4], '1', 'NX', 'EX', ARGV[6]) then
  local now = now_ms()
  local look = math.min(tonumber(ARGV[6]) * 1000, tonumber(ARGV[8])) + 1000
  redis.call('ZADD', KEYS[2], now + look, ARGV[2])
  return 2
end
return 1
"""
)

# Compare-and-set of a pass's fence: the lock moves from one value of the pass's token to the
# next. A claim that finds another value of the same token marks the key dirty for when that
# lease ends (its holder may have died); any other value means the lease is gone.
_FENCE = (
    _NOW_MS
    + """
local v = redis.call('GET', KEYS[1])
local now = now_ms()
if v == ARGV[2] or (ARGV[7] == '1' and v == ARGV[2] .. '~') then
  redis.call('SET', KEYS[1], ARGV[3], 'PX', ARGV[4])
  if ARGV[6] == '1' then redis.call('ZADD', KEYS[2], now + tonumber(ARGV[4]), ARGV[5]) end
  return 1
end
if v and (v == ARGV[1] or string.sub(v, 1, string.len(ARGV[1]) + 1) == ARGV[1] .. '#') then
  local pttl = redis.call('PTTL', KEYS[1])
  if pttl < 0 then pttl = 0 end
  redis.call('ZADD', KEYS[2], now + pttl, ARGV[5])
  return 0
end
return -1
"""
)

_EXTEND = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
"""

# A message that could not be published leaves no pending mark behind (ARGV[3] == '1': it would
# only block the key until it ran out) and the key dirty for a retry ARGV[1] ms from now.
_UNMARK = (
    _NOW_MS
    + """
if ARGV[3] == '1' then redis.call('DEL', KEYS[1]) end
redis.call('ZADD', KEYS[2], now_ms() + tonumber(ARGV[1]), ARGV[2])
return 1
"""
)

_MARK_PENDING = (
    _NOW_MS
    + """
if not redis.call('SET', KEYS[1], '1', 'NX', 'PX', ARGV[1]) then return 0 end
local now = now_ms()
local look = math.min(tonumber(ARGV[1]), tonumber(ARGV[3])) + 1000
redis.call('ZADD', KEYS[2], now + look, ARGV[2])
return 1
"""
)

# A worker holding an entry's message marks the key's pending mark held ('~') for one lease, and
# marks the key dirty for a second after that: once the worker dies, the mark runs out first, so
# the sweep's enqueue publishes again.
_HOLD_PENDING = (
    _NOW_MS
    + """
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
local now = now_ms()
redis.call('SET', KEYS[1], '~', 'PX', ARGV[1])
redis.call('ZADD', KEYS[2], now + tonumber(ARGV[1]) + 1000, ARGV[2])
return 1
"""
)

# A worker holding a step's message marks the waiting fence held ('~'), sets it to one lease and
# marks the key dirty for when that runs out; it renews both until the step starts. Once the
# worker dies, the order is swept within a lease.
_HOLD = (
    _NOW_MS
    + """
local v = redis.call('GET', KEYS[1])
if v ~= ARGV[1] and v ~= ARGV[1] .. '~' then return 0 end
local now = now_ms()
redis.call('SET', KEYS[1], ARGV[1] .. '~', 'PX', ARGV[2])
redis.call('ZADD', KEYS[2], now + tonumber(ARGV[2]), ARGV[3])
return 1
"""
)

# Once the next step's message is published, its wait in the queue is covered (the message is in
# Redis, not lost with a process), unless a worker already holds it. The wait is looked at again
# after one lease (``sweep_lost_waits``): a message a worker popped from the queue and died with
# before it could hold it is in no queue and held by no one. A step may wait in another queue than
# the one before it, so the key's records in the other queues (ARGV[6..]) go.
_EXTEND_WAIT = (
    _NOW_MS
    + """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
local now = now_ms()
redis.call('PEXPIRE', KEYS[1], ARGV[2])
redis.call('ZADD', KEYS[2], now + tonumber(ARGV[2]), ARGV[3])
for i = 6, #ARGV do redis.call('ZREM', KEYS[3], ARGV[i]) end
redis.call('ZADD', KEYS[3], now + tonumber(ARGV[5]), ARGV[4])
return 1
"""
)

# A waiting fence (``token#S.A``: neither held by a worker nor claimed by a running step) whose
# queue is empty after a lease has lost its message: no queue has it and no worker received it,
# or that worker would have marked it held. The lease is ended and the key handed back for a new
# pass; should the message still turn up, its claim finds the lease gone and it ends. While the
# queue is not empty the message may be waiting in it, so the key is looked at again a lease later.
# ARGV[3..] are pairs of queue name and depth; members are "QUEUE KEY".
_SWEEP_LOST_WAITS = (
    _NOW_MS
    + """
local now = now_ms()
local depth = {}
for i = 4, #ARGV, 2 do depth[ARGV[i]] = tonumber(ARGV[i + 1]) end
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, ARGV[1])
local out = {}
for _, member in ipairs(due) do
  local space = string.find(member, ' ', 1, true)
  local queue = string.sub(member, 1, space - 1)
  local key = string.sub(member, space + 1)
  local v = redis.call('GET', ARGV[2] .. key)
  if not v or not string.find(v, '#%d+%.%d+$') then
    redis.call('ZREM', KEYS[1], member)
  elseif (depth[queue] or 1) == 0 then
    redis.call('DEL', ARGV[2] .. key)
    redis.call('ZREM', KEYS[1], member)
    table.insert(out, key)
  else
    redis.call('ZADD', KEYS[1], now + tonumber(ARGV[3]), member)
  end
end
return out
"""
)

# A dirty key whose lock is gone (its holder died or lost the lease without releasing) is handed
# back for an enqueue; one whose lock is still held is looked at again when that lease ends.
# A pending mark (ARGV[3] .. key) says whether a message is on its way: one a worker holds
# ('~') is looked at again when the hold would run out; an unheld one ('1') while the entry queue
# holds messages (ARGV[4] > 0) may be behind them, and is looked at again a lease (ARGV[5]) later.
# An unheld mark with the queue empty, a lease after it was set, lost its message: it goes, and
# the key is handed back for an enqueue.
_SWEEP_ORPHANS = (
    _NOW_MS
    + """
local now = now_ms()
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, ARGV[1])
local backlog = tonumber(ARGV[4])
local out = {}
for _, member in ipairs(due) do
  local pttl = redis.call('PTTL', ARGV[2] .. member)
  local mark = false
  if pttl == -2 then mark = redis.call('GET', ARGV[3] .. member) end
  if mark == '~' then
    local held = math.max(redis.call('PTTL', ARGV[3] .. member), 0)
    redis.call('ZADD', KEYS[1], now + held + 1000, member)
  elseif mark and backlog > 0 then
    redis.call('ZADD', KEYS[1], now + tonumber(ARGV[5]), member)
  elseif pttl == -2 then
    if mark then redis.call('DEL', ARGV[3] .. member) end
    redis.call('ZREM', KEYS[1], member)
    table.insert(out, member)
  elseif pttl == -1 then
    redis.call('ZADD', KEYS[1], now + 1000, member)
  else
    redis.call('ZADD', KEYS[1], now + pttl, member)
  end
end
return out
"""
)

# Move up to ARGV[2] members due by ARGV[1] from the timetable into its claims set, scored with
# the claim time: a key leaves the timetable only into a place it is recovered from. Returns
# member, due time, member, due time, ...
_CLAIM_DUE = """
local found = redis.call(
  'ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'WITHSCORES', 'LIMIT', 0, ARGV[2])
for i = 1, #found, 2 do
  redis.call('ZREM', KEYS[1], found[i])
  redis.call('ZADD', KEYS[2], ARGV[1], found[i])
end
return found
"""

# Put claims back into the timetable (the earliest time wins against a come-back a pass wrote
# meanwhile): every claim older than ARGV[1] when there are no further ARGV, else the listed
# members.
_RETURN_CLAIMS = """
local members
if #ARGV > 1 then
  members = {}
  for i = 2, #ARGV do members[#members + 1] = ARGV[i] end
else
  members = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', ARGV[1])
end
local returned = 0
for _, member in ipairs(members) do
  local score = redis.call('ZSCORE', KEYS[2], member)
  if score then
    redis.call('ZADD', KEYS[1], 'LT', score, member)
    redis.call('ZREM', KEYS[2], member)
    returned = returned + 1
  end
end
return returned
"""


@dataclass(frozen=True, slots=True)
class Claimed:
    """A key claimed from a timetable, and when it was due there (epoch seconds)."""

    key: OrderKey
    due_at: float


class LeaseLostError(RuntimeError):
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


@dataclass(frozen=True, slots=True)
class WorkQueueKeys:
    """The Redis key names under one prefix."""

    prefix: str

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


class WorkQueue:
    """Redis primitives of the work queue for one key prefix."""

    def __init__(
        self,
        client: redis.Redis,
        publish: Publish,
        *,
        prefix: str = "tenantdb:",
        lock_ttl: float = 30.0,
        pending_ttl: int = 300,
    ) -> None:
        """Bind the primitives to a Redis client and a publisher.

        Args:
            client: a redis-py client; responses may be bytes or str.
            publish: sends the reconcile task for a key; called only for a newly set pending mark.
            prefix: prefix of every key written.
            lock_ttl: lease length in seconds.
            pending_ttl: life of a pending mark in seconds.
        """
        self.redis = client
        self.publish = publish
        self.keys = WorkQueueKeys(prefix)
        self.lock_ttl_ms = max(1, int(lock_ttl * 1000))
        self.pending_ttl = pending_ttl
        self.writer = uuid.uuid4().hex[:16]
        """Names this process's count of enqueues (``rolled_back``)."""
        self._writes_seen = 0
        self._lost: tuple[int, int] | None = None
        self._writes_lock = threading.Lock()
        self._enqueue = client.register_script(_ENQUEUE)
        self._begin = client.register_script(_BEGIN)
        self._acquire = client.register_script(_ACQUIRE)
        self._release = client.register_script(_RELEASE)
        self._extend = client.register_script(_EXTEND)
        self._hold = client.register_script(_HOLD)
        self._extend_wait = client.register_script(_EXTEND_WAIT)
        self._hold_pending = client.register_script(_HOLD_PENDING)
        self._mark_pending = client.register_script(_MARK_PENDING)
        self._unmark = client.register_script(_UNMARK)
        self._fence = client.register_script(_FENCE)
        self._sweep = client.register_script(_SWEEP_ORPHANS)
        self._sweep_waits = client.register_script(_SWEEP_LOST_WAITS)
        self._claim_due = client.register_script(_CLAIM_DUE)
        self._return_claims = client.register_script(_RETURN_CLAIMS)

    def load_scripts(self) -> None:
        """Load every script into Redis now, so the first call of each costs one round trip."""
        for script in (
            self._enqueue, self._begin, self._acquire, self._release, self._extend, self._hold,
            self._extend_wait, self._hold_pending, self._mark_pending, self._unmark, self._fence,
            self._sweep, self._sweep_waits, self._claim_due, self._return_claims,
        ):  # fmt: skip
            self.redis.script_load(script.script)

    # -- enqueue -------------------------------------------------------------------------------

    def enqueue(self, key: OrderKey, *, force: bool = False) -> bool:
        """Count an event for ``key`` and publish a reconcile unless one is pending or running.

        Args:
            key: the order.
            force: publish even when a pass is pending (the mark is set all the same); a running
                pass asks for the next one itself.

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
                    self.pending_ttl,
                    SEQUENCE_TTL,
                    "1" if force else "0",
                    str(key),
                    self.lock_ttl_ms,
                    WRITES_TTL,
                ],
            )
            self._count_write(int(writes))
        found = int(answer)
        if found == 1:
            self._publish_or_unmark(key)
        elif found == 0 and force:
            self.publish(key)
        return found == 1 or (found == 0 and force)

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
            now = int(_text(self.redis.get(count) or "0"))
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

    def retry_later(self, key: OrderKey, wait: float) -> None:
        """Drop the key's pending mark and have the sweep enqueue it in ``wait`` seconds.

        For a message that could not be published: without it the mark would only keep every
        event from publishing until it ran out.
        """
        self._unmark(
            keys=[self.keys.pending(key), self.keys.dirty],
            args=[max(1, int(wait * 1000)), str(key), "1"],
        )

    def is_pending(self, key: OrderKey) -> bool:
        """Whether a reconcile of the key is queued and not yet started."""
        return bool(self.redis.exists(self.keys.pending(key)))

    # -- lock ----------------------------------------------------------------------------------

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
        value = _text(self.redis.get(self.keys.lock(key)) or "")
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

    def save_note(self, lease: Lease, note: str, ttl_ms: int) -> None:
        """Leave ``note`` (never a credential) for the chain steps of the pass ``lease`` holds."""
        self.redis.set(self.keys.note(lease.key), f"{lease.token}\n{note}", px=ttl_ms)

    def load_note(self, lease: Lease) -> str | None:
        """The note the pass ``lease`` belongs to left; None when it is gone or another's."""
        value = self.redis.get(self.keys.note(lease.key))
        token, _, note = _text(value or "").partition("\n")
        return note if value is not None and token == lease.token else None

    def note_written(self, cluster: str, obj: Mapping[str, Any], ttl_ms: int) -> None:
        """Remember the resourceVersion a write of tenantdb's left an object at, for a while.

        The watch event that write causes then names no order (``is_own_write``): a pass's own
        writes do not wake its order again.
        """
        meta = obj.get("metadata") or {}
        version = meta.get("resourceVersion")
        if not version:
            return
        key = self.keys.written(
            cluster, str(obj.get("kind", "")), str(meta.get("namespace", "")), str(meta["name"])
        )
        self.redis.set(key, str(version), px=ttl_ms)

    def is_own_write(self, cluster: str, obj: Mapping[str, Any]) -> bool:
        """Whether an object is exactly as tenantdb's own last write of it left it."""
        meta = obj.get("metadata") or {}
        version = meta.get("resourceVersion")
        if not version:
            return False
        key = self.keys.written(
            cluster, str(obj.get("kind", "")), str(meta.get("namespace", "")), str(meta.get("name"))
        )
        return _text(self.redis.get(key)) == str(version)

    def claim_period(self, name: str, key: OrderKey, period_ms: int) -> bool:
        """Whether the periodic work ``name`` of an order is due; claim it for a period if so.

        A claim lasts ``period_ms``; ``release_period`` gives it back early (the work failed).
        """
        return bool(self.redis.set(self.keys.period(name, key), "1", nx=True, px=period_ms))

    def release_period(self, name: str, key: OrderKey) -> None:
        """Give back a claim of ``claim_period``: the work is due again at once."""
        self.redis.delete(self.keys.period(name, key))

    def take_period(self, name: str, key: OrderKey) -> bool:
        """Whether a claim of ``claim_period`` was held; give it back in the same call.

        For a one-off flag an order's next pass must act on (and clear).
        """
        return bool(self.redis.delete(self.keys.period(name, key)))

    def holds(self, lease: Lease) -> bool:
        """Whether the lease is still ours, without renewing it."""
        value = self.redis.get(self.keys.lock(lease.key))
        return _text(value) == lease.value

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
        at, reason = self.redis.hmget(self.keys.last_pass(key), ["at", "result"])
        return None if at is None else (float(at), _text(reason))

    def is_locked(self, key: OrderKey) -> bool:
        """Whether some pass holds the key's lock."""
        return bool(self.redis.exists(self.keys.lock(key)))

    def release(
        self, lease: Lease, *, completed: bool = True, retry_in: float | None = None
    ) -> Release:
        """Release the lease; enqueue the key again when events arrived during the pass.

        Args:
            lease: the lease to release.
            completed: whether the pass finished; only a finished pass covers the events it saw.
            retry_in: for a pass that failed, when its retry is due (seconds): the key stays
                dirty until then, so the sweep brings the pass should the retry's message never
                be published. Without it the release removes the key's dirty mark.
        """
        retry_ms = 0 if retry_in is None else max(1, int(retry_in * 1000))
        found = int(
            self._release(
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
                ],
            )
        )
        if found < 0:
            return Release.LOST
        if found == 0:
            return Release.CLEAN
        if found == 2:  # the script newly set the pending mark
            self._publish_or_unmark(lease.key)
        return Release.DIRTY

    def request_pass(self, key: OrderKey) -> bool:
        """Ask for another pass, for work a pass did not finish; counted as an event.

        A lost lease or a killed holder leaves work no completed pass covers. Counting it as an
        event makes sure the next pass runs even when the counters are gone (Redis lost its data,
        so the next ``begin`` would otherwise find nothing uncovered and end as stale), and a pass
        holding the key now asks for the next one itself when it releases. Returns whether a task
        was published.
        """
        return self.enqueue(key)

    def _publish_or_unmark(self, key: OrderKey) -> None:
        try:
            self.publish(key)
        except BaseException:
            self.retry_later(key, PUBLISH_RETRY_SECONDS)
            raise

    @contextmanager
    def heartbeat(self, lease: Lease, interval: float | None = None) -> Iterator[Heartbeat]:
        """Extend the lease in the background while the body runs."""
        beat = Heartbeat(self, lease, interval or self.lock_ttl_ms / 3000)
        with beat:
            yield beat

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
        found = [OrderKey.parse(_text(m)) for m in members]
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
        found = [OrderKey.parse(_text(m)) for m in members]
        self._request_passes(found)
        return found

    # -- due-set -------------------------------------------------------------------------------

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
            Claimed(OrderKey.parse(_text(member)), float(score) / 1000)
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
        return [OrderKey.parse(_text(m)) for m in members]

    def pending_count(self) -> int:
        """How many keys carry a pending mark (a scan: call it seldom)."""
        return sum(
            1 for _ in self.redis.scan_iter(match=f"{self.keys.prefix}pending:*", count=1000)
        )

    def queue_depth(self, queue: str) -> int:
        """Messages waiting in one broker queue (kombu keeps each queue as a list)."""
        return int(self.redis.llen(f"{self.keys.prefix}{queue}"))

    def due_count(self, table: Timetable = Timetable.DUE) -> int:
        """How many keys the timetable holds."""
        return int(self.redis.zcard(self.keys.timetable(table)))

    def forget(self, key: OrderKey) -> None:
        """Drop the key from both timetables (its order is gone)."""
        pipe = self.redis.pipeline()
        for table in Timetable:
            pipe.zrem(self.keys.timetable(table), str(key))
        pipe.execute()


class Heartbeat:
    """Keeps a lease alive from a daemon thread and guards writes against a lost lease."""

    def __init__(self, queue: WorkQueue, lease: Lease, interval: float) -> None:
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


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
