"""What a MysqlDatabase pass decides between its reads and its writes. Pure.

The entry's gate over what it read (``decide_gate``), the notes its steps act on
(``compose_apply``, ``compose_drop``), how a stop is recorded and when the order comes back
(``record_stop``, ``compute_stop_wait``), and how the apply and drop steps start and end
(``check_apply_start``, ``plan_apply_step``, ``judge_batch_failure``, ``judge_drop_failure``).
The task module reads through the adapter, calls these, and carries out what they return.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from enum import StrEnum
from typing import Any, Protocol

from tenantdb.core.events import Event, EventType
from tenantdb.core.keys import OrderKey
from tenantdb.core.mysqldatabase.apply import (
    ApplyPlan,
    Claims,
    Observed,
    Records,
    Refusal,
    compute_ran_subjects,
    drift_repaired_event,
    plan_apply,
    read_only_bypass_event,
    records_status,
    usernames_to_observe,
)
from tenantdb.core.mysqldatabase.conditions import (
    compute_creating_status,
    compute_deleting_status,
    compute_ready_status,
    compute_stopped_status,
    compute_withdrawn_status,
)
from tenantdb.core.mysqldatabase.conflicts import Claim
from tenantdb.core.mysqldatabase.gates import (
    EARLY_REASONS,
    FAILED_REQUEUE,
    PENDING_REQUEUE_BASE,
    PENDING_REQUEUE_JITTER,
    GateDecision,
    OwnerSecret,
    plan_gates,
)
from tenantdb.core.mysqldatabase.group import compute_active_site
from tenantdb.core.mysqldatabase.models import read_order
from tenantdb.core.mysqldatabase.principals import (
    ALWAYS_RESERVED,
    GroupSecretInvalidError,
    GroupSecretUnreadableError,
    compute_reserved_usernames,
)
from tenantdb.core.mysqldatabase.reading import (
    check_active_site,
    claim_of,
    compute_gate_observation,
    compute_teardown_observation,
    group_moved,
    group_name,
    needs_secret_username,
    needs_sibling_username,
    owner_secret_name,
    session_view,
    sibling_claims,
    sibling_of,
)
from tenantdb.core.mysqldatabase.reasons import Phase, Reason
from tenantdb.core.mysqldatabase.sql import Dialect
from tenantdb.core.mysqldatabase.teardown import (
    AfterDrop,
    TeardownPlan,
    TeardownStep,
    plan_after_drop,
    plan_teardown,
)
from tenantdb.core.mysqldatabase.validation import (
    InvalidSpecError,
    ValidSpec,
    check_database_name,
    check_identifier,
    check_username,
    validate_spec,
)
from tenantdb.core.objects import generation_of, metadata_of, status_of

APPLY = "MysqlDatabaseApply"
DROP = "MysqlDatabaseDrop"
"""The error metric's sub_reconciler labels of the two chains; their condition_type is Ready."""

VERIFY = "mysql-verify"
"""The periodic work of a Ready order: its drift check."""
REASSERT = "mysql-reassert"
"""Set when an apply lost its lease: a statement of it may have landed after a newer pass (an
older password), so the next drift check sets the owner's password again."""
REASSERT_MS = 7 * 24 * 3600 * 1000


# -- the entry's gate ----------------------------------------------------------------------------


@dataclass(frozen=True)
class GateReads:
    """What the entry read for its gates; ``group_secrets`` is None when the gates stopped on
    the group and the owner Secret alone (nothing past them was read)."""

    order: Mapping[str, Any]
    group: dict[str, Any] | None
    owner: OwnerSecret | None
    group_secrets: Mapping[str, Mapping[str, str] | None] | None = None
    peers: tuple[dict[str, Any], ...] = ()
    peer_users: Mapping[str, str] = field(default_factory=dict)
    waiting: tuple[str, ...] = ()


@dataclass(frozen=True)
class Gate:
    """What the entry's gates decided and read (in memory only)."""

    decision: GateDecision
    group: dict[str, Any] | None = None
    reserved: frozenset[str] = frozenset()
    peers: tuple[dict[str, Any], ...] = ()
    owner_version: str = ""
    peer_users: Mapping[str, str] = field(default_factory=dict)
    """The usernames the owner Secrets of peers without a recorded owner name, by peer."""
    waiting: tuple[str, ...] = ()
    """The peers on the group an apply of the order may unblock, which it wakes."""


def owner_username(owner: OwnerSecret | None) -> str | None:
    """The username an owner Secret names; None without one."""
    return owner.username if owner else None


def gates_stop_early(
    order: Mapping[str, Any], group: Mapping[str, Any] | None, owner: OwnerSecret | None
) -> bool:
    """Whether the gates stop on the group and the owner Secret alone (no more to read)."""
    first = plan_gates(compute_gate_observation(order, group, owner, {}))
    return group is None or first.reason in EARLY_REASONS


def may_retire(order: Mapping[str, Any], owner_username: str | None) -> bool:
    """Whether an apply of the order may retire an owner user it recorded: the owner it
    recorded, or the rotation target it left pending, is not the one its Secret names now
    (``plan_apply``'s retirements). Only such an apply must respect the users its peers'
    owner Secrets name."""
    return bool(Records.of(status_of(order)).retirable(owner_username or ""))


def needs_peer_username(me: Claim, peer: Mapping[str, Any], *, retiring: bool) -> bool:
    """Whether the gates must know the username a peer's owner Secret names: the conflict
    check needs it of an older peer that recorded no owner; an apply that may retire a user
    (``may_retire``) needs it of every live peer that recorded none. Reading it for every new
    peer of every pass would cost each pass of a burst on a group a Secret read per peer."""
    if needs_secret_username(me, claim_of(peer, None)):
        return True
    return retiring and needs_sibling_username(peer)


def claim_for_gates(order: Mapping[str, Any], owner: OwnerSecret | None) -> Claim:
    """The order as the conflict check sees it, owned by what its Secret names."""
    return claim_of(order, owner_username(owner))


def reserved_or_none(secrets: Mapping[str, Mapping[str, str] | None]) -> frozenset[str] | None:
    """The group's reserved usernames; None when its credential Secrets cannot say."""
    try:
        return compute_reserved_usernames(secrets)
    except (GroupSecretUnreadableError, GroupSecretInvalidError):
        return None


def decide_gate(reads: GateReads) -> Gate:
    """Run the gates over what the entry read."""
    if reads.group_secrets is None:
        first = plan_gates(compute_gate_observation(reads.order, reads.group, reads.owner, {}))
        return Gate(first, reads.group)
    observed = compute_gate_observation(
        reads.order, reads.group, reads.owner, reads.group_secrets, reads.peers, reads.peer_users
    )
    return Gate(
        plan_gates(observed),
        reads.group,
        reserved_or_none(reads.group_secrets) or frozenset(),
        reads.peers,
        reads.owner.resource_version if reads.owner else "",
        reads.peer_users,
        reads.waiting,
    )


# -- stops ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Stop:
    """Why a pass records Pending or Failed instead of applying."""

    phase: Phase
    reason: Reason
    message: str


@dataclass(frozen=True)
class StopRecord:
    """What recording a stop writes: the status, whether it counts as an error of the apply
    (counted before the write), and the Warning Event of a Failed one (on the order as read)."""

    status: dict[str, Any]
    counted: bool
    warning: Event | None


def gate_stop(decision: GateDecision) -> Stop:
    """The stop a gate decided."""
    return Stop(
        decision.phase or Phase.PENDING,
        decision.reason or Reason.GROUP_NOT_FOUND,
        decision.message,
    )


def plan_refused_revocation(order: Mapping[str, Any], gate: Gate) -> TeardownPlan | None:
    """What an order the gates refused (InvalidSpec) still revokes: the grants its records say
    it may have made under its schema's name read as a pattern (an earlier version wrote
    those; ``mysq_`` reads as ``mysql``, every account on the server). None when it has none
    to revoke, or no group to revoke them on.

    The order cannot be applied, so nothing it granted may stand on a pattern that reaches
    other schemas; its exact grants on its own schema are left, as a Failed order leaves them.
    """
    decision = gate.decision
    if decision.reason is not Reason.INVALID_SPEC or gate.group is None:
        return None
    database = read_order(order).spec.database_name
    records = Records.of(status_of(order))
    try:
        check_identifier("spec.databaseName", database)
    except InvalidSpecError:
        return None  # a name that cannot be quoted was never sent
    if "_" not in database or not compute_active_site(gate.group):
        return None
    named = (records.owner_user, records.pending_owner_user, *records.applied_grants)
    principals = tuple(
        dict.fromkeys(
            n
            for n in named
            if n and _principal_problem("a recorded account", n, ALWAYS_RESERVED) is None
        )
    )
    if not principals:
        return None
    return TeardownPlan(TeardownStep.DROP, database=database, revoke_patterns=principals)


def unreachable_stop(group: str, problem: str) -> Stop:
    """The stop of a step that cannot work on the group's primary."""
    return Stop(
        Phase.PENDING,
        Reason.PRIMARY_UNAVAILABLE,
        f'cannot reach the primary of group "{group}": {problem}',
    )


def record_stop(
    stop: Stop, order: Mapping[str, Any], base: Mapping[str, Any] | None, now: datetime
) -> StopRecord:
    """Record a stop over ``base`` (the stored status unless given): a Failed one and an
    unreachable primary count as errors, a Failed one is a Warning Event too."""
    status = compute_stopped_status(
        status_of(order) if base is None else base,
        phase=stop.phase,
        reason=stop.reason,
        message=stop.message,
        generation=generation_of(order),
        now=now,
    )
    failed = stop.phase is Phase.FAILED
    counted = failed or stop.reason is Reason.PRIMARY_UNAVAILABLE
    warning = Event(EventType.WARNING, str(stop.reason), stop.message) if failed else None
    return StopRecord(status, counted, warning)


def compute_stop_wait(phase: Phase, spread: float) -> float:
    """Seconds before a stopped order is looked at again; ``spread`` in [0, 1) spreads Pending
    ones so a group's orders do not come back together."""
    if phase is Phase.FAILED:
        return FAILED_REQUEUE.total_seconds()
    return PENDING_REQUEUE_BASE.total_seconds() + spread * PENDING_REQUEUE_JITTER.total_seconds()


def own_write(read: Mapping[str, Any], written: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The object a write left when it changed anything (its watch event is an echo)."""
    return None if written is read else written


# -- the apply step ------------------------------------------------------------------------------


@dataclass(frozen=True)
class ApplyNote:
    """What the apply step acts on; no credential."""

    order: dict[str, Any]
    spec: ValidSpec
    applied_hash: str
    group: str
    group_uid: str
    site: str
    owner_secret: str
    owner_version: str
    reserved: tuple[str, ...]
    siblings: dict[str, str]
    """Of the owners the order's status records, those a live peer claims, to the peer."""
    peers: tuple[str, ...]
    repair: bool
    reassert: bool = False

    def refusal(self, key: OrderKey) -> str | None:
        """Why the apply step serving ``key`` must not act on this note (``check_apply_note``)."""
        return check_apply_note(key, self)


@dataclass(frozen=True)
class Applying:
    """The apply a pass hands to its chain: its note, and the entry's task result."""

    note: ApplyNote
    reason: str


def compose_apply(order: dict[str, Any], gate: Gate, drift: Drift | None = None) -> Applying:
    """The apply step's note (``order`` as the note carries it) and the entry's result.

    ``drift`` is what the drift check of an order its last apply left as it is found (None:
    the inputs moved since): the step then repairs, sending only what drifted, and on a
    ``REASSERT`` sets the owner's password again.

    Raises:
        RuntimeError: the gates let the pass on without a validated spec.
    """
    decision, group = gate.decision, gate.group or {}
    if decision.spec is None:  # the gates let the pass on only with a valid spec
        raise RuntimeError("the gates passed without a validated spec")
    siblings = [
        sibling_of(p, gate.peer_users.get(str(metadata_of(p).get("name")))) for p in gate.peers
    ]
    # The note carries what peers claim of the owners the step may drop, not of the group.
    retirable = Records.of(status_of(order)).retirable(decision.spec.owner_username)
    claims = {user: peer for user, peer in sibling_claims(siblings).items() if user in retirable}
    note = ApplyNote(
        order=order,
        spec=decision.spec,
        applied_hash=decision.applied_hash,
        group=group_name(order),
        group_uid=str(metadata_of(group).get("uid", "")),
        site=compute_active_site(group),
        owner_secret=owner_secret_name(order),
        owner_version=gate.owner_version,
        reserved=tuple(sorted(gate.reserved)),
        siblings=claims,
        peers=gate.waiting,
        repair=drift is not None,
        reassert=drift is Drift.REASSERT,
    )
    return Applying(note, "Applying" if drift is None else "Verifying")


@dataclass(frozen=True)
class StepEnd:
    """How a step ends before it writes anything of its own: the task result, the stop it
    records (its wait is the come-back), a drift check's come-back (``verified``), or a new
    pass at once (``again``)."""

    reason: str
    stop: Stop | None = None
    verified: bool = False
    again: bool = False


INPUTS_MOVED = StepEnd("InputsMoved", again=True)
"""A step whose inputs changed since its pass planned it: a new pass looks again."""


class Versioned(Protocol):
    """A read object's version (a Secret's ``resourceVersion``)."""

    @property
    def resource_version(self) -> str:
        """The version it was read at."""
        ...


def check_apply_start(
    note: ApplyNote, owner: Versioned | None, group: Mapping[str, Any] | None
) -> StepEnd | None:
    """Whether the apply ends before it connects: its owner Secret or its group moved since
    the pass planned it, or the active site cannot take it. None: connect."""
    if owner is None or owner.resource_version != note.owner_version:
        return INPUTS_MOVED
    if group is None or group_moved(group, note.group_uid, note.site):
        return INPUTS_MOVED
    problem = check_active_site(group, note.site)
    if problem is not None:
        return StepEnd(str(Reason.PRIMARY_UNAVAILABLE), unreachable_stop(note.group, problem))
    return None


def apply_usernames(note: ApplyNote) -> tuple[str, ...]:
    """The accounts the apply's look at the server covers."""
    return usernames_to_observe(note.spec, Records.of(status_of(note.order)))


@dataclass(frozen=True)
class ApplyStep:
    """What the apply does once it looked: end (refused, or a drift check that found
    nothing), or send ``plan`` (after the write-ahead record of ``compute_apply_stamp``)."""

    end: StepEnd | None
    observed: Observed
    plan: ApplyPlan = field(default_factory=lambda: ApplyPlan(()))


def plan_apply_step(note: ApplyNote, observed: Observed, dialect: Dialect) -> ApplyStep:
    """Decide the apply over what the primary showed."""
    decided = plan_apply(
        note.spec,
        Records.of(status_of(note.order)),
        observed,
        dialect=dialect,
        group=note.group,
        site=note.site,
        claims=Claims(frozenset(note.reserved), note.siblings),
        repair=note.repair,
        reassert=note.reassert,
    )
    if isinstance(decided, Refusal):
        stop = Stop(decided.phase, decided.reason, decided.message)
        return ApplyStep(StepEnd(str(decided.reason), stop), observed)
    if note.repair and not decided.statements:
        return ApplyStep(StepEnd("Verified", verified=True), observed)
    return ApplyStep(None, observed, decided)


@dataclass(frozen=True)
class QuietCheck:
    """What a refresh of a Ready order checks on the primary instead of reading the order,
    its group and their Secrets again (``tenantdb.core.quiet``): the drift check's note, and
    the group as a session on it needs it (where to connect, which Secrets hold the login and
    the CA). Never a credential."""

    note: ApplyNote
    group: dict[str, Any]


def compose_quiet_check(order: dict[str, Any], gate: Gate) -> QuietCheck | None:
    """The drift check of an order its last apply left as it is (``order`` as a note carries
    it); None when the inputs moved since (the order is applied instead). It carries of the
    order only the records its look plans from, and wakes no peer, so it names none.

    Raises:
        RuntimeError: the gates let the pass on without a validated spec.
    """
    if not gate.decision.up_to_date:
        return None
    note = compose_apply(order, gate, Drift.UNVERIFIED).note
    # Kept for every Ready order, so only what the check reads: of the order, its records.
    records = {"status": records_status(status_of(order))}
    return QuietCheck(replace(note, order=records, peers=()), session_view(gate.group or {}))


class Drift(StrEnum):
    """What a drift check of an order its last apply left as it is found."""

    NOT_DUE = "UpToDate"
    """The verify period is not due: nothing to look at."""
    VERIFIED = "Verified"
    """The primary shows the order as its last apply left it."""
    REASSERT = "Reassert"
    """The owner's password must be set again, which no look can tell: the apply step does."""
    UNVERIFIED = "Unverified"
    """Drift, a refusal, or a look that failed: the apply step repairs, or records why."""

    @property
    def confirmed(self) -> bool:
        """Whether the order needs nothing sent."""
        return self in (Drift.NOT_DUE, Drift.VERIFIED)


def confirms(drift: Drift | None) -> bool:
    """Whether a drift check ran and found nothing to send."""
    return drift is not None and drift.confirmed


def judge_verified(note: ApplyNote, observed: Observed, dialect: Dialect) -> bool:
    """Whether a drift check found the order on the primary as its last apply left it:
    nothing to send and nothing to refuse."""
    end = plan_apply_step(note, observed, dialect).end
    return end is not None and end.verified


def compute_end_wait(stop_wait: float | None, end: StepEnd, verify_seconds: float) -> float | None:
    """When an ended step's order comes back: its stop's wait, a drift check's period, or at
    once (None: the step asks for a new pass)."""
    if stop_wait is not None:
        return stop_wait
    return verify_seconds if end.verified else None


def compute_apply_stamp(note: ApplyNote, now: datetime) -> dict[str, Any] | None:
    """The write-ahead record before the statements: Creating; None when a drift check repairs
    (the order stays Ready)."""
    if note.repair:
        return None
    return compute_creating_status(
        status_of(note.order),
        spec=note.spec,
        site=note.site,
        generation=generation_of(note.order),
        now=now,
    )


@dataclass(frozen=True)
class ServerFailure:
    """A batch the server failed, as the pass records it; names no credential."""

    problem: str
    executed: int
    """How many statements of the batch ran before the failing one."""
    may_have_run: bool
    """Whether the failing statement itself may have taken effect."""
    transient: bool


@dataclass(frozen=True)
class BatchFailure:
    """A stop of a batch the server failed, over the status it withdraws to."""

    stop: Stop
    base: dict[str, Any]


def judge_batch_failure(
    note: ApplyNote,
    step: ApplyStep,
    stamped: Mapping[str, Any],
    failure: ServerFailure,
) -> BatchFailure:
    """How a batch that failed at statement ``executed`` is recorded: the records of what
    cannot have run are withdrawn in the same write as the stop; a transient failure waits
    Pending, a refused statement fails the order."""
    ran = compute_ran_subjects(
        step.plan.statements, failure.executed, failing_may_have_run=failure.may_have_run
    )
    base = compute_withdrawn_status(
        status_of(note.order),
        stamped,
        ran=ran,
        schema_present=step.observed.schema is not None,
        present=step.observed.users,
    )
    if failure.transient:
        message = f'transient MySQL error on group "{note.group}": {failure.problem}'
        return BatchFailure(Stop(Phase.PENDING, Reason.PRIMARY_UNAVAILABLE, message), base)
    return BatchFailure(Stop(Phase.FAILED, Reason.MYSQL_ERROR, failure.problem), base)


def compute_applied_status(
    note: ApplyNote, stamped: Mapping[str, Any], now: datetime
) -> dict[str, Any]:
    """The Ready record once every statement ran."""
    return compute_ready_status(
        stamped,
        spec=note.spec,
        site=note.site,
        applied_hash=note.applied_hash,
        generation=generation_of(note.order),
        now=now,
    )


@dataclass(frozen=True)
class Applied:
    """What an apply that ran does last: its Events, the peers it wakes, its task result."""

    events: tuple[Event, ...]
    wake: tuple[str, ...]
    reason: str


def judge_applied(note: ApplyNote, step: ApplyStep, *, read_only_bypassed: bool) -> Applied:
    """The Events of an apply that ran (a drift check says what it repaired; an admin the
    server would not fence is warned of), and the peers a first apply wakes."""
    repaired = [drift_repaired_event(step.plan, note.site)] if note.repair else []
    if read_only_bypassed:
        repaired.append(read_only_bypass_event(note.group, note.site))
    events = (*step.plan.events, *repaired)
    if note.repair:
        return Applied(events, (), "Repaired")
    return Applied(events, note.peers, "Applied")


def period_to_release(note: ApplyNote) -> str | None:
    """The timetable an apply that could not run gives back (a drift check is due again), or
    None."""
    return VERIFY if note.repair else None


# -- teardown ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TeardownReads:
    """What a teardown read: the group (None: gone, or not needed), its reserved usernames
    (None: unreadable), the peers, their owner usernames, and the peers to wake."""

    group: dict[str, Any] | None = None
    reserved: frozenset[str] | None = None
    peers: tuple[dict[str, Any], ...] = ()
    peer_users: Mapping[str, str] = field(default_factory=dict)
    waiting: tuple[str, ...] = ()


def decide_teardown(order: Mapping[str, Any], reads: TeardownReads) -> TeardownPlan:
    """What deleting the order removes, over what the teardown read."""
    return plan_teardown(
        compute_teardown_observation(
            order, reads.group, reads.reserved, reads.peers, reads.peer_users
        )
    )


@dataclass(frozen=True)
class DropNote:
    """What the drop step acts on; no credential."""

    order: dict[str, Any]
    plan: TeardownPlan
    group: str
    group_uid: str
    site: str
    peers: tuple[str, ...] = field(default=())

    def refusal(self, key: OrderKey) -> str | None:
        """Why the drop step serving ``key`` must not act on this note (``check_drop_note``)."""
        return check_drop_note(key, self)


def compose_drop(
    order: dict[str, Any],
    plan: TeardownPlan,
    group: Mapping[str, Any] | None,
    peers: tuple[str, ...],
) -> DropNote:
    """The drop step's note (``order`` as the note carries it)."""
    return DropNote(
        order=order,
        plan=plan,
        group=group_name(order),
        group_uid=str(metadata_of(group or {}).get("uid", "")),
        site=compute_active_site(group or {}),
        peers=peers,
    )


def database_of(order: Mapping[str, Any]) -> str:
    """The schema an order names."""
    return read_order(order).spec.database_name


def compute_deleting_stamp(order: Mapping[str, Any], message: str, now: datetime) -> dict[str, Any]:
    """The Deleting record of an order being torn down (``message``: why it waits, if it does)."""
    return compute_deleting_status(
        status_of(order),
        database=database_of(order),
        message=message,
        generation=generation_of(order),
        now=now,
    )


def deferral_message(plan: TeardownPlan) -> str:
    """What a deferred drop says on the order: its Event's message."""
    return plan.events[0].message if plan.events else ""


def finalizers_without(order: Mapping[str, Any], finalizer: str) -> list[str]:
    """The order's finalizers once ``finalizer`` is released."""
    return [f for f in metadata_of(order).get("finalizers") or () if f != finalizer]


@dataclass(frozen=True)
class PrimaryFailure:
    """A step's work on the group's primary that failed, as a pass records it; names no
    credential."""

    problem: str
    transient: bool
    """Whether the order waits and retries; a statement the server refused is not."""
    closes_in: float
    """Seconds before the site's circuit closes (0 when unknown)."""


@dataclass(frozen=True)
class DropFailure:
    """How a drop the primary failed is recorded: the Deleting message, the Events, and
    whether the step fails (a refused statement) or comes back (a transient failure)."""

    message: str
    events: tuple[Event, ...]
    fatal: bool


def judge_drop_failure(database: str, group: str, failure: PrimaryFailure) -> DropFailure:
    """Record a drop the primary failed: a refused statement says so and fails the step; a
    transient failure says it waits for the primary, and the order comes back."""
    if not failure.transient:
        return DropFailure(f"dropping database {database}: {failure.problem}", (), fatal=True)
    message = f'transient MySQL error dropping database "{database}": {failure.problem}; retrying'
    return DropFailure(
        f'dropping database {database}: waiting for the primary of group "{group}"',
        (Event(EventType.WARNING, "DatabaseDropDeferred", message),),
        fatal=False,
    )


def judge_after_drop(plan: TeardownPlan, site: str, group: Mapping[str, Any] | None) -> AfterDrop:
    """Whether a drop that ran may release the order: the group as read after it (None: gone)
    still has its primary on ``site``."""
    return plan_after_drop(plan, site, None if group is None else compute_active_site(group))


__all__ = [
    "APPLY",
    "DROP",
    "REASSERT",
    "REASSERT_MS",
    "VERIFY",
    "Applied",
    "ApplyNote",
    "ApplyStep",
    "Applying",
    "BatchFailure",
    "Drift",
    "DropFailure",
    "DropNote",
    "Gate",
    "GateReads",
    "PrimaryFailure",
    "QuietCheck",
    "ServerFailure",
    "StepEnd",
    "Stop",
    "StopRecord",
]


# -- what a step checks of its note before it sends a statement ----------------------------------


def _other_order(key: OrderKey, order: Mapping[str, Any]) -> str | None:
    meta = metadata_of(order)
    if (meta.get("namespace"), meta.get("name")) != (key.namespace, key.name):
        return f"the note is of order {meta.get('namespace')}/{meta.get('name')}"
    return None


def _principal_problem(field_name: str, username: str, reserved: frozenset[str]) -> str | None:
    try:
        check_username(field_name, username)
    except InvalidSpecError as error:
        return str(error)
    if username in reserved:
        return f'{field_name} "{username}" is a reserved account of the group'
    return None


def check_apply_note(key: OrderKey, note: ApplyNote) -> str | None:
    """Why the apply step must not act on ``note`` (None: it may).

    Everything the apply turns into SQL is checked again as the entry's gates checked it: the
    note is of the order the step serves, its spec passes validation unchanged and names the
    order's schema and grantees, the reserved accounts include the built-in ones, and no
    account the spec or the order's records name is reserved or malformed.
    """
    problem = _other_order(key, note.order)
    if problem is not None:
        return problem
    spec = note.spec
    try:
        again = validate_spec(
            database_name=spec.database_name,
            character_set=spec.character_set,
            collation=spec.collation,
            owner_username=spec.owner_username,
            owner_privileges=spec.owner_privileges,
            grants=spec.grants,
        )
        ordered = read_order(note.order).spec
    except (InvalidSpecError, ValueError) as error:
        return f"the note's spec does not validate: {error}"
    if again != spec:
        return "the note's spec is not in its validated form"
    if spec.database_name != ordered.database_name:
        return f'the note names schema "{spec.database_name}", the order another'
    if {g.username for g in spec.grants} != {g.username for g in ordered.grants}:
        return "the note grants to accounts the order does not name"
    reserved = frozenset(note.reserved)
    if not reserved >= ALWAYS_RESERVED:
        return "the note leaves built-in accounts out of the reserved ones"
    records = Records.of(status_of(note.order))
    named = [
        ("spec.owner secret username", spec.owner_username),
        *((f"spec.grants {g.username}", g.username) for g in spec.grants),
        ("status.ownerUser", records.owner_user),
        ("status.pendingOwnerUser", records.pending_owner_user),
        *(("status.appliedGrants", g) for g in records.applied_grants),
        *(("a peer's owner", s) for s in note.siblings),
    ]
    for field_name, username in named:
        if username:
            problem = _principal_problem(field_name, username, reserved)
            if problem is not None:
                return problem
    return None


def check_drop_note(key: OrderKey, note: DropNote) -> str | None:
    """Why the drop step must not act on ``note`` (None: it may): the note is of the order
    the step serves, drops that order's schema, and revokes and drops no built-in or malformed
    account."""
    problem = _other_order(key, note.order)
    if problem is not None:
        return problem
    plan = note.plan
    try:
        if plan.database and plan.database != database_of(note.order):
            return f'the note drops schema "{plan.database}", the order names another'
        if plan.database:
            check_database_name(plan.database)
    except (InvalidSpecError, ValueError) as error:
        return f"the note's schema does not validate: {error}"
    for field_name, usernames in (
        ("revoke", plan.revoke),
        ("revoke pattern", plan.revoke_patterns),
        ("drop user", plan.drop_users),
    ):
        for username in usernames:
            problem = _principal_problem(field_name, username, ALWAYS_RESERVED)
            if problem is not None:
                return problem
    return None
