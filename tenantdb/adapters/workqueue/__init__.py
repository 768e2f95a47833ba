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
* Every enqueue but a periodic refresh's also counts a touch of the key; a converged pass leaves
  the count it began with as the basis of the key's quiet refreshes (``record_quiet``), and a
  refresh that finds the count unchanged, under the same watcher term, may trust the watches
  for everything they see (``tenantdb.core.quiet``).
* A periodic refresh is published at the lowest priority and its pending mark says so ('r'):
  workers take every event's pass and every chain step first, so a fleet's refreshes never hold
  up a new order. An event that finds a refresh's message waiting (its mark 'r', not yet held)
  publishes its own at the highest priority; the refresh's message then ends as stale or runs
  the pass later events ask for. A refresh's mark lives an hour at least
  (``REFRESH_MARK_SECONDS``), so a refresh long behind others is not taken for lost.
* Two timetables hold "come back at T" per key (the earliest time wins) and pop due keys exactly
  once, in batches: the due-set for short waits and the refresh set for periodic refreshes.

Every key lives under a configurable prefix. The scripts build lock key names from the prefix, so
they need a single Redis (or Sentinel), not Redis Cluster.

The package never decides anything about an order and never logs anything but order keys. Its
parts: ``queueing`` (enqueue and the sweeps), ``leasing`` (leases, fences, the heartbeat),
``timetables`` (come-backs and periodic claims), ``notes`` (a pass's note, tenantdb's own
writes) and ``quiet`` (the bases of quiet refreshes), over ``base`` (the client, ``keys``, and
the Lua scripts of ``lua/``, loaded by ``scripts.source``). ``WorkQueue`` is all of them in one
object.
"""

from __future__ import annotations

from tenantdb.adapters.workqueue.base import (
    PUBLISH_RETRY_SECONDS,
    SEQUENCE_TTL,
    WRITES_TTL,
    Publish,
    PublishLater,
    Spacing,
)
from tenantdb.adapters.workqueue.keys import (
    EVENT_PRIORITY,
    PRIORITY_STEPS,
    REFRESH_PRIORITY,
    WorkQueueKeys,
)
from tenantdb.adapters.workqueue.leasing import (
    Claim,
    Heartbeat,
    Lease,
    LeaseLostError,
    Leasing,
    Release,
    Start,
    pass_name,
    ready_fence,
)
from tenantdb.adapters.workqueue.notes import NoteKeysMissingError, NoteRefusedError, Notes
from tenantdb.adapters.workqueue.queueing import Queueing
from tenantdb.adapters.workqueue.quiet import Quieting
from tenantdb.adapters.workqueue.timetables import Claimed, Timetables

__all__ = [
    "EVENT_PRIORITY",
    "PRIORITY_STEPS",
    "PUBLISH_RETRY_SECONDS",
    "REFRESH_PRIORITY",
    "SEQUENCE_TTL",
    "WRITES_TTL",
    "Claim",
    "Claimed",
    "Heartbeat",
    "Lease",
    "LeaseLostError",
    "NoteKeysMissingError",
    "NoteRefusedError",
    "Publish",
    "PublishLater",
    "Release",
    "Spacing",
    "Start",
    "WorkQueue",
    "WorkQueueKeys",
    "pass_name",
    "ready_fence",
]


class WorkQueue(Queueing, Leasing, Timetables, Notes, Quieting):
    """Redis primitives of the work queue for one key prefix: every part over one client."""
