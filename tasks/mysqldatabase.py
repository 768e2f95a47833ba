"""The MysqlDatabase kind on the scaffold: its gates, its apply and drop steps, its records.

The entry reads the order's group, its owner Secret, the group's credential Secrets and the
peer orders of the namespace (only as far as the cheaper gates let it), and runs the gates of
``tenantdb.core.mysqldatabase.gates``. A gate that stops the pass records Pending or Failed.
An order whose fingerprint matches its last apply opens no connection and sends no statement;
once per ``TENANTDB_MYSQL_VERIFY_SECONDS`` it is checked against the server instead, with one
read-only query, and only what drifted is sent again. Otherwise the ``apply`` step connects to
the group's primary, looks once, and either refuses (no SQL, no record) or writes the
write-ahead stamp, runs the statements ``tenantdb.core.mysqldatabase.apply`` planned and
writes the Ready stamp. A deleting order follows ``plan_teardown``: retained and never-applied
orders release at once without a connection, a fenced or leaderless group defers the drop,
and the ``drop`` step revokes, drops what the order created and releases the finalizer.

An apply or a release wakes the order's peers on the same group that are not Ready, so an order
a conflict refused looks again when the order it yielded to changed. Passwords are read from their
Secrets in the step that binds them and are never in a note, a status, a log line or an Event.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from tasks.chain import StepResult
from tasks.reconcile import PassOutcome
from tasks.runtime import PerRegistry, workqueue
from tasks.scaffold import (
    Admission,
    KindPass,
    KindSpec,
    KindStep,
    Plan,
    Step,
    declare_kind,
    note_order,
)
from tenantdb.adapters.clusters import ClusterRegistry
from tenantdb.adapters.metrics import RECONCILE_ERRORS
from tenantdb.adapters.mysqladmin import AdminError, GroupBusyError, TLSRequiredError
from tenantdb.adapters.mysqldatabase import (
    CredentialError,
    MysqlIO,
    MysqlOrders,
    MysqlSession,
    SecretData,
)
from tenantdb.adapters.watchindex import WatchIndex
from tenantdb.adapters.workqueue import LeaseLostError
from tenantdb.core.events import Event, EventType
from tenantdb.core.mysqldatabase import sql
from tenantdb.core.mysqldatabase.apply import (
    OWNER_PASSWORD,
    Claims,
    Records,
    Refusal,
    compute_ran_subjects,
    drift_repaired_event,
    parse_observation,
    plan_apply,
    read_only_bypass_event,
    render_drop,
    usernames_to_observe,
)
from tenantdb.core.mysqldatabase.conditions import (
    compute_creating_status,
    compute_deleting_status,
    compute_ready_status,
    compute_stopped_status,
    compute_withdrawn_status,
)
from tenantdb.core.mysqldatabase.gates import (
    EARLY_REASONS,
    FAILED_REQUEUE,
    PENDING_REQUEUE_BASE,
    PENDING_REQUEUE_JITTER,
    GateDecision,
    compute_comeback_behind_circuit,
    plan_gates,
)
from tenantdb.core.mysqldatabase.group import compute_active_site
from tenantdb.core.mysqldatabase.naming import CLAIM_INDEX, IDENTITY
from tenantdb.core.mysqldatabase.principals import (
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
    group_secret_names,
    needs_group_for_teardown,
    needs_secret_username,
    needs_sibling_username,
    owner_secret_name,
    sibling_claims,
    sibling_of,
)
from tenantdb.core.mysqldatabase.reasons import Phase, Reason
from tenantdb.core.mysqldatabase.teardown import (
    TeardownPlan,
    TeardownStep,
    plan_after_drop,
    plan_teardown,
)
from tenantdb.core.mysqldatabase.validation import ValidSpec
from tenantdb.core.objects import generation_of, metadata_of, status_of
from tenantdb.core.pass_path import Verdict
from tenantdb.core.tasknames import Queue
from tenantdb.settings import load_settings

log = logging.getLogger(__name__)

APPLY = "MysqlDatabaseApply"
DROP = "MysqlDatabaseDrop"
"""The error metric's sub_reconciler labels of the two chains; their condition_type is Ready."""
READY = "Ready"


def _build_orders(registry: ClusterRegistry) -> MysqlIO:
    claims = WatchIndex(workqueue().redis, load_settings().key_prefix, CLAIM_INDEX)
    return MysqlOrders(registry, claims=claims)


orders: PerRegistry[MysqlIO] = PerRegistry(_build_orders)
"""The MysqlDatabase reads and writes of this worker process."""

Ctx = KindPass[MysqlIO] | KindStep[MysqlIO]
"""Where a pass is: its entry or one of its steps."""

VERIFY = "mysql-verify"
"""The periodic work of a Ready order: its drift check."""
REASSERT = "mysql-reassert"
"""Set when an apply lost its lease: a statement of it may have landed after a newer pass (an
older password), so the next drift check sets the owner's password again."""
REASSERT_MS = 7 * 24 * 3600 * 1000

# -- what a pass carries -------------------------------------------------------------------------


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
    """The peers on the group that are not Ready: an apply of the order wakes them."""


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
    peers: tuple[str, ...]
    repair: bool
    reassert: bool = False


@dataclass(frozen=True)
class DropNote:
    """What the drop step acts on; no credential."""

    order: dict[str, Any]
    plan: TeardownPlan
    group: str
    group_uid: str
    site: str
    peers: tuple[str, ...] = field(default=())


# -- small helpers -------------------------------------------------------------------------------


def _now() -> datetime:
    return datetime.now(UTC)


def _pending_wait() -> float:
    jitter = random.random() * PENDING_REQUEUE_JITTER.total_seconds()  # noqa: S311 - load spreading
    return PENDING_REQUEUE_BASE.total_seconds() + jitter


def _busy_wait() -> float:
    """When a pass that found its group's slots taken comes back: soon, spread."""
    return 1.0 + random.random()  # noqa: S311 - load spreading


def _behind_circuit(pending: float, closes_in: float) -> float:
    spread = random.random()  # noqa: S311 - load spreading
    return compute_comeback_behind_circuit(pending, closes_in, spread)


def _wait_for(phase: Phase) -> float:
    return FAILED_REQUEUE.total_seconds() if phase is Phase.FAILED else _pending_wait()


def _verify_seconds() -> float:
    return load_settings().mysql_verify_seconds


def _write(ctx: Ctx, order: dict[str, Any], status: Mapping[str, Any]) -> dict[str, Any]:
    written = ctx.io.write_status(ctx.key, order, status, ctx.guard.check)
    ctx.runtime.note_ready(ctx.key, written)
    if written is not order:
        ctx.runtime.remember_write(ctx.key.cluster, written)
    return written


def _events(ctx: Ctx, order: Mapping[str, Any], events: tuple[Event, ...] | list[Event]) -> None:
    for event in events:
        ctx.io.event(ctx.key, order, event)


def _stop(
    ctx: Ctx,
    order: dict[str, Any],
    phase: Phase,
    reason: Reason,
    message: str,
    *,
    base: Mapping[str, Any] | None = None,
) -> float:
    """Record Pending or Failed (a Failed one as a Warning Event too); the wait before retrying.

    ``base`` is the status the stop is recorded over (the stored one unless given).
    """
    ctx.guard.check()
    status = compute_stopped_status(
        status_of(order) if base is None else base,
        phase=phase,
        reason=reason,
        message=message,
        generation=generation_of(order),
        now=_now(),
    )
    # Counted before the order shows it, so the error alert never lags what the order says.
    if phase is Phase.FAILED or reason is Reason.PRIMARY_UNAVAILABLE:
        RECONCILE_ERRORS.labels(sub_reconciler=APPLY, condition_type=READY).inc()
    _write(ctx, order, status)
    if phase is Phase.FAILED:
        ctx.io.event(ctx.key, order, Event(EventType.WARNING, str(reason), message))
    log.info("%s: %s", reason, message, extra={"order": str(ctx.key)})
    return _wait_for(phase)


def _peer_users(
    ctx: Ctx, peers: tuple[dict[str, Any], ...], needed: Callable[[dict[str, Any]], bool]
) -> dict[str, str]:
    """The usernames the owner Secrets of the ``needed`` peers name, by peer."""
    found: dict[str, str] = {}
    for peer in peers:
        if needed(peer):
            secret = ctx.io.owner(ctx.key, owner_secret_name(peer))
            if secret is not None and secret.username:
                found[str(metadata_of(peer).get("name"))] = secret.username
    return found


def _wake(ctx: Ctx, peers: tuple[str, ...], namespace: str) -> None:
    """Ask for a pass of each peer order: what it is checked against changed."""
    queue = ctx.runtime.queue
    for name in peers:
        queue.enqueue(IDENTITY.key(namespace, name))


# -- the entry -----------------------------------------------------------------------------------


def admit(ctx: KindPass[MysqlIO], order: dict[str, Any], previous: Gate | None) -> Admission[Gate]:
    """Run the gates, reading only as far as they need."""
    if previous is not None:
        return Admission(Verdict(True, previous.decision.phase is None), previous)
    kube, key = ctx.io, ctx.key
    group = kube.group(key, group_name(order))
    owner = kube.owner(key, owner_secret_name(order))
    first = plan_gates(compute_gate_observation(order, group, owner, {}))
    if first.reason in EARLY_REASONS or group is None:
        return Admission(Verdict(True, False), Gate(first, group))
    group_secrets = kube.group_secrets(key, group_secret_names(group))
    found = kube.peers(key, order, owner.username if owner else None)
    peers = found.orders
    me = claim_of(order, owner.username if owner else None)
    peer_users = _peer_users(
        ctx,
        peers,
        lambda peer: (
            needs_secret_username(me, claim_of(peer, None)) or needs_sibling_username(peer)
        ),
    )
    observed = compute_gate_observation(order, group, owner, group_secrets, peers, peer_users)
    decision = plan_gates(observed)
    try:
        reserved = compute_reserved_usernames(group_secrets)
    except (GroupSecretUnreadableError, GroupSecretInvalidError):
        reserved = frozenset()
    version = owner.resource_version if owner else ""
    gate = Gate(decision, group, reserved, peers, version, peer_users, found.waiting)
    return Admission(Verdict(True, decision.phase is None), gate)


def gated(ctx: KindPass[MysqlIO], order: dict[str, Any], gate: Gate) -> PassOutcome:
    """Record why a gate stopped the pass."""
    decision = gate.decision
    phase, reason = decision.phase or Phase.PENDING, decision.reason or Reason.GROUP_NOT_FOUND
    wait = _stop(ctx, order, phase, reason, decision.message)
    return PassOutcome(str(reason), requeue_after=wait)


def plan(ctx: KindPass[MysqlIO], order: dict[str, Any], gate: Gate) -> Plan[None]:
    """Apply when the inputs moved; check for drift when the verify period is due."""
    decision, group = gate.decision, gate.group or {}
    repair = decision.up_to_date
    if repair:
        period_ms = int(_verify_seconds() * 900)  # a little under the period: the come-back
        if not ctx.runtime.queue.claim_period(VERIFY, ctx.key, period_ms):
            return Plan((), converged=True)
    reassert = repair and ctx.runtime.queue.take_period(REASSERT, ctx.key)
    if decision.spec is None:  # the gates let the pass on only with a valid spec
        raise RuntimeError("the gates passed without a validated spec")
    siblings = [
        sibling_of(p, gate.peer_users.get(str(metadata_of(p).get("name")))) for p in gate.peers
    ]
    note = ApplyNote(
        order=note_order(order),
        spec=decision.spec,
        applied_hash=decision.applied_hash,
        group=group_name(order),
        group_uid=str(metadata_of(group).get("uid", "")),
        site=compute_active_site(group),
        owner_secret=owner_secret_name(order),
        owner_version=gate.owner_version,
        reserved=tuple(sorted(gate.reserved)),
        siblings=sibling_claims(siblings),
        peers=gate.waiting,
        repair=repair,
        reassert=reassert,
    )
    return Plan(("apply",), note, converged=True, reason="Verifying" if repair else "Applying")


def settle(
    ctx: KindPass[MysqlIO], order: dict[str, Any], gate: Gate, plan: Plan[None]
) -> PassOutcome:
    """Nothing to send: the order is as its last apply left it."""
    return PassOutcome("UpToDate", requeue_after=_verify_seconds())


# -- the apply step ------------------------------------------------------------------------------


def _group_moved(note: ApplyNote | DropNote, group: Mapping[str, Any] | None) -> bool:
    return group_moved(group, note.group_uid, note.site)


def _unreachable(note: ApplyNote | DropNote, problem: str) -> str:
    return f'cannot reach the primary of group "{note.group}": {problem}'


def apply(ctx: KindStep[MysqlIO], note: ApplyNote) -> StepResult:
    """Connect to the primary, look once, then refuse or apply and record."""
    kube, key, order = ctx.io, ctx.key, note.order
    owner = kube.secret(key, note.owner_secret)
    group = kube.group(key, note.group)
    if owner is None or owner.resource_version != note.owner_version or _group_moved(note, group):
        return StepResult("InputsMoved", done=True, again=True)
    assert group is not None  # noqa: S101 - _group_moved said so
    problem = check_active_site(group, note.site)
    if problem is not None:
        wait = _stop(
            ctx, order, Phase.PENDING, Reason.PRIMARY_UNAVAILABLE, _unreachable(note, problem)
        )
        return StepResult(str(Reason.PRIMARY_UNAVAILABLE), done=True, requeue_after=wait)
    try:
        with kube.session(key, group, note.site) as session:
            return _apply_on(ctx, note, session, owner)
    except LeaseLostError:
        # A newer pass may have run since, and a statement of this one (an ALTER USER with an
        # older password) may have landed after it: its next drift check sets the password.
        queue = ctx.runtime.queue
        queue.claim_period(REASSERT, key, REASSERT_MS)
        queue.release_period(VERIFY, key)
        raise
    except GroupBusyError:
        if note.repair:
            ctx.runtime.queue.release_period(VERIFY, key)
        return StepResult("GroupBusy", done=True, completed=False, requeue_after=_busy_wait())
    except (CredentialError, TLSRequiredError) as error:
        message, closes_in = _unreachable(note, str(error)), 0.0
    except AdminError as failure:
        if not failure.transient:
            raise
        message = _unreachable(note, str(failure))
        closes_in = failure.retry_after
    if note.repair:
        ctx.runtime.queue.release_period(VERIFY, key)
    wait = _stop(ctx, order, Phase.PENDING, Reason.PRIMARY_UNAVAILABLE, message)
    return StepResult(
        str(Reason.PRIMARY_UNAVAILABLE), done=True, requeue_after=_behind_circuit(wait, closes_in)
    )


def _apply_on(
    ctx: KindStep[MysqlIO], note: ApplyNote, session: MysqlSession, owner: SecretData
) -> StepResult:
    key, order, spec = ctx.key, note.order, note.spec
    prior = status_of(order)
    records = Records.of(prior)
    observed = parse_observation(
        session.query(
            sql.observe_query(
                spec.database_name, usernames_to_observe(spec, records), session.dialect
            )
        )
    )
    decided = plan_apply(
        spec,
        records,
        observed,
        dialect=session.dialect,
        group=note.group,
        site=note.site,
        claims=Claims(frozenset(note.reserved), note.siblings),
        repair=note.repair,
        reassert=note.reassert,
    )
    if isinstance(decided, Refusal):
        wait = _stop(ctx, order, decided.phase, decided.reason, decided.message)
        return StepResult(str(decided.reason), done=True, requeue_after=wait)
    if note.repair and not decided.statements:
        return StepResult("Verified", done=True, requeue_after=_verify_seconds())
    generation = generation_of(order)
    stored = order
    if not note.repair:
        ctx.guard.check()
        creating = compute_creating_status(
            prior, spec=spec, site=note.site, generation=generation, now=_now()
        )
        stored = _write(ctx, order, creating)
    try:
        session.execute(
            decided.statements,
            {OWNER_PASSWORD: owner.values.get("password", "")},
            check=ctx.guard.check,
        )
    except AdminError as failure:
        # The records of what cannot have run are withdrawn in the same write as the stop.
        ran = compute_ran_subjects(
            decided.statements, session.executed, failing_may_have_run=failure.may_have_run
        )
        base = compute_withdrawn_status(
            prior,
            status_of(stored),
            ran=ran,
            schema_present=observed.schema is not None,
            present=observed.users,
        )
        if failure.transient:
            message = f'transient MySQL error on group "{note.group}": {failure}'
            wait = _stop(ctx, stored, Phase.PENDING, Reason.PRIMARY_UNAVAILABLE, message, base=base)
            return StepResult(str(Reason.PRIMARY_UNAVAILABLE), done=True, requeue_after=wait)
        wait = _stop(ctx, stored, Phase.FAILED, Reason.MYSQL_ERROR, str(failure), base=base)
        return StepResult(str(Reason.MYSQL_ERROR), done=True, requeue_after=wait)
    ready = compute_ready_status(
        status_of(stored),
        spec=spec,
        site=note.site,
        applied_hash=note.applied_hash,
        generation=generation,
        now=_now(),
    )
    ctx.guard.check()
    stored = _write(ctx, stored, ready)
    repaired = [drift_repaired_event(decided, note.site)] if note.repair else []
    if session.read_only_bypassed:
        repaired.append(read_only_bypass_event(note.group, note.site))
    _events(ctx, stored, [*decided.events, *repaired])
    ctx.runtime.queue.claim_period(VERIFY, key, int(_verify_seconds() * 900))
    if not note.repair:
        _wake(ctx, note.peers, key.namespace)
    return StepResult(
        "Repaired" if note.repair else "Applied", done=True, requeue_after=_verify_seconds()
    )


# -- teardown ------------------------------------------------------------------------------------


def teardown(ctx: KindPass[MysqlIO], order: dict[str, Any]) -> Plan[Decided]:
    """Decide what deleting the order removes, reading only what the decision needs."""
    kube, key = ctx.io, ctx.key
    group = kube.group(key, group_name(order)) if needs_group_for_teardown(order) else None
    reserved: frozenset[str] | None = None
    peers: tuple[dict[str, Any], ...] = ()
    peer_names: tuple[str, ...] = ()
    if group is not None:
        try:
            reserved = compute_reserved_usernames(
                kube.group_secrets(key, group_secret_names(group))
            )
        except (GroupSecretUnreadableError, GroupSecretInvalidError):
            reserved = None
        found = kube.peers(key, order, None)
        peers, peer_names = found.orders, found.waiting
    peer_users = _peer_users(ctx, peers, needs_sibling_username)
    decided = plan_teardown(compute_teardown_observation(order, group, reserved, peers, peer_users))
    if decided.step is not TeardownStep.DROP:
        return Plan((), local=(decided, peer_names))
    note = DropNote(
        order=note_order(order),
        plan=decided,
        group=group_name(order),
        group_uid=str(metadata_of(group or {}).get("uid", "")),
        site=compute_active_site(group or {}),
        peers=peer_names,
    )
    return Plan(("drop",), note, reason="Dropping")


Decided = tuple[TeardownPlan, tuple[str, ...]]
"""What a teardown with nothing to drop settles by: its plan, and the peers to wake."""


def _stamp_deleting(ctx: Ctx, order: dict[str, Any], message: str = "") -> dict[str, Any]:
    ctx.guard.check()
    database = str((order.get("spec") or {}).get("databaseName") or "")
    status = compute_deleting_status(
        status_of(order),
        database=database,
        message=message,
        generation=generation_of(order),
        now=_now(),
    )
    return _write(ctx, order, status)


def _release(ctx: Ctx, order: dict[str, Any], peers: tuple[str, ...]) -> str:
    ctx.guard.check()
    kept = [f for f in metadata_of(order).get("finalizers") or () if f != IDENTITY.finalizer]
    ctx.io.set_finalizers(ctx.key, order, kept)
    _wake(ctx, peers, ctx.key.namespace)
    return "FinalizerReleased"


def finalize(ctx: KindPass[MysqlIO], order: dict[str, Any], plan: Plan[Decided]) -> PassOutcome:
    """Release the finalizer, or defer the drop with the order saying why."""
    if plan.local is None:
        raise RuntimeError("a teardown without a drop carries its plan")
    decided, peers = plan.local
    if decided.step is TeardownStep.DEFER:
        message = decided.events[0].message if decided.events else ""
        stored = _stamp_deleting(ctx, order, message)
        _events(ctx, stored, decided.events)
        return PassOutcome("DropDeferred", requeue_after=_pending_wait())
    _events(ctx, order, decided.events)
    return PassOutcome(_release(ctx, order, peers))


def drop(ctx: KindStep[MysqlIO], note: DropNote) -> StepResult:
    """Revoke and drop what the order created on the primary, then release the finalizer."""
    kube, key, decided = ctx.io, ctx.key, note.plan
    group = kube.group(key, note.group)
    if group is None or _group_moved(note, group):
        return StepResult("InputsMoved", done=True, again=True)
    order = _stamp_deleting(ctx, note.order)
    db = str((order.get("spec") or {}).get("databaseName") or "")
    try:
        with kube.session(key, group, note.site) as session:
            observed = parse_observation(
                session.query(sql.observe_query(db, decided.revoke, session.dialect))
            )
            if observed.read_only:
                raise AdminError(f"site {note.site} is read-only", code=None, transient=True)
            session.execute(
                render_drop(decided, observed, session.dialect), {}, check=ctx.guard.check
            )
    except GroupBusyError:
        return StepResult("GroupBusy", done=True, completed=False, requeue_after=_busy_wait())
    except (CredentialError, TLSRequiredError, AdminError) as error:
        RECONCILE_ERRORS.labels(sub_reconciler=DROP, condition_type=READY).inc()
        if isinstance(error, AdminError) and not error.transient:
            _stamp_deleting(ctx, order, f"dropping database {db}: {error}")
            raise
        message = f'transient MySQL error dropping database "{db}": {error}; retrying'
        stored = _stamp_deleting(
            ctx, order, f'dropping database {db}: waiting for the primary of group "{note.group}"'
        )
        _events(ctx, stored, [Event(EventType.WARNING, "DatabaseDropDeferred", message)])
        closes_in = error.retry_after if isinstance(error, AdminError) else 0.0
        wait = _behind_circuit(_pending_wait(), closes_in)
        return StepResult("DropDeferred", done=True, requeue_after=wait)
    after = kube.group(key, note.group)
    judged = plan_after_drop(
        decided, note.site, None if after is None else compute_active_site(after)
    )
    _events(ctx, order, judged.events)
    if not judged.release:
        return StepResult("DropDeferred", done=True, again=True)
    return StepResult(_release(ctx, order, note.peers), done=True)


SPEC = declare_kind(
    KindSpec(
        identity=IDENTITY,
        io=orders,
        read=lambda raw: raw,
        admit=admit,
        gated=gated,
        plan=plan,
        settle=settle,
        teardown=teardown,
        finalize=finalize,
        steps=(
            Step(
                "apply",
                Queue.PROVISION,
                apply,
                ApplyNote,
                "Apply a MysqlDatabase on its group's primary (or check it for drift).",
            ),
        ),
        teardown_steps=(
            Step(
                "drop",
                Queue.TEARDOWN,
                drop,
                DropNote,
                "Drop what a deleted MysqlDatabase created, then release its finalizer.",
            ),
        ),
    )
)
