"""The MysqlDatabase kind on the scaffold: its gates, its apply and drop steps, its records.

The entry reads the order's group and Secrets and its peers on the group (only as far as the
cheaper gates let it) and runs the gates; a gate that stops the pass records Pending or Failed.
An order its last apply left as it is sends nothing: once per ``TENANTDB_MYSQL_VERIFY_SECONDS``
the entry checks it on the primary with one read-only query, and leaves that check for quiet
refreshes (``check_drift``). Otherwise, or on drift, the ``apply`` step looks once and refuses
or writes the write-ahead stamp, runs what ``tenantdb.core.mysqldatabase.apply`` planned and
writes the Ready stamp. A deleting order follows ``plan_teardown``; the ``drop`` step revokes,
drops what the order created and releases the finalizer. An apply or a release wakes the
peers on the group that are not Ready. Passwords are read in the step that binds them and are
never in a note, a status, a log line or an Event. This module conducts: it reads through
``tenantdb.adapters.mysqldatabase`` and carries out what ``passes`` decides.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

from tasks import scaffold
from tasks.chain import StepResult
from tasks.reconcile import PassOutcome
from tasks.runtime import PerRegistry, workqueue
from tasks.scaffold import Admission, KindPass, KindStep, Plan, note_order
from tenantdb.adapters import mysqldatabase as mysql
from tenantdb.adapters.metrics import RECONCILE_ERRORS
from tenantdb.adapters.mysqladmin import AdminError, GroupBusyError
from tenantdb.adapters.mysqldatabase import PRIMARY_ERRORS, FetchedOrder, MysqlIO, MysqlSession
from tenantdb.adapters.workqueue import LeaseLostError
from tenantdb.core.events import Event
from tenantdb.core.mysqldatabase import passes
from tenantdb.core.mysqldatabase.apply import OWNER_PASSWORD
from tenantdb.core.mysqldatabase.naming import IDENTITY
from tenantdb.core.mysqldatabase.passes import ApplyNote, DropNote, Gate, PrimaryFailure, Stop
from tenantdb.core.mysqldatabase.reading import group_moved
from tenantdb.core.mysqldatabase.reasons import Reason
from tenantdb.core.mysqldatabase.teardown import TeardownPlan, TeardownStep
from tenantdb.core.objects import status_of
from tenantdb.core.pass_path import Verdict
from tenantdb.core.tasknames import Queue
from tenantdb.settings import load_settings

log = logging.getLogger(__name__)

READY = "Ready"
"""The condition_type of the error metric's counts."""

orders: PerRegistry[MysqlIO] = PerRegistry(
    lambda registry: mysql.with_claims(registry, workqueue().redis, load_settings().key_prefix)
)
"""The MysqlDatabase reads and writes of this worker process."""

Ctx = KindPass[MysqlIO] | KindStep[MysqlIO]
"""Where a pass is: its entry or one of its steps."""

Decided = tuple[TeardownPlan, tuple[str, ...]]
"""What a teardown with nothing to drop settles by: its plan, and the peers to wake."""


def _write(ctx: Ctx, order: dict[str, Any], status: Mapping[str, Any]) -> dict[str, Any]:
    written = ctx.io.write_status(ctx.key, order, status, ctx.guard.check)
    ctx.runtime.note_ready(ctx.key, written)
    ctx.runtime.remember_write(ctx.key.cluster, passes.own_write(order, written))
    return written


def _events(ctx: Ctx, order: Mapping[str, Any], events: Iterable[Event]) -> None:
    for event in events:
        ctx.io.event(ctx.key, order, event)


def _count(sub_reconciler: str) -> None:
    # Counted before the order shows it, so the error alert never lags what the order says.
    RECONCILE_ERRORS.labels(sub_reconciler=sub_reconciler, condition_type=READY).inc()


def _stop(
    ctx: Ctx, order: dict[str, Any], stop: Stop, base: Mapping[str, Any] | None = None
) -> float:
    """Record Pending or Failed (a Failed one as a Warning Event too) over ``base`` (the stored
    status unless given); the wait before retrying."""
    ctx.guard.check()
    record = passes.record_stop(stop, order, base, mysql.now())
    if record.counted:
        _count(passes.APPLY)
    _write(ctx, order, record.status)
    if record.warning is not None:
        ctx.io.event(ctx.key, order, record.warning)
    log.info("%s: %s", stop.reason, stop.message, extra={"order": str(ctx.key)})
    return mysql.stop_wait(stop.phase)


def _end(ctx: Ctx, order: dict[str, Any], end: passes.StepEnd) -> StepResult:
    """End a step as decided: record its stop, if any, and say when the order comes back."""
    waited = None if end.stop is None else _stop(ctx, order, end.stop)
    wait = passes.compute_end_wait(waited, end, mysql.verify_seconds())
    return StepResult(end.reason, done=True, requeue_after=wait, again=end.again)


def _wake(ctx: Ctx, peers: tuple[str, ...], namespace: str) -> None:
    """Ask for a pass of each peer order: what it is checked against changed."""
    for name in peers:
        ctx.runtime.queue.enqueue(IDENTITY.key(namespace, name))


# -- the entry -----------------------------------------------------------------------------------


def admit(ctx: KindPass[MysqlIO], order: FetchedOrder, previous: Gate | None) -> Admission[Gate]:
    """Run the gates, reading only as far as they need (once: a second call keeps the first)."""
    gate = previous or passes.decide_gate(mysql.read_gates(ctx.io, ctx.key, order))
    return Admission(Verdict(True, gate.decision.phase is None), gate)


def gated(ctx: KindPass[MysqlIO], order: FetchedOrder, gate: Gate) -> PassOutcome:
    """Record why a gate stopped the pass, once a refused order revoked its pattern grants."""
    revoking = passes.plan_refused_revocation(order.raw, gate)
    mysql.revoke_refused(ctx.io, ctx.key, gate.group, revoking, ctx.guard.check)
    stop = passes.gate_stop(gate.decision)
    return PassOutcome(str(stop.reason), requeue_after=_stop(ctx, order.raw, stop))


def plan(ctx: KindPass[MysqlIO], order: FetchedOrder, gate: Gate) -> Plan[None]:
    """Apply when the inputs moved. An order as its last apply left it is checked for drift
    in the entry when its verify period is due; only what the check did not confirm chains the
    apply step. An order with nothing to send leaves its drift check for quiet refreshes."""
    raw = note_order(order.raw)
    check = passes.compose_quiet_check(raw, gate)
    drift = mysql.check_drift(ctx.io, ctx.runtime.queue, ctx.key, check, quiet=False)
    if drift is not None and drift.confirmed:
        return Plan((), converged=True, reason=drift.value, quiet=check)
    applying = passes.compose_apply(raw, gate, drift)
    return Plan(("apply",), applying.note, converged=True, reason=applying.reason)


# -- the apply step ------------------------------------------------------------------------------


def apply(ctx: KindStep[MysqlIO], note: ApplyNote) -> StepResult:
    """Connect to the primary, look once, then refuse or apply and record."""
    kube, key = ctx.io, ctx.key
    owner, group = kube.secret(key, note.owner_secret), kube.group(key, note.group)
    end = passes.check_apply_start(note, owner, group)
    if end is not None or owner is None or group is None:
        return _end(ctx, note.order, end or passes.INPUTS_MOVED)
    try:
        with kube.session(key, group, note.site) as session:
            return _apply_on(ctx, note, session, owner.values.get("password", ""))
    except LeaseLostError:
        # A newer pass may have run since, and a statement of this one (an ALTER USER with an
        # older password) may have landed after it: its next drift check sets the password.
        ctx.runtime.queue.claim_period(passes.REASSERT, key, passes.REASSERT_MS)
        ctx.runtime.queue.release_period(passes.VERIFY, key)
        raise
    except GroupBusyError:
        _release_periods(ctx, note)
        return StepResult("GroupBusy", done=True, completed=False, requeue_after=mysql.busy_wait())
    except PRIMARY_ERRORS as error:
        failure = mysql.primary_failure(error)
        if not failure.transient:
            raise
        return _unreachable(ctx, note, failure)


def _release_periods(ctx: KindStep[MysqlIO], note: ApplyNote) -> None:
    period = passes.period_to_release(note)
    if period is not None:
        ctx.runtime.queue.release_period(period, ctx.key)


def _unreachable(ctx: KindStep[MysqlIO], note: ApplyNote, failure: PrimaryFailure) -> StepResult:
    """The primary cannot be worked on: Pending, back once its circuit may have closed."""
    _release_periods(ctx, note)
    wait = _stop(ctx, note.order, passes.unreachable_stop(note.group, failure.problem))
    wait = mysql.behind_circuit(wait, failure.closes_in)
    return StepResult(str(Reason.PRIMARY_UNAVAILABLE), done=True, requeue_after=wait)


def _apply_on(
    ctx: KindStep[MysqlIO], note: ApplyNote, session: MysqlSession, password: str
) -> StepResult:
    order = note.order
    observed = mysql.observe(session, note.spec.database_name, passes.apply_usernames(note))
    step = passes.plan_apply_step(note, observed, session.dialect)
    if step.end is not None:
        return _end(ctx, order, step.end)
    stored = order
    stamp = passes.compute_apply_stamp(note, mysql.now())
    if stamp is not None:
        ctx.guard.check()
        stored = _write(ctx, order, stamp)
    try:
        session.execute(step.plan.statements, {OWNER_PASSWORD: password}, check=ctx.guard.check)
    except AdminError as error:
        failure = mysql.batch_failure(error, session.executed)
        failed = passes.judge_batch_failure(note, step, status_of(stored), failure)
        wait = _stop(ctx, stored, failed.stop, base=failed.base)
        return StepResult(str(failed.stop.reason), done=True, requeue_after=wait)
    ready = passes.compute_applied_status(note, status_of(stored), mysql.now())
    ctx.guard.check()
    stored = _write(ctx, stored, ready)
    applied = passes.judge_applied(note, step, read_only_bypassed=session.read_only_bypassed)
    _events(ctx, stored, applied.events)
    ctx.runtime.queue.claim_period(passes.VERIFY, ctx.key, mysql.verify_ms())
    _wake(ctx, applied.wake, ctx.key.namespace)
    return StepResult(applied.reason, done=True, requeue_after=mysql.verify_seconds())


# -- teardown ------------------------------------------------------------------------------------


def teardown(ctx: KindPass[MysqlIO], order: FetchedOrder) -> Plan[Decided]:
    """Decide what deleting the order removes, reading only what the decision needs."""
    read = mysql.read_teardown(ctx.io, ctx.key, order)
    decided = passes.decide_teardown(order.raw, read)
    if decided.step is not TeardownStep.DROP:
        return Plan((), local=(decided, read.waiting))
    note = passes.compose_drop(note_order(order.raw), decided, read.group, read.waiting)
    return Plan(("drop",), note, reason="Dropping")


def _stamp_deleting(ctx: Ctx, order: dict[str, Any], message: str = "") -> dict[str, Any]:
    ctx.guard.check()
    return _write(ctx, order, passes.compute_deleting_stamp(order, message, mysql.now()))


def _release(ctx: Ctx, order: dict[str, Any], peers: tuple[str, ...]) -> str:
    ctx.guard.check()
    ctx.io.set_finalizers(ctx.key, order, passes.finalizers_without(order, IDENTITY.finalizer))
    _wake(ctx, peers, ctx.key.namespace)
    return "FinalizerReleased"


def finalize(ctx: KindPass[MysqlIO], order: FetchedOrder, plan: Plan[Decided]) -> PassOutcome:
    """Release the finalizer, or defer the drop with the order saying why."""
    if plan.local is None:
        raise RuntimeError("a teardown without a drop carries its plan")
    (decided, peers), raw = plan.local, order.raw
    if decided.step is TeardownStep.DEFER:
        stored = _stamp_deleting(ctx, raw, passes.deferral_message(decided))
        _events(ctx, stored, decided.events)
        return PassOutcome("DropDeferred", requeue_after=mysql.pending_wait())
    _events(ctx, raw, decided.events)
    return PassOutcome(_release(ctx, raw, peers))


def drop(ctx: KindStep[MysqlIO], note: DropNote) -> StepResult:
    """Revoke and drop what the order created on the primary, then release the finalizer."""
    kube, key, decided = ctx.io, ctx.key, note.plan
    group = kube.group(key, note.group)
    if group is None or group_moved(group, note.group_uid, note.site):
        return StepResult("InputsMoved", done=True, again=True)
    order = _stamp_deleting(ctx, note.order)
    db = passes.database_of(order)
    try:
        mysql.run_drop(kube, key, group, note.site, decided, db, ctx.guard.check)
    except GroupBusyError:
        return StepResult("GroupBusy", done=True, completed=False, requeue_after=mysql.busy_wait())
    except PRIMARY_ERRORS as error:
        failure = mysql.primary_failure(error)
        _count(passes.DROP)
        failed = passes.judge_drop_failure(db, note.group, failure)
        stored = _stamp_deleting(ctx, order, failed.message)
        if failed.fatal:
            raise
        _events(ctx, stored, failed.events)
        wait = mysql.behind_circuit(mysql.pending_wait(), failure.closes_in)
        return StepResult("DropDeferred", done=True, requeue_after=wait)
    judged = passes.judge_after_drop(decided, note.site, kube.group(key, note.group))
    _events(ctx, order, judged.events)
    if not judged.release:
        return StepResult("DropDeferred", done=True, again=True)
    return StepResult(_release(ctx, order, note.peers), done=True)


APPLY_DOC = "Apply a MysqlDatabase on its group's primary (or check it for drift)."
DROP_DOC = "Drop what a deleted MysqlDatabase created, then release its finalizer."

SPEC = scaffold.declare_kind(
    scaffold.KindSpec(
        identity=IDENTITY,
        io=orders,
        read=mysql.fetched,
        admit=admit,
        gated=gated,
        plan=plan,
        # Nothing to send: the order is as its last apply left it (checked now or lately).
        settle=lambda ctx, order, gate, plan: PassOutcome(
            plan.reason, requeue_after=mysql.verify_seconds()
        ),
        teardown=teardown,
        finalize=finalize,
        steps=(scaffold.Step("apply", Queue.PROVISION, apply, ApplyNote, APPLY_DOC),),
        teardown_steps=(scaffold.Step("drop", Queue.TEARDOWN, drop, DropNote, DROP_DOC),),
        # A refresh the watches vouch for reads nothing from Kubernetes: only the drift check.
        quiet=lambda ctx, check: passes.confirms(
            mysql.check_drift(ctx.io, ctx.runtime.queue, ctx.key, check, quiet=True)
        ),
        quiet_note=passes.QuietCheck,
    )
)
