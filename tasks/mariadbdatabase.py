"""The MariaDBDatabase pass as Celery tasks: entry, provision, delivery and teardown chains.

The entry (registered for the ``mariadbdatabase`` kind of ``tenantdb.reconcile.order``) reads the
order, its ControlPlane and then each child the pass decides on once, and takes the path
``tenantdb.core.paths`` names: gone or released (nothing to do); teardown; stopped at a gate
(record the status); up to date (nothing to write: deliver or confirm the delivery from what it
read, record, end); or a chain of only the steps with a write (identity, role, database,
credentials, then delivery once the leg converged). The entry leaves its observation and plan in
the pass's note; each step performs its own actions of that plan and reads nothing again, save
the delivery step, which reads the two Secrets it copies between. The last step records the
pass. Teardown works the same way: observed and planned once, its chain holds the steps with a
delete, then finalize, which decides on the deletes the plan issued.

A step that fails records what the reference records (OpenBaoError, DeliveryError) and retries
with backoff under the pass's lease, at a fence of its own; DeliveryReady keeps its value when
the provision leg fails. Teardown writes no status: while the ControlPlane exists it holds the
finalizer while anything was still listed, and fails open once it is gone.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from celery import Signature, chain, shared_task
from pydantic import TypeAdapter

from tasks.chain import RetryStepError, StepContext, StepResult, run_step
from tasks.reconcile import PassContext, PassOutcome, register_pass
from tasks.runtime import AnyTask, handover_ms, workqueue
from tenantdb.adapters.clusters import (
    ClusterUnavailableError,
    compute_config_stamp,
    load_cluster_config,
)
from tenantdb.adapters.kube import KubeError
from tenantdb.adapters.mariadb_orders import (
    ActionError,
    FetchedOrder,
    MariaDBOrders,
    ReadError,
)
from tenantdb.adapters.metrics import PASSES, RECONCILE_ERRORS, observe_leg, observe_leg_since
from tenantdb.adapters.workqueue import Lease
from tenantdb.core.actions import EnsureRole, LogEvent, LogLevel
from tenantdb.core.keys import OrderKey
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
    should_read_control_plane,
)
from tenantdb.core.mariadbdatabase.models import ControlPlane, MariaDBDatabase
from tenantdb.core.mariadbdatabase.naming import FINALIZER
from tenantdb.core.mariadbdatabase.passes import PassRecord, compute_pass_record, describe_status
from tenantdb.core.mariadbdatabase.provision import (
    LegResult,
    ProvisionObservation,
    ProvisionPlan,
    plan_provision,
    plan_provision_failure,
)
from tenantdb.core.mariadbdatabase.reasons import ConditionType
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
from tenantdb.core.paths import (
    LegPath,
    OrderPath,
    classify_admission,
    classify_order,
    classify_plan,
)
from tenantdb.core.results import PassResult
from tenantdb.core.tasknames import RECONCILE_ABORT, Queue, step_task_name
from tenantdb.settings import load_settings

log = logging.getLogger(__name__)

KIND = "mariadbdatabase"
PROVISION = "MariaDBDatabaseProvision"
DELIVERY = "MariaDBDatabaseDelivery"

PROVISION_TASKS = {
    step: step_task_name(KIND, Queue.PROVISION, step.name.lower()) for step in ProvisionStep
}
DELIVERY_TASK = step_task_name(KIND, Queue.DELIVERY, "secret")
TEARDOWN_TASKS = {
    step: step_task_name(KIND, Queue.TEARDOWN, step.name.lower()) for step in TeardownStep
}
FINALIZE_TASK = step_task_name(KIND, Queue.TEARDOWN, "finalize")

_LEVELS = {
    LogLevel.INFO: logging.INFO,
    LogLevel.DEBUG: logging.DEBUG,
    LogLevel.ERROR: logging.ERROR,
}


_ORDERS: dict[tuple[object, ...], MariaDBOrders] = {}


def orders() -> MariaDBOrders:
    """The I/O of this worker process, rebuilt when the cluster configuration files change."""
    settings = load_settings()
    stamp = compute_config_stamp(settings)
    found = _ORDERS.get(stamp)
    if found is None:
        _ORDERS.clear()
        found = _ORDERS[stamp] = MariaDBOrders(load_cluster_config(settings).registry, settings)
    return found


def emit(key: OrderKey, events: Iterable[LogEvent]) -> None:
    """Write the log lines a decision asked for; their fields never hold a credential."""
    for event in events:
        fields = dict(event.fields)
        text = " ".join(f"{k}={v!r}" for k, v in fields.items())
        log.log(
            _LEVELS[event.level],
            "%s%s",
            event.message,
            f" ({text})" if text else "",
            extra={"order": str(key), "fields": fields},
        )


def _seconds(result: PassResult) -> float | None:
    return None if result.requeue_after is None else result.requeue_after.total_seconds()


# -- the entry -----------------------------------------------------------------------------------


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
        return FetchedOrder(self.order, MariaDBDatabase.model_validate(self.order))

    def cp(self) -> ControlPlane:
        """The ControlPlane as the entry read it."""
        return ControlPlane.model_validate(self.control_plane)


_NOTE = TypeAdapter(PassNote)


def entry(ctx: PassContext) -> PassOutcome:
    """Read the order, its ControlPlane and its children once, decide, and hand over the writes."""
    io, key = orders(), ctx.key
    try:
        fetched = io.fetch_order(key)
    except ClusterUnavailableError:
        log.warning(
            "the cluster the MariaDBDatabase lives on does not resolve; skipping it",
            extra={"order": str(key)},
        )
        PASSES.labels(kind=KIND, path="unresolved").inc()
        return PassOutcome("ClusterUnresolved")
    path = classify_order(None if fetched is None else fetched.order)
    if fetched is None or path is OrderPath.GONE:
        PASSES.labels(kind=KIND, path=OrderPath.GONE.value).inc()
        return PassOutcome("Gone")
    if path is OrderPath.RELEASED:
        return PassOutcome("Deleting")
    if path is OrderPath.TEARDOWN:
        PASSES.labels(kind=KIND, path=path.value).inc()
        return _teardown_pass(ctx, io, fetched)
    cp = io.fetch_control_plane(fetched.order) if should_read_control_plane(key.cluster) else None
    admission = plan_admission(AdmissionObservation(fetched.order, key.cluster, cp))
    if classify_admission(admission) is LegPath.ADD_FINALIZER:
        # The finalizer write wakes nothing (a finalizer change passes no update predicate),
        # so the pass goes on with the order it wrote instead of asking for a pass of its own.
        ctx.guard.check()
        fetched = io.set_finalizers(key, fetched, [*fetched.order.metadata.finalizers, FINALIZER])
        admission = plan_admission(AdmissionObservation(fetched.order, key.cluster, cp))
    if classify_admission(admission) is not None or cp is None:
        PASSES.labels(kind=KIND, path=LegPath.GATED.value).inc()
        rec = record(ctx.guard.check, key, fetched, admission)
        return PassOutcome(describe_status(rec.status), _seconds(rec.result))
    return _provision_pass(ctx, io, fetched, admission, cp)


def _provision_pass(
    ctx: PassContext,
    io: MariaDBOrders,
    fetched: FetchedOrder,
    admission: AdmissionDecision,
    cp: ControlPlane,
) -> PassOutcome:
    """Observe the children once and plan; end here, or hand the writes to a chain."""
    key = ctx.key
    scope = compute_order_scope(fetched.order, key.cluster, cp)
    provision_started = time.time()
    observation, plan = _observe_provision(io, fetched, scope)
    steps = plan_chain_steps(plan.actions, plan.result.outcome.proceed)
    path = classify_plan(steps, plan.result.outcome.proceed)
    if not any(step != DELIVERY_STEP for step in steps):
        observe_leg_since(PROVISION, provision_started)
    if path is LegPath.UP_TO_DATE:
        delivery_started = time.time()
        delivered = _deliver_in_entry(ctx, io, fetched, admission, scope, cp, observation, plan)
        if delivered is not None:
            observe_leg_since(DELIVERY, delivery_started)
            PASSES.labels(kind=KIND, path=path.value).inc()
            return delivered
        path, steps = LegPath.CHAIN, (DELIVERY_STEP,)
    PASSES.labels(kind=KIND, path=path.value).inc()
    if path is LegPath.WAITING:
        rec = record(ctx.guard.check, key, fetched, admission, provision=plan.result)
        return PassOutcome(describe_status(rec.status), _seconds(rec.result))
    note = PassNote(
        fetched.raw, cp.model_dump(mode="json", by_alias=True), plan, steps, provision_started
    )
    return PassOutcome("Provisioning", handoff=lambda lease: provision_chain(lease, note))


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
    plan = plan_provision(observation)
    role = next((a for a in plan.actions if isinstance(a, EnsureRole)), None)
    if role is not None:
        # Only a plan that reaches the role asks OpenBao how it stands.
        observation = io.observe_role(observation, role)
        plan = plan_provision(observation)
    return observation, plan


def _deliver_in_entry(
    ctx: PassContext,
    io: MariaDBOrders,
    fetched: FetchedOrder,
    admission: AdmissionDecision,
    scope: OrderScope,
    cp: ControlPlane,
    provision: ProvisionObservation,
    plan: ProvisionPlan,
) -> PassOutcome | None:
    """End a converged pass in the entry when delivery has nothing to write; None otherwise."""
    try:
        observation = io.fetch_delivery(fetched.order, scope, cp, provision)
    except ReadError as error:
        delivery = plan_delivery_failure(error.context, error.message)
    else:
        planned = plan_delivery(observation)
        if planned.apply is not None:
            return None
        delivery = compute_delivery_result(observation, planned, None)
    rec = record(ctx.guard.check, ctx.key, fetched, admission, plan.result, delivery)
    if delivery.outcome.error is not None:
        RECONCILE_ERRORS.labels(
            sub_reconciler=DELIVERY, condition_type=ConditionType.DELIVERY_READY
        ).inc()
        raise ReadError("delivery", delivery.outcome.error)
    return PassOutcome(describe_status(rec.status), _seconds(rec.result))


def record(
    check: Callable[[], None],
    key: OrderKey,
    fetched: FetchedOrder,
    admission: AdmissionDecision,
    provision: LegResult | None = None,
    delivery: DeliveryResult | None = None,
) -> PassRecord:
    """Compose the pass with core, log what it asks, write the status when it changed."""
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
        orders().write_status(key, rec.status)
    return rec


def _args(lease: Lease) -> tuple[str, str, int]:
    return (str(lease.key), lease.token, lease.started)


def _note_ttl_ms() -> int:
    # The chain's longest life: every hand-over's wait, and a retry's backoff on top.
    settings = load_settings()
    backoff = settings.retry_backoff_max_seconds + settings.lock_ttl_seconds
    return handover_ms() + int(backoff * 1000)


def _chain(
    lease: Lease, note_json: bytes, names: tuple[str, ...], tasks: dict[str, AnyTask]
) -> Signature:
    """Leave the note, then chain the named steps; the abort callback ends a failed pass."""
    workqueue().save_note(lease, note_json.decode(), _note_ttl_ms())
    args = _args(lease)
    steps = [tasks[name].si(*args, i) for i, name in enumerate(names, start=1)]
    return chain(*steps).on_error(abort_signature(args))


def provision_chain(lease: Lease, note: PassNote) -> Signature:
    """The steps the plan needs, in order, under the pass's lease."""
    tasks = {step.name.lower(): provision_task(step) for step in ProvisionStep}
    tasks[DELIVERY_STEP] = deliver_secret
    return _chain(lease, _NOTE.dump_json(note), note.steps, tasks)


def abort_signature(args: tuple[str, str, int]) -> Signature:
    """The chain's error callback."""
    return Signature(RECONCILE_ABORT, args=args, immutable=True)


# -- provision -----------------------------------------------------------------------------------

_NOTE_GONE = StepResult("NoteGone", done=True, completed=False, again=True)
"""A step whose pass left no note (it expired): a new pass observes afresh."""


def _note(ctx: StepContext) -> PassNote | None:
    text = workqueue().load_note(ctx.lease)
    return None if text is None else _NOTE.validate_json(text)


def _admission(ctx: StepContext, note: PassNote) -> AdmissionDecision:
    return plan_admission(AdmissionObservation(note.fetched().order, ctx.key.cluster, note.cp()))


def _fail_provision(
    ctx: StepContext,
    fetched: FetchedOrder,
    admission: AdmissionDecision,
    plan: ProvisionPlan,
    index: int,
    error: ActionError,
) -> RetryStepError:
    leg = plan_provision_failure(plan, index, str(error), status_code=error.status)
    RECONCILE_ERRORS.labels(
        sub_reconciler=PROVISION, condition_type=ConditionType.DATABASE_READY
    ).inc()
    rec = record(ctx.guard.check, ctx.key, fetched, admission, provision=leg)
    return RetryStepError(describe_status(rec.status), leg.outcome.error or str(error))


def provision_body(step: ProvisionStep) -> Callable[[StepContext], StepResult]:
    """The body of one provision step: its writes of the entry's plan, in plan order."""

    def body(ctx: StepContext) -> StepResult:
        note = _note(ctx)
        if note is None:
            return _NOTE_GONE
        fetched, admission, plan = note.fetched(), _admission(ctx, note), note.plan
        for index, action in enumerate(plan.actions):
            if classify_provision_action(action) is not step:
                continue
            ctx.guard.check()
            try:
                orders().run(action)
            except ActionError as error:
                observe_leg_since(PROVISION, note.provision_started)
                raise _fail_provision(ctx, fetched, admission, plan, index, error) from None
        following = note.steps[ctx.step :]
        if not following or following[0] == DELIVERY_STEP:
            observe_leg_since(PROVISION, note.provision_started)
        if following:
            return StepResult(f"{step.name.title()}Done")
        rec = record(ctx.guard.check, ctx.key, fetched, admission, provision=plan.result)
        return StepResult(
            describe_status(rec.status), done=True, requeue_after=_seconds(rec.result)
        )

    return body


def _provision_task(step: ProvisionStep) -> AnyTask:
    body = provision_body(step)

    @shared_task(name=PROVISION_TASKS[step], bind=True, max_retries=None)
    def task(self: AnyTask, key: str, token: str, started: int, step: int) -> dict[str, str]:
        return run_step(self, key, token, started, step, body)

    task.__doc__ = f"Provision step {step.name.lower()} of a MariaDBDatabase pass."
    return task


_PROVISION = {step: _provision_task(step) for step in ProvisionStep}


def provision_task(step: ProvisionStep) -> AnyTask:
    """The Celery task of one provision step."""
    return _PROVISION[step]


# -- delivery ------------------------------------------------------------------------------------


def deliver_body(ctx: StepContext) -> StepResult:
    """Deliver the credential beside the order, record the pass, and end it.

    It reads the issued Secret and the delivered one itself: a credential never travels in a
    note, only from the Secret ESO wrote into the Secret beside the order.
    """
    note = _note(ctx)
    if note is None:
        return _NOTE_GONE
    fetched, admission, cp = note.fetched(), _admission(ctx, note), note.cp()
    scope = compute_order_scope(fetched.order, ctx.key.cluster, cp)
    with observe_leg(DELIVERY):
        delivery = _deliver(ctx, orders(), fetched, scope, cp)
    rec = record(ctx.guard.check, ctx.key, fetched, admission, note.plan.result, delivery)
    if delivery.outcome.error is not None:
        RECONCILE_ERRORS.labels(
            sub_reconciler=DELIVERY, condition_type=ConditionType.DELIVERY_READY
        ).inc()
        raise RetryStepError("DeliveryError", delivery.outcome.error)
    return StepResult(describe_status(rec.status), done=True, requeue_after=_seconds(rec.result))


def _deliver(
    ctx: StepContext,
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
            answer = io.run(plan.apply)
        except ActionError as error:
            ref = plan.apply.ref
            return plan_delivery_failure(
                f"delivering Secret {ref.namespace}/{ref.name}", str(error)
            )
        applied = None if answer is None else Secret.model_validate(answer)
    return compute_delivery_result(observation, plan, applied)


@shared_task(name=DELIVERY_TASK, bind=True, max_retries=None)
def deliver_secret(self: AnyTask, key: str, token: str, started: int, step: int) -> dict[str, str]:
    """Delivery step of a MariaDBDatabase pass: the Secret beside the order."""
    return run_step(self, key, token, started, step, deliver_body)


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
        return FetchedOrder(self.order, MariaDBDatabase.model_validate(self.order))


_TEARDOWN_NOTE = TypeAdapter(TeardownNote)


def _teardown_pass(ctx: PassContext, io: MariaDBOrders, fetched: FetchedOrder) -> PassOutcome:
    """Observe the children once and plan their removal; finalize here or hand over the deletes."""
    cp = io.fetch_control_plane(fetched.order)
    scope = compute_order_scope(fetched.order, ctx.key.cluster, cp)
    observation = io.fetch_teardown(
        fetched.order,
        scope,
        control_plane_present=cp is not None,
        connection=io.fetch_connection(scope),
    )
    plan = plan_teardown(observation)
    steps = plan_teardown_steps(plan.actions)
    if steps == (FINALIZE_STEP,):
        result = _finalize(ctx.key, ctx.guard.check, fetched, plan, ())
        return PassOutcome(result.reason, result.requeue_after)
    note = TeardownNote(fetched.raw, plan, steps)
    return PassOutcome("TearingDown", handoff=lambda lease: teardown_chain(lease, note))


def teardown_chain(lease: Lease, note: TeardownNote) -> Signature:
    """The teardown steps with a delete, then finalize, under the pass's lease."""
    tasks = {step.name.lower(): teardown_task(step) for step in TeardownStep}
    tasks[FINALIZE_STEP] = finalize_teardown
    return _chain(lease, _TEARDOWN_NOTE.dump_json(note), note.steps, tasks)


def _teardown_note(ctx: StepContext) -> TeardownNote | None:
    text = workqueue().load_note(ctx.lease)
    return None if text is None else _TEARDOWN_NOTE.validate_json(text)


def teardown_body(step: TeardownStep) -> Callable[[StepContext], StepResult]:
    """The body of one teardown step: its deletes of the entry's plan, in plan order."""

    def body(ctx: StepContext) -> StepResult:
        note = _teardown_note(ctx)
        if note is None:
            return _NOTE_GONE
        plan = note.plan
        emit(ctx.key, (e for e in plan.logs if classify_teardown_log(e) is step))
        failures = list(note.failures)
        for index, action in enumerate(plan.actions):
            if classify_teardown_action(action) is not step:
                continue
            ctx.guard.check()
            try:
                orders().run(action)
            except ActionError as error:
                worded = describe_teardown_failure(action, str(error))
                if plan.mode is TeardownMode.HELD:
                    raise RetryStepError("TeardownHeld", worded) from None
                log.error("%s", worded, extra={"order": str(ctx.key)})
                failures.append((index, str(error)))
        if len(failures) > len(note.failures):
            ctx.guard.check()
            kept = replace(note, failures=tuple(failures))
            workqueue().save_note(
                ctx.lease, _TEARDOWN_NOTE.dump_json(kept).decode(), _note_ttl_ms()
            )
            return StepResult("Failed")
        return StepResult("Done")

    return body


def _teardown_task(step: TeardownStep) -> AnyTask:
    body = teardown_body(step)

    @shared_task(name=TEARDOWN_TASKS[step], bind=True, max_retries=None)
    def task(self: AnyTask, key: str, token: str, started: int, position: int) -> dict[str, str]:
        return run_step(self, key, token, started, position, body)

    task.__doc__ = f"Teardown step {step.name.lower()} of a MariaDBDatabase."
    return task


_TEARDOWN = {step: _teardown_task(step) for step in TeardownStep}


def teardown_task(step: TeardownStep) -> AnyTask:
    """The Celery task of one teardown step."""
    return _TEARDOWN[step]


def _finalize(
    key: OrderKey,
    check: Callable[[], None],
    fetched: FetchedOrder,
    plan: TeardownPlan,
    failures: tuple[tuple[int, str], ...],
) -> StepResult:
    """Decide the finalizer on the deletes the plan issued, as the reference counts them."""
    decision = compute_teardown_result(plan, failures)
    emit(key, decision.logs)
    if decision.release_finalizer:
        check()
        remaining = [f for f in fetched.order.metadata.finalizers if f != FINALIZER]
        orders().set_finalizers(key, fetched, remaining)
        return StepResult("FinalizerReleased", done=True)
    return StepResult("TeardownHeld", done=True, requeue_after=_seconds(decision.result))


def finalize_body(ctx: StepContext) -> StepResult:
    """Decide the finalizer after the deletes were issued, and end the pass."""
    note = _teardown_note(ctx)
    if note is None:
        return _NOTE_GONE
    return _finalize(ctx.key, ctx.guard.check, note.fetched(), note.plan, note.failures)


@shared_task(name=FINALIZE_TASK, bind=True, max_retries=None)
def finalize_teardown(
    self: AnyTask, key: str, token: str, started: int, step: int
) -> dict[str, str]:
    """Final teardown step: release the finalizer when no delete was needed (or fail open)."""
    return run_step(self, key, token, started, step, finalize_body)


register_pass(KIND, entry)
