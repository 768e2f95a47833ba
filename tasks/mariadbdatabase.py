"""The MariaDBDatabase pass as Celery tasks: entry, provision, delivery and teardown chains.

The entry (registered for the ``mariadbdatabase`` kind of ``tenantdb.reconcile.order``) reads the
order and takes one of four paths, all decided in ``tenantdb.core``: gone or not ours (nothing
to do); deleting (the teardown chain); stopped at a gate (record the status and finish); or on
through the provision chain (identity, role, database, credentials) and the delivery chain
(secret). Every step re-reads what it needs, re-plans with core, performs only its own part of
the plan, and returns a reason. A step that finds the plan stops at its part records the pass and
ends it; the delivery step and the teardown's finalize step end every pass that gets that far.

A leg that fails records what the reference records (OpenBaoError, DeliveryError) and retries
with backoff under the same lease; DeliveryReady keeps its value when the provision leg fails.
Teardown writes no status: while the ControlPlane exists it holds the finalizer until nothing is
listed, and fails open once it is gone.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from datetime import UTC, datetime

from celery import Signature, chain, shared_task

from tasks.chain import RetryStepError, StepContext, StepResult, run_step
from tasks.reconcile import PassContext, PassOutcome, register_pass
from tasks.runtime import AnyTask
from tenantdb.adapters.clusters import (
    ClusterUnavailableError,
    compute_config_stamp,
    load_cluster_config,
)
from tenantdb.adapters.mariadb_orders import (
    ActionError,
    FetchedOrder,
    MariaDBOrders,
    ReadError,
)
from tenantdb.adapters.metrics import PASSES, RECONCILE_ERRORS, observe_leg
from tenantdb.adapters.workqueue import Lease
from tenantdb.core.actions import LogEvent, LogLevel
from tenantdb.core.delivery import (
    DeliveryResult,
    compute_delivery_result,
    plan_delivery,
    plan_delivery_failure,
)
from tenantdb.core.gates import AdmissionDecision, AdmissionObservation, plan_admission
from tenantdb.core.keys import OrderKey
from tenantdb.core.models import ControlPlane, Secret
from tenantdb.core.naming import FINALIZER
from tenantdb.core.passes import PassRecord, compute_pass_record, describe_status
from tenantdb.core.provision import (
    LegResult,
    ProvisionPlan,
    plan_provision,
    plan_provision_failure,
)
from tenantdb.core.reasons import ConditionType
from tenantdb.core.results import PassResult
from tenantdb.core.scope import OrderScope, compute_order_scope
from tenantdb.core.steps import (
    ProvisionStep,
    TeardownStep,
    classify_provision_action,
    classify_teardown_action,
    classify_teardown_log,
    should_end_provision_at,
)
from tenantdb.core.tasknames import RECONCILE_ABORT
from tenantdb.core.teardown import (
    TeardownMode,
    TeardownPlan,
    decide_teardown,
    describe_teardown_failure,
    is_deleting,
    plan_teardown,
    should_tear_down,
)
from tenantdb.settings import load_settings

log = logging.getLogger(__name__)

KIND = "mariadbdatabase"
PROVISION = "MariaDBDatabaseProvision"
DELIVERY = "MariaDBDatabaseDelivery"

PROVISION_TASKS = {
    ProvisionStep.IDENTITY: "tenantdb.provision.identity",
    ProvisionStep.ROLE: "tenantdb.provision.role",
    ProvisionStep.DATABASE: "tenantdb.provision.database",
    ProvisionStep.CREDENTIALS: "tenantdb.provision.credentials",
}
DELIVERY_TASK = "tenantdb.delivery.secret"
TEARDOWN_TASKS = {
    TeardownStep.OPENBAO: "tenantdb.teardown.openbao",
    TeardownStep.ESO: "tenantdb.teardown.eso",
    TeardownStep.DATABASE: "tenantdb.teardown.database",
    TeardownStep.SECRET: "tenantdb.teardown.secret",
}
FINALIZE_TASK = "tenantdb.teardown.finalize"

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


def entry(ctx: PassContext) -> PassOutcome:
    """Read the order and choose its path."""
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
    if fetched is None:
        PASSES.labels(kind=KIND, path="gone").inc()
        return PassOutcome("Gone")
    if is_deleting(fetched.order):
        if not should_tear_down(fetched.order):
            return PassOutcome("Deleting")
        PASSES.labels(kind=KIND, path="teardown").inc()
        return PassOutcome("TearingDown", handoff=lambda lease: teardown_chain(lease))
    admission = _admit(io, key, fetched)
    if admission.add_finalizer:
        ctx.guard.check()
        io.set_finalizers(key, fetched, [*fetched.order.metadata.finalizers, FINALIZER])
        PASSES.labels(kind=KIND, path="finalizer").inc()
        rec = record(ctx.guard.check, key, fetched, admission)
        return PassOutcome("FinalizerAdded", _seconds(rec.result))
    if not admission.outcome.proceed:
        PASSES.labels(kind=KIND, path="gated").inc()
        rec = record(ctx.guard.check, key, fetched, admission)
        return PassOutcome(describe_status(rec.status), _seconds(rec.result))
    PASSES.labels(kind=KIND, path="provision").inc()
    return PassOutcome("Provisioning", handoff=lambda lease: provision_chain(lease))


def _admit(io: MariaDBOrders, key: OrderKey, fetched: FetchedOrder) -> AdmissionDecision:
    return plan_admission(
        AdmissionObservation(fetched.order, key.cluster, io.fetch_control_plane(fetched.order))
    )


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


def provision_chain(lease: Lease) -> Signature:
    """The provision steps, then delivery; the abort callback gives the lease back on failure."""
    args = _args(lease)
    steps = [provision_task(step).si(*args) for step in ProvisionStep]
    steps.append(deliver_secret.si(*args))
    return chain(*steps).on_error(abort_signature(args))


def teardown_chain(lease: Lease) -> Signature:
    """The teardown steps, each passing on the names of the steps that failed, then finalize."""
    args = _args(lease)
    first, *rest = [teardown_task(step) for step in TeardownStep]
    steps = [first.si((), *args), *(task.s(*args) for task in rest), finalize_teardown.s(*args)]
    return chain(*steps).on_error(abort_signature(args))


def abort_signature(args: tuple[str, str, int]) -> Signature:
    """The chain's error callback."""
    return Signature(RECONCILE_ABORT, args=args, immutable=True)


# -- provision -----------------------------------------------------------------------------------


class _PathChangedError(Exception):
    """The order left the path this chain is on (deleted, gated); a new pass decides."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _load(key: OrderKey) -> tuple[FetchedOrder, AdmissionDecision, ControlPlane, OrderScope]:
    io = orders()
    fetched = io.fetch_order(key)
    if fetched is None or is_deleting(fetched.order):
        raise _PathChangedError("PathChanged")
    cp = io.fetch_control_plane(fetched.order)
    admission = plan_admission(AdmissionObservation(fetched.order, key.cluster, cp))
    if not admission.outcome.proceed or cp is None:
        raise _PathChangedError("PathChanged")
    return fetched, admission, cp, compute_order_scope(fetched.order, key.cluster, cp)


def _plan_provision(scope: OrderScope, fetched: FetchedOrder) -> ProvisionPlan:
    io = orders()
    return plan_provision(io.fetch_provision(fetched.order, scope, io.fetch_connection(scope)))


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
    """The body of one provision step."""

    def body(ctx: StepContext) -> StepResult:
        try:
            fetched, admission, _, scope = _load(ctx.key)
        except _PathChangedError as changed:
            return StepResult(changed.reason, done=True, completed=False, again=True)
        with observe_leg(PROVISION):
            plan = _plan_provision(scope, fetched)
            for index, action in enumerate(plan.actions):
                if classify_provision_action(action) is not step:
                    continue
                ctx.guard.check()
                try:
                    orders().run(action)
                except ActionError as error:
                    raise _fail_provision(ctx, fetched, admission, plan, index, error) from None
        if not should_end_provision_at(step, plan.actions, plan.result.outcome.proceed):
            return StepResult(f"{step.name.title()}Done")
        rec = record(ctx.guard.check, ctx.key, fetched, admission, provision=plan.result)
        return StepResult(
            describe_status(rec.status), done=True, requeue_after=_seconds(rec.result)
        )

    return body


def _provision_task(step: ProvisionStep) -> AnyTask:
    body = provision_body(step)

    @shared_task(name=PROVISION_TASKS[step], bind=True, max_retries=None)
    def task(self: AnyTask, key: str, token: str, started: int) -> dict[str, str]:
        return run_step(self, key, token, started, body)

    task.__doc__ = f"Provision step {step.name.lower()} of a MariaDBDatabase pass."
    return task


_PROVISION = {step: _provision_task(step) for step in ProvisionStep}


def provision_task(step: ProvisionStep) -> AnyTask:
    """The Celery task of one provision step."""
    return _PROVISION[step]


# -- delivery ------------------------------------------------------------------------------------


def deliver_body(ctx: StepContext) -> StepResult:
    """Deliver the credential beside the order, record the pass, and end it."""
    try:
        fetched, admission, cp, scope = _load(ctx.key)
    except _PathChangedError as changed:
        return StepResult(changed.reason, done=True, completed=False, again=True)
    io = orders()
    plan = _plan_provision(scope, fetched)
    if not plan.result.outcome.proceed:
        rec = record(ctx.guard.check, ctx.key, fetched, admission, provision=plan.result)
        return StepResult(
            describe_status(rec.status), done=True, requeue_after=_seconds(rec.result)
        )
    with observe_leg(DELIVERY):
        delivery = _deliver(ctx, io, fetched, scope, cp)
    if delivery.outcome.error is not None:
        RECONCILE_ERRORS.labels(
            sub_reconciler=DELIVERY, condition_type=ConditionType.DELIVERY_READY
        ).inc()
        record(ctx.guard.check, ctx.key, fetched, admission, plan.result, delivery)
        raise RetryStepError("DeliveryError", delivery.outcome.error)
    rec = record(ctx.guard.check, ctx.key, fetched, admission, plan.result, delivery)
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
def deliver_secret(self: AnyTask, key: str, token: str, started: int) -> dict[str, str]:
    """Delivery step of a MariaDBDatabase pass: the Secret beside the order."""
    return run_step(self, key, token, started, deliver_body)


# -- teardown ------------------------------------------------------------------------------------


def _load_teardown(key: OrderKey) -> tuple[FetchedOrder, TeardownPlan] | None:
    io = orders()
    fetched = io.fetch_order(key)
    if fetched is None or not should_tear_down(fetched.order):
        return None
    cp = io.fetch_control_plane(fetched.order)
    scope = compute_order_scope(fetched.order, key.cluster, cp)
    observation = io.fetch_teardown(
        fetched.order,
        scope,
        control_plane_present=cp is not None,
        connection=io.fetch_connection(scope),
    )
    return fetched, plan_teardown(observation)


def teardown_body(
    step: TeardownStep, failed: tuple[str, ...]
) -> Callable[[StepContext], StepResult]:
    """The body of one teardown step; ``failed`` names the steps that failed before it."""

    def body(ctx: StepContext) -> StepResult:
        loaded = _load_teardown(ctx.key)
        if loaded is None:
            return StepResult("Gone", done=True)
        _, plan = loaded
        emit(ctx.key, (e for e in plan.logs if classify_teardown_log(e) is step))
        for action in plan.actions:
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
                return StepResult(_failed_reason((*failed, step.name.lower())))
        return StepResult(_failed_reason(failed))

    return body


def _failed_reason(failed: tuple[str, ...]) -> str:
    return "Failed:" + ",".join(failed) if failed else "Done"


def _parse_failed(previous: object) -> tuple[str, ...]:
    if isinstance(previous, dict):
        reason = str(previous.get("result", ""))
        if reason.startswith("Failed:"):
            return tuple(reason.removeprefix("Failed:").split(","))
    return ()


def _teardown_task(step: TeardownStep) -> AnyTask:
    @shared_task(name=TEARDOWN_TASKS[step], bind=True, max_retries=None)
    def task(self: AnyTask, previous: object, key: str, token: str, started: int) -> dict[str, str]:
        return run_step(self, key, token, started, teardown_body(step, _parse_failed(previous)))

    task.__doc__ = f"Teardown step {step.name.lower()} of a MariaDBDatabase."
    return task


_TEARDOWN = {step: _teardown_task(step) for step in TeardownStep}


def teardown_task(step: TeardownStep) -> AnyTask:
    """The Celery task of one teardown step."""
    return _TEARDOWN[step]


def finalize_body(failed: tuple[str, ...]) -> Callable[[StepContext], StepResult]:
    """Decide the finalizer after the deletes were issued, and end the pass."""

    def body(ctx: StepContext) -> StepResult:
        loaded = _load_teardown(ctx.key)
        if loaded is None:
            return StepResult("Gone", done=True)
        fetched, plan = loaded
        failures = [f"the teardown step {name} failed" for name in failed]
        decision = decide_teardown(plan.mode, plan.deletes, failures)
        emit(ctx.key, decision.logs)
        if decision.release_finalizer:
            ctx.guard.check()
            remaining = [f for f in fetched.order.metadata.finalizers if f != FINALIZER]
            orders().set_finalizers(ctx.key, fetched, remaining)
            return StepResult("FinalizerReleased", done=True)
        return StepResult("TeardownHeld", done=True, requeue_after=_seconds(decision.result))

    return body


@shared_task(name=FINALIZE_TASK, bind=True, max_retries=None)
def finalize_teardown(
    self: AnyTask, previous: object, key: str, token: str, started: int
) -> dict[str, str]:
    """Final teardown step: release the finalizer once nothing is listed (or fail open)."""
    return run_step(self, key, token, started, finalize_body(_parse_failed(previous)))


register_pass(KIND, entry)
