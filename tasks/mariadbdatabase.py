"""The MariaDBDatabase kind, declared on the scaffold: its gates, plans, steps and records.

The scaffold (``tasks.scaffold``) leads each pass. This module says what the kind does at each
turn: its gates read the ControlPlane (only past the cluster-name gate) and decide; its plan
reads each child the pass decides on once (the OpenBao role only when the plan reaches it) and,
when the provision leg has nothing to write and converged, the two Secrets delivery copies
between; a pass with nothing to write is recorded, and delivered from what it read, in the
entry. Otherwise the chain holds only the steps with a write (identity, role, database,
credentials, then delivery once the leg converged); each performs its own actions of the entry's
plan and reads nothing again, save the delivery step, which reads the two Secrets itself. The
last step records the pass. Teardown works the same way: observed and planned once, its chain
holds the steps with a delete, then finalize, which decides on the deletes the plan issued.

A step that fails records what the reference records (OpenBaoError, DeliveryError) and retries
with backoff under the pass's lease, at a fence of its own; DeliveryReady keeps its value when
the provision leg fails. A leg that refuses with an error (a child of its name it did not
create) records the refusal and backs off through the entry's retry. Teardown writes no status:
while the ControlPlane exists it holds the finalizer while anything was still listed, and fails
open once it is gone.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError

from tasks.chain import RetryStepError, StepResult
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
    emit,
    note_order,
)
from tenantdb.adapters.clusters import ClusterRegistry
from tenantdb.adapters.kube import KubeError
from tenantdb.adapters.mariadbdatabase import (
    ActionError,
    FetchedOrder,
    MariaDBOrders,
    ReadError,
    UnreadableError,
    describe_validation,
)
from tenantdb.adapters.metrics import RECONCILE_ERRORS, observe_leg, observe_leg_since
from tenantdb.adapters.schemaindex import SchemaIndex
from tenantdb.core.actions import ApplyObject
from tenantdb.core.mariadbdatabase.actions import EnsureRole
from tenantdb.core.mariadbdatabase.conditions import compute_unreadable_status
from tenantdb.core.mariadbdatabase.delivery import (
    DeliveryResult,
    compute_delivery_result,
    plan_delivery,
    plan_delivery_failure,
)
from tenantdb.core.mariadbdatabase.gates import (
    AdmissionDecision,
    AdmissionObservation,
    plan_admission,
    plan_unreadable_control_plane,
    plan_unreadable_teardown,
    should_read_control_plane,
)
from tenantdb.core.mariadbdatabase.models import ControlPlane, MariaDBDatabase
from tenantdb.core.mariadbdatabase.naming import FINALIZER, IDENTITY
from tenantdb.core.mariadbdatabase.passes import PassRecord, compute_pass_record, describe_status
from tenantdb.core.mariadbdatabase.provision import (
    LegResult,
    ProvisionObservation,
    ProvisionPlan,
    plan_provision,
    plan_provision_failure,
    plan_unreadable,
)
from tenantdb.core.mariadbdatabase.reasons import ConditionType, Reason, msg_order_unreadable
from tenantdb.core.mariadbdatabase.results import ORDER_REFRESH_AFTER, PassResult
from tenantdb.core.mariadbdatabase.scope import OrderScope, compute_order_scope
from tenantdb.core.mariadbdatabase.steps import (
    DELIVERY_STEP,
    FINALIZE_STEP,
    ProvisionStep,
    TeardownStep,
    classify_provision_action,
    classify_teardown_action,
    classify_teardown_log,
    plan_chain_steps,
    plan_teardown_steps,
)
from tenantdb.core.mariadbdatabase.teardown import (
    TeardownMode,
    TeardownPlan,
    compute_teardown_result,
    describe_teardown_failure,
    plan_teardown,
)
from tenantdb.core.objects import Secret
from tenantdb.core.pass_path import Verdict
from tenantdb.core.tasknames import Queue
from tenantdb.settings import load_settings

log = logging.getLogger(__name__)

PROVISION = "MariaDBDatabaseProvision"
DELIVERY = "MariaDBDatabaseDelivery"
"""The reconcile-duration and error metrics' sub_reconciler labels of the two legs."""


def _build_orders(registry: ClusterRegistry) -> MariaDBOrders:
    settings = load_settings()
    schemas = SchemaIndex(workqueue().redis, settings.key_prefix)
    return MariaDBOrders(registry, settings, schemas=schemas)


orders = PerRegistry(_build_orders)
"""The I/O of this worker process, rebuilt when the cluster configuration files change."""

Ctx = KindPass[MariaDBOrders] | KindStep[MariaDBOrders]
"""Where a pass is: its entry or one of its steps."""


def _seconds(result: PassResult) -> float | None:
    return None if result.requeue_after is None else result.requeue_after.total_seconds()


def _outcome(rec: PassRecord) -> PassOutcome:
    return PassOutcome(describe_status(rec.status), _seconds(rec.result))


# -- the entry: gates, plan, settle ----------------------------------------------------------


def read(raw: dict[str, Any]) -> FetchedOrder:
    """The order as stored, and its typed view."""
    return FetchedOrder(raw, MariaDBDatabase.model_validate(raw))


@dataclass(frozen=True)
class Gate:
    """The ControlPlane the gates read (None: not found, or not read), and their decision."""

    cp: ControlPlane | None
    decision: AdmissionDecision


def admit(
    ctx: KindPass[MariaDBOrders], fetched: FetchedOrder, previous: Gate | None
) -> Admission[Gate]:
    """Run the gates, reading the ControlPlane once and only past the cluster-name gate."""
    if previous is not None:
        cp = previous.cp
    elif should_read_control_plane(ctx.key.cluster):
        try:
            cp = ctx.io.fetch_control_plane(fetched.order)
        except UnreadableError as exc:
            decision = plan_unreadable_control_plane(exc.context, exc.message)
            return Admission(Verdict(add_finalizer=False, proceed=False), Gate(None, decision))
    else:
        cp = None
    decision = plan_admission(AdmissionObservation(fetched.order, ctx.key.cluster, cp))
    # The gates go on only past a ControlPlane they read.
    verdict = Verdict(add_finalizer=decision.add_finalizer, proceed=decision.outcome.proceed)
    return Admission(verdict, Gate(cp, decision))


def gated(ctx: KindPass[MariaDBOrders], fetched: FetchedOrder, gate: Gate) -> PassOutcome:
    """Record the gate that stopped the pass."""
    return _outcome(record(ctx, fetched, gate.decision))


@dataclass(frozen=True)
class PassNote:
    """What the entry observed and decided, left for the chain's steps so none reads it again.

    Holds the order and ControlPlane as read, the provision plan (desired objects and the leg's
    outcome; never a credential) and the chain's steps in order.
    """

    order: dict[str, Any]
    control_plane: dict[str, Any]
    plan: ProvisionPlan
    steps: tuple[str, ...]
    provision_started: float
    """When the entry began to observe the provision leg, in epoch seconds."""

    def fetched(self) -> FetchedOrder:
        """The order as the entry read it."""
        return read(self.order)

    def cp(self) -> ControlPlane:
        """The ControlPlane as the entry read it."""
        return ControlPlane.model_validate(self.control_plane)


@dataclass(frozen=True)
class Settled:
    """What the entry keeps in memory to settle a pass with nothing to write."""

    plan: ProvisionPlan
    delivery: DeliveryResult | None = None
    delivery_started: float = 0.0


def plan(ctx: KindPass[MariaDBOrders], fetched: FetchedOrder, gate: Gate) -> Plan[Settled]:
    """Observe the children once and plan; deliver from the entry when nothing else writes."""
    io, cp = ctx.io, gate.cp
    if cp is None:
        raise TypeError("the gates let no MariaDBDatabase pass without a ControlPlane plan")
    scope = compute_order_scope(fetched.order, ctx.key.cluster, cp)
    provision_started = time.time()
    try:
        observation, planned = _observe_provision(io, fetched, scope)
    except UnreadableError as exc:
        unreadable = ProvisionPlan((), plan_unreadable(exc.context, exc.message))
        return Plan((), converged=False, local=Settled(unreadable))
    converged = planned.result.outcome.proceed
    steps = plan_chain_steps(planned.actions, converged)
    if not any(step != DELIVERY_STEP for step in steps):
        observe_leg_since(PROVISION, provision_started)
    settled = Settled(planned)
    if not steps and converged:
        settled = replace(settled, delivery_started=time.time())
        try:
            delivery_observation = io.fetch_delivery(fetched.order, scope, cp, observation)
        except ReadError as error:
            settled = replace(settled, delivery=plan_delivery_failure(error.context, error.message))
        else:
            delivery_plan = plan_delivery(delivery_observation)
            if delivery_plan.apply is None:
                delivery = compute_delivery_result(delivery_observation, delivery_plan, None)
                settled = replace(settled, delivery=delivery)
            else:
                steps = (DELIVERY_STEP,)
    if not steps:
        return Plan((), converged=converged, local=settled)
    note = PassNote(
        note_order(fetched.raw),
        cp.model_dump(mode="json", by_alias=True),
        planned,
        steps,
        provision_started,
    )
    return Plan(steps, note, converged=converged, reason="Provisioning")


def _observe_provision(
    io: MariaDBOrders, fetched: FetchedOrder, scope: OrderScope
) -> tuple[ProvisionObservation, ProvisionPlan]:
    try:
        observation = io.fetch_provision(fetched.order, scope, io.fetch_connection(scope))
    except KubeError:
        RECONCILE_ERRORS.labels(
            sub_reconciler=PROVISION, condition_type=ConditionType.DATABASE_READY
        ).inc()
        raise
    planned = plan_provision(observation)
    role = next((a for a in planned.actions if isinstance(a, EnsureRole)), None)
    if role is not None:
        # Only a plan that reaches the role asks OpenBao how it stands.
        observation = io.observe_role(observation, role)
        planned = plan_provision(observation)
    return observation, planned


Unmade = TeardownPlan | AdmissionDecision
"""What a teardown with nothing to delete settles by: its plan, or why it is held."""


class RefusedError(Exception):
    """A leg refused with an error its conditions already say; the pass backs off."""


def settle(
    ctx: KindPass[MariaDBOrders], fetched: FetchedOrder, gate: Gate, plan: Plan[Settled]
) -> PassOutcome:
    """Record a pass with nothing to write: waiting, refused, or delivered from the entry."""
    settled = plan.local
    if settled is None:
        raise TypeError("a MariaDBDatabase plan without a write carries what settles it")
    provision = settled.plan.result
    if provision.outcome.error is not None:
        _record_refusal(ctx, fetched, gate.decision, provision)
        raise RefusedError(provision.outcome.error)
    if settled.delivery is None:
        return _outcome(record(ctx, fetched, gate.decision, provision))
    observe_leg_since(DELIVERY, settled.delivery_started)
    delivery = settled.delivery
    if delivery.outcome.error is not None:
        # Counted before the order shows it, so the error alert never lags what the order says.
        RECONCILE_ERRORS.labels(
            sub_reconciler=DELIVERY, condition_type=ConditionType.DELIVERY_READY
        ).inc()
    rec = record(ctx, fetched, gate.decision, provision, delivery)
    if delivery.outcome.error is not None:
        raise ReadError("delivery", delivery.outcome.error)
    return _outcome(rec)


def _record_refusal(
    ctx: Ctx,
    fetched: FetchedOrder,
    admission: AdmissionDecision,
    provision: LegResult,
) -> None:
    """Count a provision leg that refused with an error, then record it."""
    RECONCILE_ERRORS.labels(
        sub_reconciler=PROVISION, condition_type=ConditionType.DATABASE_READY
    ).inc()
    record(ctx, fetched, admission, provision)


def record(
    ctx: Ctx,
    fetched: FetchedOrder,
    admission: AdmissionDecision,
    provision: LegResult | None = None,
    delivery: DeliveryResult | None = None,
    *,
    written: Callable[[dict[str, Any]], None] | None = None,
) -> PassRecord:
    """Compose the pass with core, log what it asks, write the status when it changed.

    ``written`` receives the order as the status write left it.
    """
    check, key = ctx.guard.check, ctx.key
    rec = compute_pass_record(
        fetched.order,
        cluster=key.cluster,
        now=datetime.now(UTC),
        admission=admission,
        provision=provision,
        delivery=delivery,
    )
    emit(key, rec.logs)
    if rec.write_status:
        check()
        stored = ctx.io.write_status(key, fetched, rec.status, check)
        ctx.runtime.note_ready(key, stored)
        ctx.io.record_events(key, stored, rec.events)
        if written is not None:
            written(stored)
    return rec


# -- provision -----------------------------------------------------------------------------------


def _admission(ctx: KindStep[MariaDBOrders], note: PassNote) -> AdmissionDecision:
    return plan_admission(AdmissionObservation(note.fetched().order, ctx.key.cluster, note.cp()))


def _renote(ctx: KindStep[MariaDBOrders], note: PassNote) -> Callable[[dict[str, Any]], None]:
    # A step that records a failure and retries leaves the order as written in the note: the
    # retry, and the steps after it, must decide over the status now stored, not the entry's.
    return lambda stored: ctx.save_note(replace(note, order=stored))


def _fail_provision(
    ctx: KindStep[MariaDBOrders],
    note: PassNote,
    admission: AdmissionDecision,
    index: int,
    error: ActionError,
) -> RetryStepError:
    fetched, plan = note.fetched(), note.plan
    leg = plan_provision_failure(plan, index, str(error), status_code=error.status)
    RECONCILE_ERRORS.labels(
        sub_reconciler=PROVISION, condition_type=ConditionType.DATABASE_READY
    ).inc()
    rec = record(ctx, fetched, admission, provision=leg, written=_renote(ctx, note))
    return RetryStepError(describe_status(rec.status), leg.outcome.error or str(error))


def provision_body(
    step: ProvisionStep,
) -> Callable[[KindStep[MariaDBOrders], PassNote], StepResult]:
    """The body of one provision step: its writes of the entry's plan, in plan order."""

    def body(ctx: KindStep[MariaDBOrders], note: PassNote) -> StepResult:
        fetched, admission, plan = note.fetched(), _admission(ctx, note), note.plan
        for index, action in enumerate(plan.actions):
            if classify_provision_action(action) is not step:
                continue
            ctx.guard.check()
            try:
                answer = ctx.io.run(action, ctx.guard.check)
            except ActionError as error:
                observe_leg_since(PROVISION, note.provision_started)
                raise _fail_provision(ctx, note, admission, index, error) from None
            if isinstance(action, ApplyObject):
                ctx.runtime.remember_write(action.ref.cluster, answer)
        following = note.steps[ctx.step :]
        if not following or following[0] == DELIVERY_STEP:
            observe_leg_since(PROVISION, note.provision_started)
        if following:
            return StepResult(f"{step.name.title()}Done")
        if plan.result.outcome.error is not None:
            # The writes are done; the next pass observes them, refuses again and backs off.
            _record_refusal(ctx, fetched, admission, plan.result)
            return StepResult("Refused", done=True, completed=False, again=True)
        rec = record(ctx, fetched, admission, provision=plan.result)
        return StepResult(
            describe_status(rec.status), done=True, requeue_after=_seconds(rec.result)
        )

    return body


# -- delivery ------------------------------------------------------------------------------------


def deliver_body(ctx: KindStep[MariaDBOrders], note: PassNote) -> StepResult:
    """Deliver the credential beside the order, record the pass, and end it.

    It reads the issued Secret and the delivered one itself: a credential never travels in a
    note, only from the Secret ESO wrote into the Secret beside the order.
    """
    fetched, admission, cp = note.fetched(), _admission(ctx, note), note.cp()
    scope = compute_order_scope(fetched.order, ctx.key.cluster, cp)
    with observe_leg(DELIVERY):
        delivery = _deliver(ctx, ctx.io, fetched, scope, cp)
    failure = delivery.outcome.error
    if failure is not None:
        RECONCILE_ERRORS.labels(
            sub_reconciler=DELIVERY, condition_type=ConditionType.DELIVERY_READY
        ).inc()
    rec = record(
        ctx,
        fetched,
        admission,
        note.plan.result,
        delivery,
        written=None if failure is None else _renote(ctx, note),
    )
    if failure is not None:
        raise RetryStepError("DeliveryError", failure)
    return StepResult(describe_status(rec.status), done=True, requeue_after=_seconds(rec.result))


def _deliver(
    ctx: KindStep[MariaDBOrders],
    io: MariaDBOrders,
    fetched: FetchedOrder,
    scope: OrderScope,
    cp: ControlPlane,
) -> DeliveryResult:
    try:
        observation = io.fetch_delivery(fetched.order, scope, cp)
    except ReadError as error:
        return plan_delivery_failure(error.context, error.message)
    plan = plan_delivery(observation)
    applied: Secret | None = None
    if plan.apply is not None:
        ctx.guard.check()
        try:
            answer = io.run(plan.apply, ctx.guard.check)
        except ActionError as error:
            ref = plan.apply.ref
            return plan_delivery_failure(
                f"delivering Secret {ref.namespace}/{ref.name}", str(error)
            )
        ctx.runtime.remember_write(plan.apply.ref.cluster, answer)
        applied = None if answer is None else Secret.model_validate(answer)
    return compute_delivery_result(observation, plan, applied)


# -- teardown ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TeardownNote:
    """What the teardown's entry observed and planned, left for its chain's steps.

    ``failures`` collects, in fail-open mode, each failed action's index and error text, so the
    finalize step's log line says what failed. Never a credential.
    """

    order: dict[str, Any]
    plan: TeardownPlan
    steps: tuple[str, ...]
    failures: tuple[tuple[int, str], ...] = ()

    def fetched(self) -> FetchedOrder:
        """The order as the entry read it."""
        return read(self.order)


def teardown(ctx: KindPass[MariaDBOrders], fetched: FetchedOrder) -> Plan[Unmade]:
    """Observe the children once and plan their removal; finalize here or hand over the deletes."""
    io = ctx.io
    try:
        cp = io.fetch_control_plane(fetched.order)
        scope = compute_order_scope(fetched.order, ctx.key.cluster, cp)
        observation = io.fetch_teardown(
            fetched.order,
            scope,
            control_plane_present=cp is not None,
            connection=io.fetch_connection(scope),
        )
    except UnreadableError as exc:
        return Plan((), local=plan_unreadable_teardown(exc.context, exc.message))
    io.release_schema(fetched.order, scope)
    planned = plan_teardown(observation)
    steps = plan_teardown_steps(planned.actions)
    if steps == (FINALIZE_STEP,):
        return Plan((), local=planned)
    return Plan(steps, TeardownNote(note_order(fetched.raw), planned, steps), reason="TearingDown")


def finalize(
    ctx: KindPass[MariaDBOrders], fetched: FetchedOrder, plan: Plan[Unmade]
) -> PassOutcome:
    """Decide the finalizer in the entry when the teardown has nothing to delete, or hold it."""
    planned = plan.local
    if planned is None:
        raise TypeError("a MariaDBDatabase teardown without a delete carries its plan")
    if isinstance(planned, AdmissionDecision):
        # Held on an object that does not parse: named on the order, nothing removed.
        return _outcome(record(ctx, fetched, planned))
    result = _finalize(ctx, fetched, planned, ())
    return PassOutcome(result.reason, result.requeue_after)


def teardown_body(
    step: TeardownStep,
) -> Callable[[KindStep[MariaDBOrders], TeardownNote], StepResult]:
    """The body of one teardown step: its deletes of the entry's plan, in plan order."""

    def body(ctx: KindStep[MariaDBOrders], note: TeardownNote) -> StepResult:
        plan = note.plan
        emit(ctx.key, (e for e in plan.logs if classify_teardown_log(e) is step))
        failures = list(note.failures)
        for index, action in enumerate(plan.actions):
            if classify_teardown_action(action) is not step:
                continue
            ctx.guard.check()
            try:
                ctx.io.run(action, ctx.guard.check)
            except ActionError as error:
                worded = describe_teardown_failure(action, str(error))
                if plan.mode is TeardownMode.HELD:
                    raise RetryStepError("TeardownHeld", worded) from None
                log.error("%s", worded, extra={"order": str(ctx.key)})
                failures.append((index, str(error)))
        if len(failures) > len(note.failures):
            ctx.save_note(replace(note, failures=tuple(failures)))
            return StepResult("Failed")
        return StepResult("Done")

    return body


def _finalize(
    ctx: Ctx,
    fetched: FetchedOrder,
    plan: TeardownPlan,
    failures: tuple[tuple[int, str], ...],
) -> StepResult:
    """Decide the finalizer on the deletes the plan issued, as the reference counts them."""
    check, key = ctx.guard.check, ctx.key
    decision = compute_teardown_result(plan, failures)
    emit(key, decision.logs)
    if decision.release_finalizer:
        check()
        remaining = [f for f in fetched.order.metadata.finalizers if f != FINALIZER]
        ctx.io.set_finalizers(key, fetched, remaining)
        return StepResult("FinalizerReleased", done=True)
    return StepResult("TeardownHeld", done=True, requeue_after=_seconds(decision.result))


def finalize_body(ctx: KindStep[MariaDBOrders], note: TeardownNote) -> StepResult:
    """Decide the finalizer after the deletes were issued, and end the pass."""
    return _finalize(ctx, note.fetched(), note.plan, note.failures)


def unreadable(
    ctx: KindPass[MariaDBOrders], raw: dict[str, Any], error: ValidationError
) -> PassOutcome:
    """Say on an order whose own body does not parse which fields fail, and do nothing else.

    Without the typed order no child can be planned, and a deleting order keeps its finalizer
    and its children, since what to remove depends on it. The status patch is made from the
    order as stored (the status itself may be what does not parse). The order's next change
    or the 10-minute refresh brings the next pass; nothing is retried meanwhile.
    """
    meta = raw.get("metadata") or {}
    message = msg_order_unreadable(
        describe_validation(error), deleting=bool(meta.get("deletionTimestamp"))
    )
    generation = int(meta.get("generation") or 0)
    log.warning("%s", message, extra={"order": str(ctx.key)})
    ctx.guard.check()
    ctx.io.write_unreadable_status(
        ctx.key,
        raw,
        lambda stored: compute_unreadable_status(
            stored, message, generation=generation, now=datetime.now(UTC)
        ),
        ctx.guard.check,
    )
    return PassOutcome(Reason.ORDER_UNREADABLE.value, ORDER_REFRESH_AFTER.total_seconds())


# -- the declaration -----------------------------------------------------------------------------

SPEC = declare_kind(
    KindSpec(
        identity=IDENTITY,
        io=orders,
        unreadable=unreadable,
        read=read,
        admit=admit,
        gated=gated,
        plan=plan,
        settle=settle,
        teardown=teardown,
        finalize=finalize,
        steps=(
            *(
                Step(
                    step.name.lower(),
                    Queue.PROVISION,
                    provision_body(step),
                    PassNote,
                    f"Provision step {step.name.lower()} of a MariaDBDatabase pass.",
                )
                for step in ProvisionStep
            ),
            Step(
                DELIVERY_STEP,
                Queue.DELIVERY,
                deliver_body,
                PassNote,
                "Delivery step of a MariaDBDatabase pass: the Secret beside the order.",
            ),
        ),
        teardown_steps=(
            *(
                Step(
                    step.name.lower(),
                    Queue.TEARDOWN,
                    teardown_body(step),
                    TeardownNote,
                    f"Teardown step {step.name.lower()} of a MariaDBDatabase.",
                )
                for step in TeardownStep
            ),
            Step(
                FINALIZE_STEP,
                Queue.TEARDOWN,
                finalize_body,
                TeardownNote,
                "Final teardown step: decide the finalizer on the deletes the plan issued.",
            ),
        ),
    )
)
