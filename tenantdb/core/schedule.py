"""When an order comes back: the short waits, the periodic refreshes, and their sweep rate.

A pass ends with "come back after" (1 s, 10 s, 1 min, 10 min, or never). Short waits go to the
due-set, which beat sweeps exactly on time. Refreshes (10 minutes and more) and tenantdb's own
jittered resync of every known order go to the refresh set, which beat sweeps at a capped rate:
just above the mean rate the set's size and cycle imply, so a crowd of refreshes that fell due
together (after a restart, say) is spread over the cycle instead of arriving as one burst, and stays
spread because each refresh is rescheduled from the time it actually ran.

Pure: ``now`` and randomness come in as arguments.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum

REFRESH_THRESHOLD_SECONDS = 300.0
"""Waits at least this long are refreshes, swept at a capped rate."""

RESYNC_JITTER = 0.1
"""A resync lands up to this fraction of its period later, chosen at random per pass."""

RATE_HEADROOM = 1.25
"""The refresh sweep may run this much above the mean rate, to catch up on a backlog."""


class Timetable(StrEnum):
    """The two sorted sets of "come back at T"."""

    DUE = "due"
    REFRESH = "refresh"


@dataclass(frozen=True, slots=True)
class Comeback:
    """One entry to write: the key comes back at epoch seconds ``at`` through ``table``."""

    table: Timetable
    at: float


def plan_comebacks(
    requeue_after: float | None, *, now: float, resync_seconds: float, jitter: float
) -> tuple[Comeback, ...]:
    """Turn a pass's "come back after" and the resync period into timetable entries.

    Args:
        requeue_after: what the pass asked for, in seconds; None for "wait for an event".
        now: the current epoch time.
        resync_seconds: tenantdb's periodic resync of every known order; 0 disables it.
        jitter: a random number in [0, 1) that spreads the resyncs of many orders.
    """
    entries: list[Comeback] = []
    if requeue_after is not None:
        table = Timetable.DUE if requeue_after < REFRESH_THRESHOLD_SECONDS else Timetable.REFRESH
        entries.append(Comeback(table, now + requeue_after))
    if resync_seconds > 0:
        spread = resync_seconds * RESYNC_JITTER * min(max(jitter, 0.0), 1.0)
        entries.append(Comeback(Timetable.REFRESH, now + resync_seconds + spread))
    return tuple(entries)


def compute_timetable(comebacks: tuple[Comeback, ...]) -> dict[Timetable, float | None]:
    """The key's whole timetable after a completed pass: the earliest entry per table, or None.

    A pass that saw the order through knows when it must come back; a come-back an earlier pass
    asked for (waiting for a child that is Ready by now, say) would only cost a pass that finds
    nothing to do, so the completed pass's timetable replaces it.
    """
    out: dict[Timetable, float | None] = dict.fromkeys(Timetable)
    for comeback in comebacks:
        current = out[comeback.table]
        out[comeback.table] = comeback.at if current is None else min(current, comeback.at)
    return out


def compute_refresh_cap(waiting: int, cycle_seconds: float, interval_seconds: float) -> int:
    """How many refreshes one sweep may enqueue: a little above the mean rate, never zero.

    Args:
        waiting: how many keys the refresh set holds.
        cycle_seconds: the refresh cycle the keys are spread over.
        interval_seconds: the time between two sweeps.
    """
    mean_per_sweep = waiting / cycle_seconds * interval_seconds
    return max(1, math.ceil(mean_per_sweep * RATE_HEADROOM))
