"""Condition and status arithmetic of a MariaDBDatabase: what the one status write carries.

Owns the upsert of conditions (lastTransitionTime kept unless the status flips, messages
truncated to what the CRD admits, observedGeneration stamped), the aggregate Ready, the merge of
the status fields a pass sets, and the "unchanged status => no write" test. It must never write
status itself, and never clears a field a refusal does not name: refusals keep the last values.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pydantic import ValidationError

from tenantdb.core.mariadbdatabase.models import MariaDBDatabaseStatus
from tenantdb.core.mariadbdatabase.reasons import (
    ALL_READY_MESSAGE,
    NOT_ALL_READY_MESSAGE,
    ConditionType,
    Reason,
)
from tenantdb.core.mariadbdatabase.validation import CONDITION_MESSAGE_MAX_LENGTH
from tenantdb.core.objects import Condition

TRUE = "True"
FALSE = "False"
_ELLIPSIS = "..."


@dataclass(frozen=True)
class ConditionUpdate:
    """A condition a pass wants set, before timestamps and generations are stamped on it."""

    type: ConditionType
    status: bool
    reason: Reason
    message: str


def false_on(
    types: Iterable[ConditionType], reason: Reason, message: str
) -> tuple[ConditionUpdate, ...]:
    """Return the same False condition for each type (the gates write both sub-conditions)."""
    return tuple(ConditionUpdate(t, False, reason, message) for t in types)


SUB_CONDITIONS = (ConditionType.DATABASE_READY, ConditionType.DELIVERY_READY)


def on_both(reason: Reason, message: str) -> tuple[ConditionUpdate, ...]:
    """Return the refusal a gate writes on DatabaseReady and DeliveryReady alike."""
    return false_on(SUB_CONDITIONS, reason, message)


def truncate_message(message: str) -> str:
    """Cut a message to the length the CRD admits, marking the cut."""
    if len(message) <= CONDITION_MESSAGE_MAX_LENGTH:
        return message
    return message[: CONDITION_MESSAGE_MAX_LENGTH - len(_ELLIPSIS)] + _ELLIPSIS


def normalise_time(now: datetime) -> datetime:
    """Drop sub-second precision, which metav1.Time does not keep across a round trip."""
    return now.replace(microsecond=0)


def find_condition(conditions: Sequence[Condition], condition_type: str) -> Condition | None:
    """Return the condition of that type, if present."""
    return next((c for c in conditions if c.type == condition_type), None)


def is_condition_true(conditions: Sequence[Condition], condition_type: str) -> bool:
    """Report whether the condition of that type exists and reads True."""
    found = find_condition(conditions, condition_type)
    return found is not None and found.status == TRUE


def upsert_condition(
    conditions: Sequence[Condition], update: ConditionUpdate, *, generation: int, now: datetime
) -> tuple[Condition, ...]:
    """Set one condition; its lastTransitionTime moves only when its status changes."""
    status = TRUE if update.status else FALSE
    existing = find_condition(conditions, update.type)
    changed_at = normalise_time(now)
    if existing is not None and existing.status == status:
        changed_at = existing.last_transition_time
    new = Condition(
        type=str(update.type),
        status=status,
        reason=str(update.reason),
        message=truncate_message(update.message),
        last_transition_time=changed_at,
        observed_generation=generation,
    )
    if existing is None:
        return (*conditions, new)
    return tuple(new if c.type == update.type else c for c in conditions)


def compute_ready(conditions: Sequence[Condition]) -> ConditionUpdate:
    """Compute the aggregate Ready: True only when both sub-conditions exist and are True."""
    if all(is_condition_true(conditions, t) for t in SUB_CONDITIONS):
        return ConditionUpdate(ConditionType.READY, True, Reason.ALL_READY, ALL_READY_MESSAGE)
    return ConditionUpdate(ConditionType.READY, False, Reason.NOT_ALL_READY, NOT_ALL_READY_MESSAGE)


def compute_conditions(
    conditions: Sequence[Condition],
    updates: Iterable[ConditionUpdate],
    *,
    generation: int,
    now: datetime,
) -> tuple[Condition, ...]:
    """Apply a pass's updates in order, then recompute Ready."""
    result = tuple(conditions)
    for update in updates:
        result = upsert_condition(result, update, generation=generation, now=now)
    return upsert_condition(result, compute_ready(result), generation=generation, now=now)


@dataclass(frozen=True)
class DeliveredFields:
    """The status fields a delivery sets once the Secret carries the current credential."""

    host: str
    port: int
    credentials_refreshed_at: datetime | None
    secret_name: str
    secret_keys: tuple[str, ...]


def compute_status(
    old: MariaDBDatabaseStatus,
    updates: Iterable[ConditionUpdate],
    *,
    generation: int,
    now: datetime,
    role_name: str | None = None,
    database_name: str | None = None,
    delivered: DeliveredFields | None = None,
) -> MariaDBDatabaseStatus:
    """Compute the status a pass persists; fields not named here keep their last values."""
    fields: dict[str, Any] = {
        "conditions": compute_conditions(old.conditions, updates, generation=generation, now=now),
        "observed_generation": generation,
    }
    if role_name is not None:
        fields["role_name"] = role_name
    if database_name is not None:
        fields["database_name"] = database_name
    if delivered is not None:
        refreshed = delivered.credentials_refreshed_at
        fields.update(
            host=delivered.host,
            port=delivered.port,
            credentials_refreshed_at=None if refreshed is None else normalise_time(refreshed),
            secret_name=delivered.secret_name,
            secret_keys=delivered.secret_keys,
        )
    return old.model_copy(update=fields)


def should_write_status(old: MariaDBDatabaseStatus, new: MariaDBDatabaseStatus) -> bool:
    """Report whether the status changed; an unchanged status costs no write."""
    return build_status_body(old) != build_status_body(new)


def build_status_body(status: MariaDBDatabaseStatus) -> dict[str, Any]:
    """Render the status as the API stores it (empty fields omitted, as Go's omitempty does)."""
    body = status.model_dump(mode="json", by_alias=True, exclude_defaults=True)
    body["conditions"] = [
        c.model_dump(mode="json", by_alias=True, exclude_none=True) for c in status.conditions
    ]
    return body


def compute_unreadable_status(
    stored: Mapping[str, Any], message: str, *, generation: int, now: datetime
) -> dict[str, Any]:
    """The status patch that says an order's own body does not parse; empty when it says so.

    ``stored`` is the status as the server holds it, and may itself be what does not parse:
    then the conditions start afresh. Only the conditions and observedGeneration are written,
    as a merge patch, so the other fields keep what the last readable pass recorded.
    """
    try:
        old = MariaDBDatabaseStatus.model_validate(stored)
    except ValidationError:
        old = MariaDBDatabaseStatus()
    updates = on_both(Reason.ORDER_UNREADABLE, message)
    new = compute_status(old, updates, generation=generation, now=now)
    if not should_write_status(old, new):
        return {}
    body = build_status_body(new)
    return {"conditions": body["conditions"], "observedGeneration": generation}
