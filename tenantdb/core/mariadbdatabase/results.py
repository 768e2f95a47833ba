"""When a MariaDBDatabase comes back: the step outcome and the pass result.

Owns the requeue intervals of the contract (next pass 1 s, short 10 s, assignment 1 min,
refresh 10 min), the outcome a gate or leg returns, and the rule that turns a leg's result
into the pass result: an explicit requeue stands; else a delivered order on the management
cluster waits for events; else it comes back after 10 minutes. It must never schedule anything:
the engine puts the result in its due-set.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from tenantdb.core.actions import LogEvent
from tenantdb.core.mariadbdatabase.conditions import ConditionUpdate
from tenantdb.core.mariadbdatabase.naming import MANAGEMENT_CLUSTER

REQUEUE_NEXT_PASS = timedelta(seconds=1)
REQUEUE_SHORT = timedelta(seconds=10)
REQUEUE_ASSIGNMENT = timedelta(minutes=1)
ORDER_REFRESH_AFTER = timedelta(minutes=10)


@dataclass(frozen=True)
class PassResult:
    """What the engine does after a pass.

    `requeue_after` None means: wait for an event. `error` set means the pass failed: the
    engine backs off, counts the error, and logs this text (it never holds a secret).
    """

    requeue_after: timedelta | None = None
    error: str | None = None

    def requeue_seconds(self) -> float | None:
        """When the order comes back, in seconds (None: on an event), as a task result says it."""
        return None if self.requeue_after is None else self.requeue_after.total_seconds()


NO_REQUEUE = PassResult()


@dataclass(frozen=True)
class Unreadable:
    """An object a pass read that does not parse: what it is, and which fields fail and why."""

    what: str
    detail: str


@dataclass(frozen=True)
class StepOutcome:
    """The result of a gate or a leg.

    `conditions` are written in order. `requeue_after` None is the zero result, which the pass
    result rule resolves. `error` ends the pass with a back-off. `proceed` is True only for a
    gate that lets the pass go on, or a leg that converged.
    """

    conditions: tuple[ConditionUpdate, ...] = ()
    requeue_after: timedelta | None = None
    error: str | None = None
    proceed: bool = False
    logs: tuple[LogEvent, ...] = ()


def compute_pass_result(outcome: StepOutcome, *, cluster: str, delivery_ready: bool) -> PassResult:
    """Turn the deciding leg's outcome into the pass result (`orderPassResult`).

    `delivery_ready` is DeliveryReady after this pass's updates.
    """
    if outcome.error is not None:
        return PassResult(error=outcome.error)
    if outcome.requeue_after is not None:
        return PassResult(requeue_after=outcome.requeue_after)
    if cluster == MANAGEMENT_CLUSTER and delivery_ready:
        return NO_REQUEUE
    return PassResult(requeue_after=ORDER_REFRESH_AFTER)
