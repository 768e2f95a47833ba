"""What deleting a MysqlDatabase removes: only what it created and no other order still needs.

The order of the checks is the contract: a policy other than exactly Delete retains everything
(no connection is opened); an order that never applied anything drops nothing; a group that is
gone has nothing to connect to, so the finalizer goes with a warning; a group without an active
site, a fenced group or an unreadable reserved set defers the drop (never skips it). Past those,
the schema is dropped unless a live sibling still declares it, and each owner account the order
recorded (status.ownerUser, status.pendingOwnerUser) is dropped unless it is reserved or a
sibling still claims it (as its owner Secret, its owner user, or in its grants). A grants[]
principal is never dropped: it is revoked on the schema only. Pure.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum

from tenantdb.core.events import Event, EventType
from tenantdb.core.mysqldatabase.group import Fence


class TeardownStep(StrEnum):
    """What the deleting pass does."""

    RELEASE = "release"
    """Remove the finalizer without touching MySQL."""
    DEFER = "defer"
    """Keep the finalizer and come back: the drop cannot run now."""
    DROP = "drop"
    """Connect to the primary, run the revokes and drops, then release."""


@dataclass(frozen=True, slots=True)
class Sibling:
    """Another MysqlDatabase on the same group, as far as a drop must respect it."""

    name: str
    database_name: str
    owner_secret: str
    owner_user: str | None
    grants: frozenset[str] = frozenset()
    deleting: bool = False
    pending_owner_user: str | None = None
    """The owner a rotation of the sibling is creating (status.pendingOwnerUser)."""
    secret_user: str | None = None
    """The username the sibling's owner Secret names, read when it has recorded no owner yet:
    the account it is about to create or take."""

    def claims(self, username: str) -> bool:
        """Whether the sibling owns, is about to own, or is rotating to ``username``."""
        return username in (self.owner_user, self.pending_owner_user, self.secret_user)


@dataclass(frozen=True, slots=True)
class TeardownObservation:
    """What the deleting pass knows: the order's records, its group and its siblings."""

    policy: str
    database_name: str
    database_created: bool
    owner_user: str
    pending_owner_user: str
    owner_secret: str
    grants: tuple[str, ...]
    """The grants[] usernames of the spec and of status.appliedGrants, owner left out."""
    group_present: bool
    group: str
    active_site: str
    fence: Fence | None
    reserved: frozenset[str] | None
    """The group's reserved usernames; None when they could not be read."""
    siblings: tuple[Sibling, ...] = ()


@dataclass(frozen=True, slots=True)
class TeardownPlan:
    """The deleting pass's decision."""

    step: TeardownStep
    events: tuple[Event, ...] = ()
    database: str = ""
    """The schema the drop is about."""
    drop_database: bool = False
    revoke: tuple[str, ...] = ()
    """Accounts whose privileges on the schema are revoked before it is dropped."""
    revoke_patterns: tuple[str, ...] = ()
    """Accounts whose grants under the schema's unescaped name are revoked: a pattern that
    matches other schemas too (``_`` is LIKE's any character), which an earlier version wrote.
    A retained schema keeps its exact grants; these would outlive it and match schemas made
    later."""
    drop_users: tuple[str, ...] = ()
    stamp_deleting: bool = False
    """Whether the order's status says Deleting before MySQL is touched."""


def _warn(reason: str, message: str) -> Event:
    return Event(EventType.WARNING, reason, message)


def plan_teardown(obs: TeardownObservation) -> TeardownPlan:
    """Decide what deleting the order does; the first check that applies wins."""
    db, group = obs.database_name, obs.group
    if obs.policy != "Delete":
        return _plan_retain(obs)
    if not obs.database_created:
        message = (
            f'deletionPolicy=Delete: this CR never applied any DDL for database "{db}";'
            " nothing to drop"
        )
        return TeardownPlan(
            TeardownStep.RELEASE, (Event(EventType.NORMAL, "DatabaseDropSkipped", message),)
        )
    if not obs.group_present:
        message = f'MysqlFailoverGroup "{group}" is gone; cannot drop database "{db}"'
        return TeardownPlan(
            TeardownStep.RELEASE, (_warn("DatabaseCleanupSkipped", message),), stamp_deleting=True
        )
    deferred = _deferral(obs)
    if deferred is not None:
        return TeardownPlan(
            TeardownStep.DEFER, (_warn("DatabaseDropDeferred", deferred),), stamp_deleting=True
        )
    return _plan_drop(obs)


def _plan_retain(obs: TeardownObservation) -> TeardownPlan:
    """Leave the schema and its accounts, but revoke the grants under its name read as a
    pattern, when an earlier version may have written any (a name with ``_``, on a group that
    can be reached); those would reach schemas created later."""
    db = obs.database_name
    message = (
        f'deletionPolicy=Retain: database "{db}" and user "{obs.owner_user}" left untouched'
        " in MySQL"
    )
    principals = _unique(u for u in (obs.owner_user, obs.pending_owner_user, *obs.grants) if u)
    retained = Event(EventType.NORMAL, "DatabaseRetained", message)
    if "_" not in db or not principals or not obs.database_created or not obs.group_present:
        return TeardownPlan(TeardownStep.RELEASE, (retained,))
    deferred = _deferral(obs)
    if deferred is not None:
        return TeardownPlan(
            TeardownStep.DEFER, (_warn("DatabaseDropDeferred", deferred),), stamp_deleting=True
        )
    return TeardownPlan(
        TeardownStep.DROP,
        (retained,),
        database=db,
        revoke_patterns=principals,
        stamp_deleting=True,
    )


def _deferral(obs: TeardownObservation) -> str | None:
    db, group = obs.database_name, obs.group
    if not obs.active_site:
        return f'group "{group}" has no active site; deferring DROP of database "{db}"'
    if obs.fence is not None:
        return f'{obs.fence.message}; deferring DROP of database "{db}"'
    if obs.reserved is None:
        return f'the reserved usernames of group "{group}" cannot be read; deferring DROP'
    return None


def _plan_drop(obs: TeardownObservation) -> TeardownPlan:
    live = [s for s in obs.siblings if not s.deleting]
    events: list[Event] = []
    drop_database = True
    holder = next((s for s in live if s.database_name == obs.database_name), None)
    if holder is not None:
        drop_database = False
        events.append(
            _warn(
                "DatabaseDropSkipped",
                f'MysqlDatabase "{holder.name}" still declares database "{obs.database_name}";'
                " the database is left",
            )
        )
    owners = _unique(u for u in (obs.owner_user, obs.pending_owner_user) if u)
    drop_users: list[str] = []
    for owner in owners:
        veto = _owner_veto(obs, owner, live)
        if veto is None:
            drop_users.append(owner)
        else:
            events.append(veto)
    revoke = _unique([*obs.grants, *owners]) if drop_database else ()
    if not drop_database and not drop_users:
        return TeardownPlan(TeardownStep.RELEASE, tuple(events), stamp_deleting=True)
    return TeardownPlan(
        TeardownStep.DROP,
        tuple(events),
        database=obs.database_name,
        drop_database=drop_database,
        revoke=revoke,
        drop_users=tuple(drop_users),
        stamp_deleting=True,
    )


def _owner_veto(obs: TeardownObservation, owner: str, live: list[Sibling]) -> Event | None:
    if obs.reserved is not None and owner in obs.reserved:
        return _warn(
            "OwnerUserReservedSkipped",
            f'owner user "{owner}" is now a credential of group "{obs.group}"; it is not dropped',
        )
    for sibling in live:
        if sibling.owner_secret == obs.owner_secret or sibling.claims(owner):
            return _warn(
                "DatabaseDropSkipped",
                f'MysqlDatabase "{sibling.name}" still claims owner user "{owner}"; it is not'
                " dropped",
            )
        if owner in sibling.grants:
            return _warn(
                "OwnerUserDropSkipped",
                f'MysqlDatabase "{sibling.name}" still grants to user "{owner}"; it is not dropped',
            )
    return None


def _unique(names: Iterable[str]) -> tuple[str, ...]:
    seen: dict[str, None] = {}
    for name in names:
        seen.setdefault(name, None)
    return tuple(seen)


@dataclass(frozen=True, slots=True)
class AfterDrop:
    """What a drop that ran records, from a second look at the group: the events, and whether
    the finalizer is released or the drop verified again on the group's new primary."""

    events: tuple[Event, ...]
    release: bool


def plan_after_drop(plan: TeardownPlan, site: str, active_site: str | None) -> AfterDrop:
    """Judge a drop that ran on ``site`` by the group read after it.

    Args:
        plan: the drop's plan.
        site: the site the statements ran on.
        active_site: the group's active site after the drop; None when the group is gone.
    """
    if active_site is None:
        message = (
            f'MysqlFailoverGroup disappeared during the DROP of database "{plan.database}";'
            " releasing the finalizer"
        )
        return AfterDrop((*plan.events, _warn("DatabaseCleanupSkipped", message)), True)
    if active_site != site:
        message = (
            f"the group's active site moved from {site} to {active_site} during the DROP;"
            " re-verifying"
        )
        return AfterDrop((_warn("DatabaseDropDeferred", message),), False)
    if not plan.drop_database and not plan.drop_users:
        return AfterDrop(plan.events, True)  # retained: only pattern grants were revoked
    return AfterDrop((*plan.events, dropped_event(plan, site)), True)


def dropped_event(plan: TeardownPlan, site: str) -> Event:
    """The Event of a drop that ran: what it dropped, and on which site."""
    db, users = plan.database, ", ".join(plan.drop_users)
    if plan.drop_database and users:
        text = f'dropped database "{db}" and user(s) "{users}" on site {site}'
    elif plan.drop_database:
        text = f'dropped database "{db}" on site {site} (owner user left untouched)'
    else:
        text = f'dropped user(s) "{users}" on site {site} (database left untouched)'
    return Event(EventType.NORMAL, "DatabaseDropped", f"deletionPolicy=Delete: {text}")
