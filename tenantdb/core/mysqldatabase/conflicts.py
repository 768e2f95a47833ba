"""Two MysqlDatabases on one group must not share a schema or an owner: the older one wins.

An order outranks another when it was created strictly earlier, or in the same second under a
lexicographically smaller name; both sides compute the same answer, so exactly one of a pair
refuses. Only live peers on the same group that outrank the order are checked, in the order
given, and the first hit decides: the same schema (names that differ only in case are the
same: ``validation.schema_key``), the same owner Secret, or the same owner
user (the peer's recorded status.ownerUser, else the username its Secret names; a peer whose
owner cannot be known yet defers the order). The refusal comes before anything is written, so
the refused order never records that it created anything. Pure.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from tenantdb.core.mysqldatabase.reasons import (
    Phase,
    Reason,
    msg_database_name_conflict,
    msg_owner_secret_shared,
    msg_owner_user_taken,
    msg_peer_owner_secret_missing,
)
from tenantdb.core.mysqldatabase.validation import schema_key


@dataclass(frozen=True, slots=True)
class Claim:
    """What one MysqlDatabase claims on its group, as the conflict check compares it."""

    name: str
    created: datetime
    group: str
    database_name: str
    owner_secret: str
    owner_user: str | None = None
    """status.ownerUser, else the username of the owner Secret; None when neither is known."""
    deleting: bool = False


@dataclass(frozen=True, slots=True)
class Conflict:
    """Why the order may not go on, and in which phase it waits."""

    phase: Phase
    reason: Reason
    message: str


def outranks(a: Claim, b: Claim) -> bool:
    """Whether ``a`` wins over ``b``: created earlier, or in the same second with a smaller name."""
    return a.created < b.created or (a.created == b.created and a.name < b.name)


def find_conflict(me: Claim, peers: Iterable[Claim]) -> Conflict | None:
    """The first conflict with an older live peer on the same group, or None."""
    for peer in peers:
        if peer.name == me.name or peer.deleting or peer.group != me.group:
            continue
        if not outranks(peer, me):
            continue
        if schema_key(peer.database_name) == schema_key(me.database_name):
            message = msg_database_name_conflict(peer.name, me.database_name, me.group)
            return Conflict(Phase.FAILED, Reason.DATABASE_NAME_CONFLICT, message)
        if peer.owner_secret == me.owner_secret:
            message = msg_owner_secret_shared(peer.name, me.owner_secret, me.group)
            return Conflict(Phase.FAILED, Reason.OWNER_CONFLICT, message)
        if peer.owner_user is None:
            message = msg_peer_owner_secret_missing(peer.name, peer.owner_secret)
            return Conflict(Phase.PENDING, Reason.PEER_OWNER_SECRET_MISSING, message)
        if me.owner_user is not None and peer.owner_user == me.owner_user:
            message = msg_owner_user_taken(peer.name, me.owner_user, me.group)
            return Conflict(Phase.FAILED, Reason.OWNER_CONFLICT, message)
    return None
