"""Which path a pass over an order takes, decided from what its entry observed. Pure.

The flow every pass follows: the order is gone, or deleting but no longer ours, and there is
nothing to do; it is deleting and holds the finalizer, and the teardown runs; it still needs the
finalizer, which the pass adds before it goes on; a gate stops it; it is up to date (nothing to
write: the pass ends where it observed, delivering from there when the leg converged); or it has
writes, and a chain of the steps with a write runs them.
"""

from __future__ import annotations

from enum import StrEnum

from tenantdb.core.mariadbdatabase.gates import AdmissionDecision
from tenantdb.core.mariadbdatabase.models import MariaDBDatabase
from tenantdb.core.mariadbdatabase.teardown import is_deleting, should_tear_down


class OrderPath(StrEnum):
    """What a pass does with an order, before any child is read."""

    GONE = "gone"
    """The order does not exist (any more)."""
    RELEASED = "released"
    """The order is deleting and tenantdb's finalizer is already gone."""
    TEARDOWN = "teardown"
    """The order is deleting and holds the finalizer: remove its children."""
    ADMIT = "admit"
    """The order is live: run the gates."""


class LegPath(StrEnum):
    """Where a live order's pass goes once the gates and the provision plan are known."""

    ADD_FINALIZER = "finalizer"
    """Add the finalizer, then run the gates again on the order as written."""
    GATED = "gated"
    """A gate stops the pass: record its conditions."""
    WAITING = "waiting"
    """Nothing to write and the leg has not converged: record and come back."""
    UP_TO_DATE = "converged"
    """Nothing to write and the leg converged: deliver (or see the delivery is in place)."""
    CHAIN = "provision"
    """Something to write: hand the steps with a write to a chain."""


def classify_order(order: MariaDBDatabase | None) -> OrderPath:
    """The path of a pass over ``order`` as read (None: not found)."""
    if order is None:
        return OrderPath.GONE
    if is_deleting(order):
        return OrderPath.TEARDOWN if should_tear_down(order) else OrderPath.RELEASED
    return OrderPath.ADMIT


def classify_admission(admission: AdmissionDecision) -> LegPath | None:
    """The gates' part of the path: add the finalizer, stop, or None to go on and plan."""
    if admission.add_finalizer:
        return LegPath.ADD_FINALIZER
    return None if admission.outcome.proceed else LegPath.GATED


def classify_plan(steps: tuple[str, ...], converged: bool) -> LegPath:
    """The plan's part: a chain when any step has a write, else up to date or waiting."""
    if steps:
        return LegPath.CHAIN
    return LegPath.UP_TO_DATE if converged else LegPath.WAITING
