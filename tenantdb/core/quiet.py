"""Whether a refresh may skip the reads the watches vouch for: the quiet refresh.

Every order comes back on a periodic refresh (``tenantdb.core.schedule``), and a full pass reads
every object its kind decides on from the API server. For a converged order, nearly all of those
reads only confirm what the watches already say: the watcher enqueues the order on any change of
an object its pass reads. So a converged pass leaves a basis behind: how many events the watcher
had counted for the order when the pass began (``touched``), which watcher term vouched for
them (the watcher's leader token), and when. A later refresh is quiet when:

* the basis is there: the last full pass converged (any other pass forgets it);
* no event was counted for the order since that pass began, so nothing it read has changed
  since (a refresh's own enqueue is not counted as one);
* the watcher that led then still leads: a new term relists, and while no watcher leads, changes
  go unseen;
* the basis is younger than the full-refresh period, so every order is still read in full now
  and then (``TENANTDB_FULL_REFRESH_SECONDS``; 0 turns quiet refreshes off).

A quiet refresh checks only what no watch can see (for MariaDBDatabase, the OpenBao role), and
falls back to a full pass when that check does not confirm the order. Pure.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


@dataclass(frozen=True, slots=True)
class QuietBasis:
    """What a converged full pass vouches for: the order's event count when it began, the
    watcher term it was read under, and when it ended (epoch seconds)."""

    touched: int
    leader: str
    at: float


@dataclass(frozen=True, slots=True)
class QuietLook:
    """What a pass finds before it reads anything: the order's event count now, the watcher's
    leader token now (None: no watcher leads), and the basis (None: none)."""

    touched: int
    leader: str | None
    basis: QuietBasis | None = None


class QuietVerdict(StrEnum):
    """Why a pass is quiet, or why it reads in full."""

    QUIET = "quiet"
    OFF = "off"
    NO_BASIS = "no_basis"
    TOUCHED = "touched"
    NO_WATCHER = "no_watcher"
    NEW_TERM = "new_term"
    AGED = "aged"


def decide_quiet(look: QuietLook, *, now: float, full_every: float) -> QuietVerdict:
    """Whether a refresh may be quiet (``QUIET``), or the first reason it may not.

    ``full_every`` is the full-refresh period in seconds; 0 or less turns quiet refreshes off.
    """
    if full_every <= 0:
        return QuietVerdict.OFF
    basis = look.basis
    if basis is None:
        return QuietVerdict.NO_BASIS
    if look.touched != basis.touched:
        return QuietVerdict.TOUCHED
    if look.leader is None:
        return QuietVerdict.NO_WATCHER
    if look.leader != basis.leader:
        return QuietVerdict.NEW_TERM
    if not 0 <= now - basis.at < full_every:
        return QuietVerdict.AGED
    return QuietVerdict.QUIET


def may_record_basis(look: QuietLook, *, full_every: float) -> bool:
    """Whether a converged pass leaves a basis: quiet refreshes are on and a watcher led when
    it began (without one, nothing vouches for what it read)."""
    return full_every > 0 and look.leader is not None
