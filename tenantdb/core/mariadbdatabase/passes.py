"""What one MariaDBDatabase pass records: its status and when the order comes back.

Owns the composition of a pass: the gates' verdict, then the provision leg, then (only when
the database is provisioned) the delivery leg, into one status and one pass result. A provision
error keeps DeliveryReady as it was; a provision that has not converged tells DeliveryReady so;
the pass result rule then decides. It must never perform the status write: it says whether one
is needed.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from tenantdb.core.actions import LogEvent
from tenantdb.core.events import Event, EventType
from tenantdb.core.mariadbdatabase.conditions import (
    ConditionUpdate,
    DeliveredFields,
    compute_status,
    is_condition_true,
    should_write_status,
)
from tenantdb.core.mariadbdatabase.delivery import DeliveryResult
from tenantdb.core.mariadbdatabase.gates import AdmissionDecision
from tenantdb.core.mariadbdatabase.models import MariaDBDatabase, MariaDBDatabaseStatus
from tenantdb.core.mariadbdatabase.provision import LegResult
from tenantdb.core.mariadbdatabase.reasons import ConditionType, Reason
from tenantdb.core.mariadbdatabase.results import PassResult, compute_pass_result


class Leg(StrEnum):
    """A leg of the pass, by the sub_reconciler label its duration and errors are counted under."""

    PROVISION = "MariaDBDatabaseProvision"
    DELIVERY = "MariaDBDatabaseDelivery"

    @property
    def condition_type(self) -> ConditionType:
        """The sub-condition the leg writes, which its errors are counted under."""
        if self is Leg.PROVISION:
            return ConditionType.DATABASE_READY
        return ConditionType.DELIVERY_READY


@dataclass(frozen=True)
class LegFailure:
    """The leg whose error ends the pass, and the error: counted before the status shows it."""

    leg: Leg
    error: str


@dataclass(frozen=True)
class PassRecord:
    """The status to persist (when `write_status`), the pass result, log lines, the Events
    the status write records on the order, and the leg that failed (None: none did)."""

    status: MariaDBDatabaseStatus
    write_status: bool
    result: PassResult
    logs: tuple[LogEvent, ...] = ()
    events: tuple[Event, ...] = ()
    failure: LegFailure | None = None


WARNING_REASONS = frozenset(
    {
        Reason.CLUSTER_NAME_TOO_LONG,
        Reason.CONTROL_PLANE_NOT_FOUND,
        Reason.NAMESPACE_NOT_ASSIGNED,
        Reason.DYNAMIC_CREDENTIALS_UNAVAILABLE,
        Reason.TARGET_CLUSTER_UNAVAILABLE,
        Reason.DATABASE_NAME_INVALID,
        Reason.DATABASE_NAME_RESERVED,
        Reason.DATABASE_COLLISION,
        Reason.OPENBAO_ERROR,
        Reason.DEPENDENCY_UNREADABLE,
        Reason.ORDER_UNREADABLE,
        Reason.DELIVERY_REFUSED,
        Reason.DELIVERY_ERROR,
    }
)
"""The sub-condition reasons that are a refusal or a failure: each is a Warning Event. The other
reasons that are not True say the order waits for something on its way (a certificate, the
Database CR, the credential) and record no Event."""


@dataclass(frozen=True)
class Legs:
    """What a pass composes its record from: the gates' decision, then the legs that ran.

    ``provision`` only when the gates let the pass go on, ``delivery`` only when the provision
    leg converged.
    """

    admission: AdmissionDecision
    provision: LegResult | None = None
    delivery: DeliveryResult | None = None

    def record(self, order: MariaDBDatabase, cluster: str, now: datetime) -> PassRecord:
        """The pass these legs make of ``order`` on ``cluster`` at ``now``."""
        return compute_pass_record(
            order,
            cluster=cluster,
            now=now,
            admission=self.admission,
            provision=self.provision,
            delivery=self.delivery,
        )


def compute_pass_events(
    old: MariaDBDatabaseStatus, new: MariaDBDatabaseStatus
) -> tuple[Event, ...]:
    """The Events a status write records: for each sub-condition the write changes (its status,
    reason or message), a Warning when it is now a refusal or a failure, a Normal when it is now
    True (the database provisioned, the credential delivered). An unchanged condition records
    nothing again, so a converged or a still-refused order's pass writes no Event."""
    before = {c.type: (c.status, c.reason, c.message) for c in old.conditions}
    events: list[Event] = []
    for condition_type in (ConditionType.DATABASE_READY, ConditionType.DELIVERY_READY):
        for condition in new.conditions:
            if condition.type != condition_type:
                continue
            if before.get(condition.type) == (
                condition.status,
                condition.reason,
                condition.message,
            ):
                continue
            if condition.status == "True":
                events.append(Event(EventType.NORMAL, condition.reason, condition.message))
            elif condition.reason in WARNING_REASONS:
                events.append(Event(EventType.WARNING, condition.reason, condition.message))
    return tuple(events)


def compute_pass_record(
    order: MariaDBDatabase,
    *,
    cluster: str,
    now: datetime,
    admission: AdmissionDecision,
    provision: LegResult | None = None,
    delivery: DeliveryResult | None = None,
) -> PassRecord:
    """Compose a pass from the gates and the legs that ran.

    Pass `provision` only when the gates let the pass go on, and `delivery` only when the
    provision leg converged (`provision.outcome.proceed`).
    """
    updates: list[ConditionUpdate] = list(admission.outcome.conditions)
    logs: list[LogEvent] = list(admission.outcome.logs)
    role_name = database_name = None
    delivered: DeliveredFields | None = None
    deciding, leg = admission.outcome, None
    if provision is not None:
        updates += provision.outcome.conditions
        logs += provision.outcome.logs
        role_name, database_name = provision.role_name, provision.database_name
        deciding, leg = provision.outcome, Leg.PROVISION
    if provision is not None and provision.outcome.proceed and delivery is not None:
        updates += delivery.outcome.conditions
        logs += delivery.outcome.logs
        delivered = delivery.delivered
        deciding, leg = delivery.outcome, Leg.DELIVERY
    old = order.status
    status = compute_status(
        old,
        updates,
        generation=order.metadata.generation,
        now=now,
        role_name=role_name,
        database_name=database_name,
        delivered=delivered,
    )
    if admission.result is not None and provision is None:
        result = admission.result
    else:
        delivery_ready = is_condition_true(status.conditions, ConditionType.DELIVERY_READY)
        result = compute_pass_result(deciding, cluster=cluster, delivery_ready=delivery_ready)
    write = should_write_status(old, status)
    return PassRecord(
        status=status,
        write_status=write,
        result=result,
        logs=tuple(logs),
        events=compute_pass_events(old, status) if write else (),
        failure=None if leg is None or deciding.error is None else LegFailure(leg, deciding.error),
    )


def describe_status(status: MariaDBDatabaseStatus) -> str:
    """Sum a pass up in one reason: the first sub-condition that is not True, else AllReady."""
    for condition_type in (ConditionType.DATABASE_READY, ConditionType.DELIVERY_READY):
        for condition in status.conditions:
            if condition.type == condition_type and condition.status != "True":
                return str(condition.reason)
    return "AllReady" if status.conditions else "NoConditions"


@dataclass(frozen=True)
class StepEnding:
    """How a chain step ends after it recorded the pass.

    ``retry`` set: the step fails with that text and runs again after a backoff, deciding then
    over the status it wrote. Otherwise the pass ends with ``reason`` and ``requeue_after`` (in
    seconds; None: on an event); ``completed`` False with ``again`` asks for a new pass at once.
    """

    reason: str
    requeue_after: float | None = None
    retry: str | None = None
    completed: bool = True
    again: bool = False


def decide_chain_end(rec: PassRecord) -> StepEnding:
    """End a chain whose writes all succeeded, by what it recorded.

    A provision leg that refused with an error (a child of its name it did not create) asks for
    a new pass, which observes the writes, refuses again and backs off; otherwise the pass ends
    with the reason its status sums up to.
    """
    if rec.result.error is not None:
        return StepEnding("Refused", completed=False, again=True)
    return StepEnding(describe_status(rec.status), requeue_after=rec.result.requeue_seconds())


def decide_retry(rec: PassRecord) -> StepEnding:
    """End a step whose write failed, by what it recorded: retried with the leg's error.

    Raises:
        ValueError: the record holds no failed leg.
    """
    if rec.failure is None:
        raise ValueError("a step retries only on a leg that failed")
    if rec.failure.leg is Leg.DELIVERY:
        return StepEnding(Reason.DELIVERY_ERROR.value, retry=rec.failure.error)
    return StepEnding(describe_status(rec.status), retry=rec.failure.error)
