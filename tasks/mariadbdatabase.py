"""The MariaDBDatabase kind, declared on the scaffold: it conducts each turn of a pass.

Each callback reads through the kind's I/O (``MariaDBIO``), hands what it read to a pure decision
of ``tenantdb.core.mariadbdatabase`` and carries out what that returns. The entry observes once
and delivers a converged leg with nothing to write; a chain holds the steps with a write (the
delivery step reads the Secrets itself), the last recording the pass. Failed writes retry and
refusing legs back off; a quiet refresh checks the OpenBao role only. Teardown holds the
finalizer while the ControlPlane exists and anything is listed, then fails open."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime
from functools import partial
from typing import Any

from pydantic import ValidationError

from tasks import scaffold
from tasks.chain import RetryStepError, StepResult
from tasks.reconcile import PassOutcome
from tasks.runtime import PerRegistry, workqueue
from tasks.scaffold import Admission, KindPass, KindStep, Plan, Step, emit
from tenantdb.adapters import mariadbdatabase as adapter
from tenantdb.adapters.clusters import ClusterRegistry
from tenantdb.adapters.mariadbdatabase import FetchedOrder, Kept, MariaDBIO, ReadError, keep_nothing
from tenantdb.adapters.metrics import observe_leg, observe_leg_since
from tenantdb.core.mariadbdatabase import delivery, gates, passes, provision, steps
from tenantdb.core.mariadbdatabase import teardown as removal
from tenantdb.core.mariadbdatabase.actions import Action
from tenantdb.core.mariadbdatabase.naming import IDENTITY
from tenantdb.core.mariadbdatabase.passes import Leg, Legs, PassRecord
from tenantdb.core.mariadbdatabase.scope import compute_order_scope
from tenantdb.core.mariadbdatabase.steps import PassNote, ProvisionStep, TeardownNote, TeardownStep
from tenantdb.settings import load_settings

log = logging.getLogger(__name__)


def _build_orders(registry: ClusterRegistry) -> MariaDBIO:
    return adapter.MariaDBOrders.over_redis(registry, load_settings(), workqueue().redis)


orders = PerRegistry(_build_orders)
"""The I/O of this worker process, rebuilt when the cluster configuration files change."""

Pass = KindPass[MariaDBIO]
StepCtx = KindStep[MariaDBIO]
Ctx = Pass | StepCtx
Ending = Callable[[], PassOutcome]
"""How the entry ends a pass it hands no chain, decided when it planned."""


class RefusedError(Exception):
    """A leg refused with an error its conditions already say; the pass backs off."""


FAILURES: dict[Leg, Callable[[str], Exception]] = {
    Leg.PROVISION: RefusedError,
    Leg.DELIVERY: partial(ReadError, "delivery"),
}
"""What the entry raises on a leg that failed, once its status says so."""


def record(ctx: Ctx, fetched: FetchedOrder, legs: Legs, kept: Kept = keep_nothing) -> PassRecord:
    """Compose the pass with core, log what it asks, have the I/O carry out its writes; ``kept``
    receives the order as the status write left it."""
    rec = legs.record(fetched.order, ctx.key.cluster, datetime.now(UTC))
    emit(ctx.key, rec.logs)
    ctx.io.write_record(ctx.key, fetched, rec, ctx.guard.check, ctx.runtime.note_ready, kept)
    return rec


def settled(ctx: Pass, fetched: FetchedOrder, legs: Legs) -> PassOutcome:
    """Record a pass the entry ends, raising the error of a leg that failed once it is shown."""
    rec = record(ctx, fetched, legs)
    if rec.failure is not None:
        raise FAILURES[rec.failure.leg](rec.failure.error)
    return PassOutcome(passes.describe_status(rec.status), rec.result.requeue_seconds())


def _delivered(ctx: Pass, fetched: FetchedOrder, legs: Legs, started: float) -> PassOutcome:
    observe_leg_since(Leg.DELIVERY, started)
    return settled(ctx, fetched, legs)


def _ending(ctx: Pass, fetched: FetchedOrder, plan: Plan[Ending]) -> PassOutcome:
    if plan.local is None:
        raise TypeError("a MariaDBDatabase plan without a chain carries how it ends")
    return plan.local()


def admit(ctx: Pass, fetched: FetchedOrder, previous: gates.Gate | None) -> Admission[gates.Gate]:
    """Run the gates, reading the ControlPlane once and only past the cluster-name gate."""
    known = gates.known_control_plane(ctx.key.cluster, previous)
    seen = ctx.io.read_control_plane(fetched.order) if known is None else known
    gate = gates.plan_gate(fetched.order, ctx.key.cluster, seen)
    return Admission(gate.verdict(), gate)


def gated(ctx: Pass, fetched: FetchedOrder, gate: gates.Gate) -> PassOutcome:
    """Record the gate that stopped the pass."""
    return settled(ctx, fetched, Legs(gate.decision))


def plan(ctx: Pass, fetched: FetchedOrder, gate: gates.Gate) -> Plan[Ending]:
    """Observe the children once and plan; deliver from the entry when nothing else writes."""
    order, cp, admission = fetched.order, gate.admitted_control_plane(), gate.decision
    scope, started = compute_order_scope(order, ctx.key.cluster, cp), time.time()
    try:
        seen = ctx.io.read_provision(order, scope)
    except adapter.UnreadableError as exc:
        legs = Legs(admission, provision.plan_unreadable(exc.context, exc.message))
        return Plan((), local=partial(settled, ctx, fetched, legs))
    role = provision.find_role_to_observe(provision.plan_provision(seen))
    seen = ctx.io.observe_role(seen, role)
    delivered: delivery.DeliveryResult | None = None
    planned = provision.plan_provision(seen)
    converged = planned.result.outcome.proceed
    chain = steps.plan_chain_steps(planned.actions, converged)
    if not chain:
        observe_leg_since(Leg.PROVISION, started)
    ending: Ending = partial(settled, ctx, fetched, Legs(admission, planned.result))
    if steps.delivers_from_entry(chain, converged):
        delivery_started = time.time()
        try:
            entry = steps.plan_entry_delivery(ctx.io.fetch_delivery(order, scope, cp, seen))
            chain, delivered = entry.steps, entry.result
        except ReadError as error:
            delivered = delivery.plan_delivery_failure(error.context, error.message)
        legs = Legs(admission, planned.result, delivered)
        ending = partial(_delivered, ctx, fetched, legs, delivery_started)
    cp_raw = cp.model_dump(mode="json", by_alias=True)
    note = PassNote(scaffold.note_order(fetched.raw), cp_raw, planned, chain, started)
    quiet = steps.plan_quiet_check(role, chain, planned, delivered, tls=scope.tls)
    return Plan(chain, note, converged=converged, local=ending, reason="Provisioning", quiet=quiet)


def _retry(ctx: StepCtx, note: PassNote, legs: Legs) -> RetryStepError:
    """Record a failed write and retry the step, leaving the order as written in the note: the
    retry, and the steps after it, decide over the status now stored, not the entry's."""
    rec = record(
        ctx, FetchedOrder.of(note.order), legs, lambda s: ctx.save_note(replace(note, order=s))
    )
    ending = passes.decide_retry(rec)
    return RetryStepError(ending.reason, ending.retry or "")


def _finish(ctx: StepCtx, note: PassNote, legs: Legs) -> StepResult:
    """Record the pass at the end of its chain, and end it."""
    end = passes.decide_chain_end(record(ctx, FetchedOrder.of(note.order), legs))
    return StepResult(end.reason, True, end.requeue_after, end.completed, end.again)


def provision_step(step: ProvisionStep, ctx: StepCtx, note: PassNote) -> StepResult:
    """One provision step: its writes of the entry's plan, in plan order."""
    actions = steps.select_provision_actions(note.plan.actions, step)
    try:
        ctx.io.run_each(actions, ctx.guard.check, ctx.runtime.remember_write)
    except adapter.FailedActionError as error:
        observe_leg_since(Leg.PROVISION, note.provision_started)
        leg = provision.plan_provision_failure(
            note.plan, error.index, str(error), status_code=error.status
        )
        raise _retry(ctx, note, Legs(note.admission(ctx.key.cluster), leg)) from None
    end = steps.decide_provision_step_end(note.steps, ctx.step)
    if end.ends_leg:
        observe_leg_since(Leg.PROVISION, note.provision_started)
    if end.goes_on:
        return StepResult(f"{step.name.title()}Done")
    return _finish(ctx, note, Legs(note.admission(ctx.key.cluster), note.plan.result))


def deliver(ctx: StepCtx, note: PassNote) -> StepResult:
    """Deliver the credential beside the order from the two Secrets, record the pass, end it."""
    order, cp = FetchedOrder.of(note.order).order, note.cp()
    scope = compute_order_scope(order, ctx.key.cluster, cp)
    with observe_leg(Leg.DELIVERY):
        try:
            seen = ctx.io.fetch_delivery(order, scope, cp)
            planned = delivery.plan_delivery(seen)
            applied = ctx.io.apply_delivery(
                planned.apply, ctx.guard.check, ctx.runtime.remember_write
            )
            delivered = delivery.compute_delivery_result(seen, planned, applied)
        except (ReadError, adapter.WriteError) as error:
            delivered = delivery.plan_delivery_failure(error.context, error.message)
    legs = Legs(note.admission(ctx.key.cluster), note.plan.result, delivered)
    if delivered.outcome.error is not None:
        raise _retry(ctx, note, legs)
    return _finish(ctx, note, legs)


def tear_down(ctx: Pass, fetched: FetchedOrder) -> Plan[Ending]:
    """Observe the children once and plan their removal; finalize here or hand over the deletes."""
    try:
        seen = ctx.io.read_teardown(fetched.order, ctx.key.cluster)
    except adapter.UnreadableError as exc:
        # Held on an object that does not parse: named on the order, nothing removed.
        legs = Legs(gates.plan_unreadable_teardown(exc.context, exc.message))
        return Plan((), local=partial(settled, ctx, fetched, legs))
    ctx.io.release_schema(fetched.order, seen.scope)
    planned = removal.plan_teardown(seen)
    chain = steps.plan_teardown_chain(planned.actions)
    note = TeardownNote(scaffold.note_order(fetched.raw), planned, chain)
    return Plan(chain, note, local=partial(_finalize, ctx, fetched, note), reason="TearingDown")


def _log_failure(ctx: StepCtx, action: Action, error: str) -> None:
    log.error("%s", removal.describe_teardown_failure(action, error), extra={"order": str(ctx.key)})


def teardown_step(step: TeardownStep, ctx: StepCtx, note: TeardownNote) -> StepResult:
    """One teardown step: its deletes of the entry's plan, in plan order."""
    planned = note.plan
    emit(ctx.key, steps.select_teardown_logs(planned.logs, step))
    try:
        failures = ctx.io.run_each(
            steps.select_teardown_actions(planned.actions, step),
            ctx.guard.check,
            ctx.runtime.remember_write,
            keep_going=planned.fails_open,
            failed=partial(_log_failure, ctx),
        )
    except adapter.FailedActionError as error:
        worded = removal.describe_teardown_failure(error.action, str(error))
        raise RetryStepError("TeardownHeld", worded) from None
    if not failures:
        return StepResult("Done")
    ctx.save_note(replace(note, failures=note.failures + failures))
    return StepResult("Failed")


def _finalize(ctx: Ctx, fetched: FetchedOrder, note: TeardownNote) -> PassOutcome:
    """Decide the finalizer on the deletes the plan issued, as the reference counts them."""
    decision = removal.compute_teardown_result(note.plan, note.failures)
    emit(ctx.key, decision.logs)
    if decision.release_finalizer:
        ctx.guard.check()
        kept = removal.compute_released_finalizers(fetched.order.metadata.finalizers)
        ctx.io.set_finalizers(ctx.key, fetched, kept)
    return PassOutcome(decision.reason, decision.result.requeue_seconds())


def finalize_step(ctx: StepCtx, note: TeardownNote) -> StepResult:
    """Decide the finalizer after the deletes were issued, and end the pass."""
    outcome = _finalize(ctx, FetchedOrder.of(note.order), note)
    return StepResult(outcome.reason, done=True, requeue_after=outcome.requeue_after)


def unreadable(ctx: Pass, raw: dict[str, Any], error: ValidationError) -> PassOutcome:
    """Say on an order whose own body does not parse which fields fail, and do nothing else:
    no child can be planned nor removed without it. The patch is made from the order as stored;
    its next change or the 10-minute refresh brings the next pass."""
    told = gates.plan_unreadable_order(raw, adapter.describe_validation(error))
    log.warning("%s", told.message, extra={"order": str(ctx.key)})
    ctx.guard.check()
    ctx.io.write_unreadable_status(
        ctx.key, raw, lambda stored: told.status_patch(stored, datetime.now(UTC)), ctx.guard.check
    )
    return PassOutcome(told.reason, told.requeue_seconds())


BODIES: dict[str, Callable[..., StepResult]] = {
    **{s.name.lower(): partial(provision_step, s) for s in ProvisionStep},
    steps.DELIVERY_STEP: deliver,
}
TEARDOWN_BODIES: dict[str, Callable[..., StepResult]] = {
    **{s.name.lower(): partial(teardown_step, s) for s in TeardownStep},
    steps.FINALIZE_STEP: finalize_step,
}
SPEC = scaffold.declare_kind(
    scaffold.KindSpec(
        identity=IDENTITY,
        io=orders,
        unreadable=unreadable,
        read=FetchedOrder.of,
        admit=admit,
        gated=gated,
        plan=plan,
        settle=lambda ctx, fetched, _gate, plan: _ending(ctx, fetched, plan),
        teardown=tear_down,
        finalize=_ending,
        quiet=lambda ctx, check: ctx.io.role_as_desired(check.role),
        quiet_note=steps.QuietCheck,
        steps=tuple(
            Step(c.name, c.queue, BODIES[c.name], PassNote, c.doc) for c in steps.PROVISION_CHAIN
        ),
        teardown_steps=tuple(
            Step(c.name, c.queue, TEARDOWN_BODIES[c.name], TeardownNote, c.doc)
            for c in steps.TEARDOWN_CHAIN
        ),
    )
)
