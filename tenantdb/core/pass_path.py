"""Which path a pass over an order takes: one pure function for every kind.

The flow every pass follows: the order is gone, or deleting but no longer ours, and there is
nothing to do; it is deleting and holds the kind's finalizer, and the teardown runs; otherwise
the kind's gates run. They may ask for the finalizer, which the pass adds before running them
again on the order as written; a gate may stop the pass, which records why; or the kind plans
its steps. A plan with a write runs as a chain of the steps that write; one without is up to
date (the leg converged: the pass ends where it observed) or waiting (nothing to do until the
world moves; record and come back).

The entry calls ``decide_path`` each time it has learnt more, and acts on the answer.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from tenantdb.core.objects import ObjectMeta


class PassPath(StrEnum):
    """What a pass does next; the values are the ``path`` label of the passes metric."""

    QUIET = "quiet"
    """A refresh the watches vouch for: only what no watch sees was checked
    (``tenantdb.core.quiet``)."""
    GONE = "gone"
    """The order does not exist (any more)."""
    RELEASED = "released"
    """The order is deleting and tenantdb's finalizer is already gone."""
    UNREADABLE = "unreadable"
    """The order's own body does not parse: say so on it, and do nothing else."""
    TEARDOWN = "teardown"
    """The order is deleting and holds the finalizer: remove its children."""
    ADMIT = "admit"
    """The order is live: run the kind's gates."""
    ADD_FINALIZER = "finalizer"
    """Add the finalizer, then run the gates again on the order as written."""
    GATED = "gated"
    """A gate stops the pass: record its conditions."""
    PLAN = "plan"
    """The gates let the pass go on: observe the children and plan."""
    WAITING = "waiting"
    """Nothing to write and the leg has not converged: record and come back."""
    UP_TO_DATE = "converged"
    """Nothing to write and the leg converged: the pass ends where it observed."""
    CHAIN = "provision"
    """Something to write: hand the steps with a write to a chain."""


@dataclass(frozen=True, slots=True)
class Verdict:
    """The gates' answer, as the flow needs it."""

    add_finalizer: bool
    proceed: bool


@dataclass(frozen=True, slots=True)
class PassFacts:
    """What the entry knows so far; None marks what it has not learnt yet."""

    found: bool
    deleting: bool = False
    holds_finalizer: bool = False
    verdict: Verdict | None = None
    steps: tuple[str, ...] | None = None
    converged: bool = False


def observe_order(meta: ObjectMeta | None, finalizer: str) -> PassFacts:
    """The facts an order's metadata gives (None: the order was not found)."""
    if meta is None:
        return PassFacts(found=False)
    return PassFacts(
        found=True,
        deleting=meta.deletion_timestamp is not None,
        holds_finalizer=finalizer in meta.finalizers,
    )


def decide_path(facts: PassFacts) -> PassPath:
    """The next thing a pass does, given what its entry has observed."""
    if not facts.found:
        return PassPath.GONE
    if facts.deleting:
        return PassPath.TEARDOWN if facts.holds_finalizer else PassPath.RELEASED
    if facts.verdict is None:
        return PassPath.ADMIT
    if facts.verdict.add_finalizer and not facts.holds_finalizer:
        return PassPath.ADD_FINALIZER
    if not facts.verdict.proceed:
        return PassPath.GATED
    if facts.steps is None:
        return PassPath.PLAN
    if facts.steps:
        return PassPath.CHAIN
    return PassPath.UP_TO_DATE if facts.converged else PassPath.WAITING
