"""What one apply of a MysqlDatabase sends, decided from one read-only look at the server. Pure.

The pass reads once (``sql.observe_query``: the schema and its defaults, which of the accounts
it cares about exist, and every privilege held on the schema) and whether the server is
read-only, then ``plan_apply`` decides, before any statement runs:

- a refusal, when the server is read-only (Pending PrimaryUnavailable: a failover is under
  way), when the schema exists and this order never recorded creating it (DatabasePreExists),
  when the owner account exists and is not recorded as this order's (PreExistingOwnerUser), or
  when a grants[] principal does not exist (GrantUserMissing). A refusal runs no SQL and writes
  no record;
- otherwise the statements, in order: whatever an account the order neither declares nor
  records holds on the schema's names revoked (a grant row outlives the schema it was made
  for, and would hand a new schema of the name to whoever held it), the schema (created if
  absent; its defaults moved only when they differ), the owner (created if absent, else its
  password re-asserted from the
  Secret; the declared privileges granted when one is missing, then whatever else it holds on
  the schema revoked, so a narrowing never leaves it without privileges), each grants[] entry
  the same way (never created), grants[] entries the order dropped revoked, and last the
  retirement of a previous owner (and of an abandoned rotation target): revoked, then dropped
  unless it became a group account, is still declared here, or a sibling order claims it.

``repair`` is the drift check of an unchanged order: only what the observation shows missing
or surplus is sent, and the password is not re-asserted (unless ``reassert`` asks, after a pass
that lost its lease may have sent an older one), so a server that matches issues no statement
at all. Passwords never reach this module: a statement names the Secret whose
password the executor binds.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from tenantdb.core.events import Event, EventType
from tenantdb.core.mysqldatabase import sql
from tenantdb.core.mysqldatabase.principals import ALWAYS_RESERVED
from tenantdb.core.mysqldatabase.reasons import Phase, Reason
from tenantdb.core.mysqldatabase.sql import Dialect, ForeignGrant, Statement
from tenantdb.core.mysqldatabase.teardown import TeardownPlan
from tenantdb.core.mysqldatabase.validation import ALL_PRIVILEGES, ValidSpec

OWNER_PASSWORD = "\x00owner-password\x00"  # noqa: S105 - a placeholder the executor replaces
"""The bound value an executor replaces with the owner Secret's password."""


@dataclass(frozen=True, slots=True)
class Observed:
    """What the server showed before the apply."""

    read_only: bool
    schema: tuple[str, str] | None
    """The schema's default character set and collation; None when it does not exist."""
    users: frozenset[str]
    """Which of the asked-for accounts exist on host '%'."""
    held: Mapping[str, frozenset[str]] = field(default_factory=dict)
    """Privileges held on the schema (its escaped name), by username (host '%' only)."""
    unescaped: Mapping[str, frozenset[str]] = field(default_factory=dict)
    """Privileges held on the schema's unescaped name, a wildcard pattern an earlier version
    granted on, by username (host '%' only)."""
    foreign: tuple[ForeignGrant, ...] = ()
    """Every other grant row whose database pattern matches the schema: an account on another
    host, or a wildcard that is not the schema's name."""


def _username(grantee: str) -> str | None:
    if grantee.startswith("'") and grantee.endswith("'@'%'"):
        return grantee[1 : -len("'@'%'")]
    return None


_GRANTEE = re.compile(r"'((?:[^'\\]|\\.)*)'@'((?:[^'\\]|\\.)*)'")
"""A grantee as ``QUOTE()`` or ``information_schema`` spells it: 'user'@'host'."""


def _foreign(grantee: str, pattern: str) -> ForeignGrant:
    found = _GRANTEE.fullmatch(grantee)
    if found is None:  # kept as it came, so that it is refused, never rendered
        return ForeignGrant(grantee, "", pattern)
    user, host = (re.sub(r"\\(.)", r"\1", part) for part in found.groups())
    return ForeignGrant(user, host, pattern)


def parse_observation(rows: Iterable[Sequence[object]]) -> Observed:
    """Read the rows of ``sql.observe_query`` into an observation."""
    read_only = False
    schema: tuple[str, str] | None = None
    users: set[str] = set()
    held: dict[str, dict[str, set[str]]] = {"privilege": {}, "unescaped": {}}
    foreign: set[ForeignGrant] = set()
    for what, a, b in rows:
        first, second = str(a), str(b)
        if what == "foreign":
            foreign.add(_foreign(first, second))
        elif what == "read_only":
            read_only = first not in ("0", "")
        elif what == "schema":
            schema = (first, second)
        elif what == "user":
            users.add(first)
        elif what in held and (name := _username(first)) is not None:
            # One privilege a row from information_schema, a grantee's all from mysql.db.
            privileges = [p for p in second.split(",") if p]
            if privileges:
                held[str(what)].setdefault(name, set()).update(privileges)
    escaped, unescaped = (
        {u: frozenset(p) for u, p in held[what].items()} for what in ("privilege", "unescaped")
    )
    ordered = tuple(sorted(foreign, key=lambda g: (g.username, g.host, g.pattern)))
    return Observed(read_only, schema, frozenset(users), escaped, unescaped, ordered)


def _same_defaults(observed: tuple[str, str], character_set: str, collation: str) -> bool:
    """Whether the schema's defaults are the spec's, aliases (``utf8``) read as the server does."""
    return (
        sql.normalize_charset(observed[0]),
        sql.normalize_collation(observed[1]),
    ) == (sql.normalize_charset(character_set), sql.normalize_collation(collation))


def _revoke_everything(
    username: str, observed: Observed, db: str, dialect: Dialect
) -> list[Statement]:
    """Revoke whatever the account holds on the schema, under its escaped and unescaped name."""
    out: list[Statement] = []
    if observed.held.get(username):
        out.append(sql.revoke([ALL_PRIVILEGES], db, username, dialect))
    if observed.unescaped.get(username):
        out.append(sql.revoke_unescaped([ALL_PRIVILEGES], db, username, dialect))
    return out


@dataclass(frozen=True, slots=True)
class Records:
    """The write-ahead records of the order's status before this pass."""

    database_created: bool = False
    owner_user: str = ""
    pending_owner_user: str = ""
    applied_grants: tuple[str, ...] = ()

    @classmethod
    def of(cls, status: Mapping[str, object]) -> Records:
        """The records a stored status holds."""
        grants = status.get("appliedGrants")
        return cls(
            database_created=status.get("databaseCreated") is True,
            owner_user=str(status.get("ownerUser") or ""),
            pending_owner_user=str(status.get("pendingOwnerUser") or ""),
            applied_grants=tuple(str(g) for g in grants) if isinstance(grants, list) else (),
        )

    def retirable(self, owner_username: str) -> frozenset[str]:
        """The owner users an apply toward ``owner_username`` may drop: the owner recorded
        before a rotation and an abandoned rotation target, never the owner it applies.
        ``plan_apply`` drops one only when no peer claims it, so an apply needs its peers'
        claims on these names alone."""
        return frozenset({self.owner_user, self.pending_owner_user} - {"", owner_username})


RECORD_FIELDS = ("databaseCreated", "ownerUser", "pendingOwnerUser", "appliedGrants")
"""The status fields ``Records.of`` reads."""


def records_status(status: Mapping[str, object]) -> dict[str, object]:
    """Only what ``Records.of`` reads of a stored status."""
    return {name: status[name] for name in RECORD_FIELDS if name in status}


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why the apply sends nothing: the phase it leaves the order in, and the reason."""

    phase: Phase
    reason: Reason
    message: str


@dataclass(frozen=True, slots=True)
class ApplyPlan:
    """The statements of one apply, in order, and the events once they all ran."""

    statements: tuple[Statement, ...]
    events: tuple[Event, ...] = ()


@dataclass(frozen=True, slots=True)
class Claims:
    """Who else may hold a name this order would drop: the group and the sibling orders."""

    reserved: frozenset[str]
    siblings: Mapping[str, str] = field(default_factory=dict)
    """A username a live sibling claims (as owner, pending owner or in its grants), to it."""


def usernames_to_observe(spec: ValidSpec, records: Records) -> tuple[str, ...]:
    """Every account the apply needs to know about, each once."""
    names = [
        spec.owner_username,
        *(g.username for g in spec.grants),
        records.owner_user,
        records.pending_owner_user,
        *records.applied_grants,
    ]
    return tuple(dict.fromkeys(n for n in names if n))


def plan_apply(
    spec: ValidSpec,
    records: Records,
    observed: Observed,
    *,
    dialect: Dialect,
    group: str,
    site: str,
    claims: Claims,
    repair: bool = False,
    reassert: bool = False,
) -> ApplyPlan | Refusal:
    """Decide the apply (see the module); a refusal sends nothing."""
    refusal = _refusal(spec, records, observed, group=group, site=site)
    if refusal is not None:
        return refusal
    db = spec.database_name
    out: list[Statement] = []
    events: list[Event] = []
    # Grant rows on the schema's names that no account of this order holds go before the schema
    # exists: a row left by an earlier owner of the name would otherwise give a stranger the
    # new tenant's data the moment it is created.
    for stranger in _strangers(spec, records, observed):
        out += _revoke_everything(stranger, observed, db, dialect)
    out += [sql.revoke_foreign(g, dialect) for g in _revoked_foreign(observed)]
    # An abandoned rotation target goes next: the write-ahead stamp replaces its record, and
    # a batch that fails before its first statement keeps the old records.
    _retire_abandoned(spec, records, observed, dialect, claims, out, events)
    if observed.schema is None:
        out.append(sql.create_database(db, spec.character_set, spec.collation))
    elif not _same_defaults(observed.schema, spec.character_set, spec.collation):
        out.append(sql.alter_database(db, spec.character_set, spec.collation))
    owner = spec.owner_username
    if owner not in observed.users:
        out.append(sql.create_user(owner, OWNER_PASSWORD))
    elif not repair or reassert:
        out.append(sql.alter_user(owner, OWNER_PASSWORD))
    out += _privileges(owner, spec.owner_privileges, observed, db, dialect)
    for entry in spec.grants:
        out += _privileges(entry.username, entry.privileges, observed, db, dialect)
    _retirements(spec, records, observed, dialect, claims, out, events)
    return ApplyPlan(tuple(out), tuple(events))


def _strangers(spec: ValidSpec, records: Records, observed: Observed) -> list[str]:
    """The accounts holding privileges on the schema's names that the order neither declares
    nor records (those it records are revoked where the order retires them)."""
    known = set(usernames_to_observe(spec, records))
    return sorted({*observed.held, *observed.unescaped} - known)


def _revoked_foreign(observed: Observed) -> list[ForeignGrant]:
    """The foreign grant rows the apply revokes: all but the built-in accounts' (the server's
    own, which tenantdb never touches)."""
    return [g for g in observed.foreign if g.username not in ALWAYS_RESERVED]


def _retirements(
    spec: ValidSpec,
    records: Records,
    observed: Observed,
    dialect: Dialect,
    claims: Claims,
    out: list[Statement],
    events: list[Event],
) -> None:
    """Revoke the grants[] entries the order dropped, then retire the previous owner."""
    db, owner = spec.database_name, spec.owner_username
    current = {owner, *(g.username for g in spec.grants)}
    retiring = {records.owner_user, records.pending_owner_user}
    for name in records.applied_grants:
        if name in current or name in retiring:
            continue
        out += _revoke_everything(name, observed, db, dialect)
    previous = records.owner_user
    if previous in records.retirable(owner) and _retire(
        previous, spec, observed, dialect, claims, out, events
    ):
        events.append(
            _rotated(
                f'created and granted new owner user "{owner}", then dropped previous'
                f' owner user "{previous}"'
            )
        )


def _retire_abandoned(
    spec: ValidSpec,
    records: Records,
    observed: Observed,
    dialect: Dialect,
    claims: Claims,
    out: list[Statement],
    events: list[Event],
) -> None:
    owner, pending = spec.owner_username, records.pending_owner_user
    # A target that is also the recorded owner is retired as the previous owner, after.
    if pending == records.owner_user or pending not in records.retirable(owner):
        return
    if _retire(pending, spec, observed, dialect, claims, out, events):
        events.append(
            _rotated(
                f'dropped abandoned owner rotation target "{pending}" before rotating to "{owner}"'
            )
        )


def _rotated(message: str) -> Event:
    return Event(EventType.NORMAL, "OwnerUserRotated", message)


def _refusal(
    spec: ValidSpec, records: Records, observed: Observed, *, group: str, site: str
) -> Refusal | None:
    if observed.read_only:
        return Refusal(
            Phase.PENDING,
            Reason.PRIMARY_UNAVAILABLE,
            f'transient MySQL error on group "{group}": site {site} is read-only; waiting for'
            " the writable primary",
        )
    db = spec.database_name
    if observed.schema is not None and not records.database_created:
        return Refusal(
            Phase.FAILED,
            Reason.DATABASE_PRE_EXISTS,
            f'database "{db}" already exists on the group and this CR did not create it'
            " (status.databaseCreated is false); refusing to adopt a schema tenantdb does not"
            " own",
        )
    for grant in _revoked_foreign(observed):
        if not sql.revocable(grant):
            return Refusal(
                Phase.FAILED,
                Reason.DATABASE_NAME_CONFLICT,
                f'a grant on the server matches database "{db}" and cannot be revoked by'
                " tenantdb (an account or pattern of characters it does not render); a"
                " database administrator must revoke it before the database is created",
            )
    owner = spec.owner_username
    if owner in observed.users and owner not in (records.owner_user, records.pending_owner_user):
        return Refusal(
            Phase.FAILED,
            Reason.PRE_EXISTING_OWNER_USER,
            f"MySQL account '{owner}'@'%' already exists and is not recorded as this CR's"
            " account (status.ownerUser/pendingOwnerUser); refusing to manage an account"
            " tenantdb did not create",
        )
    for entry in spec.grants:
        if entry.username not in observed.users:
            return Refusal(
                Phase.FAILED,
                Reason.GRANT_USER_MISSING,
                f"MySQL user \"{entry.username}\" does not exist at host '%' (grants[] matches"
                " host '%' only, same as every account tenantdb creates); spec.grants[] never"
                " creates users",
            )
    return None


def _privileges(
    username: str, wanted: Sequence[str], observed: Observed, db: str, dialect: Dialect
) -> list[Statement]:
    """Grant what is missing, then revoke what is held beyond it.

    A grant held under the schema's unescaped name (a pattern that also matches other schemas)
    is revoked last, once the escaped grant is in place, so the account is never left without
    its privileges.
    """
    out: list[Statement] = []
    held = observed.held.get(username, frozenset())
    desired = sql.concrete(wanted, dialect)
    if not desired <= held:
        out.append(sql.grant(wanted, db, username, dialect))
    surplus = held - desired
    if ALL_PRIVILEGES not in wanted and surplus:
        out.append(sql.revoke(sql.in_order(surplus, dialect), db, username, dialect))
    if observed.unescaped.get(username):
        out.append(sql.revoke_unescaped([ALL_PRIVILEGES], db, username, dialect))
    return out


def _retire(
    name: str,
    spec: ValidSpec,
    observed: Observed,
    dialect: Dialect,
    claims: Claims,
    out: list[Statement],
    events: list[Event],
) -> bool:
    """Revoke a former owner's privileges on the schema, then drop it unless vetoed."""
    if name in {g.username for g in spec.grants}:
        events.append(
            Event(
                EventType.WARNING,
                "OwnerUserDropSkipped",
                f'previous owner user "{name}" is declared in this MysqlDatabase\'s'
                " spec.grants[]; it is not dropped",
            )
        )
        return False
    out += _revoke_everything(name, observed, spec.database_name, dialect)
    if name in claims.reserved:
        events.append(
            Event(
                EventType.WARNING,
                "OwnerUserReservedSkipped",
                f'previous owner user "{name}" is now a group credential; it is not dropped',
            )
        )
        return False
    sibling = claims.siblings.get(name)
    if sibling is not None:
        events.append(
            Event(
                EventType.WARNING,
                "OwnerUserDropSkipped",
                f'MysqlDatabase "{sibling}" still claims user "{name}"; it is not dropped',
            )
        )
        return False
    out.append(sql.drop_user(name))
    return True


def render_drop(plan: TeardownPlan, observed: Observed, dialect: Dialect) -> tuple[Statement, ...]:
    """The statements of a drop, in order: the revokes, the schema, then the owner accounts
    (for a retained schema, only the revokes of its grants read as a pattern).

    The revokes come first because the server keeps schema-level grant rows across DROP
    DATABASE, and they would come back to life if the name were created again. Only accounts
    the observation shows holding a privilege on the schema are revoked.
    """
    out: list[Statement] = []
    for username in plan.revoke_patterns:
        if observed.unescaped.get(username):
            out.append(sql.revoke_unescaped([ALL_PRIVILEGES], plan.database, username, dialect))
    if plan.drop_database:
        for username in plan.revoke:
            out += _revoke_everything(username, observed, plan.database, dialect)
        out.append(sql.drop_database(plan.database))
    out.extend(sql.drop_user(username) for username in plan.drop_users)
    return tuple(out)


def compute_ran_subjects(
    statements: Sequence[Statement], executed: int, *, failing_may_have_run: bool
) -> frozenset[str]:
    """The subjects (the schema, accounts) a failed batch may have written.

    The first ``executed`` statements ran; the one that failed may have too when its
    connection failed under it. A subject none of whose statements may have run keeps only
    the records the order had before the pass (``status.compute_withdrawn_status``).
    """
    ran = list(statements[:executed])
    if failing_may_have_run and executed < len(statements):
        ran.append(statements[executed])
    return frozenset(s.subject for s in ran if s.subject)


def read_only_bypass_event(group: str, site: str) -> Event:
    """The Warning of an apply whose admin account the server would not fence."""
    return Event(
        EventType.WARNING,
        "ReadOnlyNotEnforced",
        f'the admin account of group "{group}" can write through read_only on site {site};'
        " a write of this order that lands during a failover is not refused by the server",
    )


def drift_repaired_event(plan: ApplyPlan, site: str) -> Event:
    """The Event of a drift check that sent something: what it sent again, values hidden."""
    shown = "; ".join(s.shown for s in plan.statements)
    return Event(
        EventType.NORMAL,
        "DriftRepaired",
        f"re-applied what changed on site {site} out of band: {shown}",
    )
