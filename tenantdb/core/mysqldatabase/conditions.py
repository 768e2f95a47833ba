"""The status of a MysqlDatabase: its phase, its write-ahead records, its one Ready condition.

A pass writes status at most twice around its SQL: the Creating stamp before the first
statement (the write-ahead records: ``databaseCreated``, and the owner about to be created,
as ``pendingOwnerUser`` while a rotation replaces a recorded owner), and the Ready stamp after
the last (the records settled: the owner current, nothing pending, the grants applied, the
site and fingerprint of the apply). A pass that stops at a gate records Pending or Failed and
keeps the fingerprint and site of the last apply. The Ready condition keeps its
lastTransitionTime while its status does not change. Never a credential. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from tenantdb.core.mysqldatabase.reasons import Phase, Reason
from tenantdb.core.mysqldatabase.sql import SCHEMA_SUBJECT
from tenantdb.core.mysqldatabase.validation import ValidSpec


def _time(now: datetime) -> str:
    return now.strftime("%Y-%m-%dT%H:%M:%SZ")


def _ready_condition(
    old: Mapping[str, Any],
    ready: bool,
    reason: Reason,
    message: str,
    generation: int,
    now: datetime,
) -> dict[str, Any]:
    status = "True" if ready else "False"
    previous = next(
        (
            c
            for c in old.get("conditions") or ()
            if isinstance(c, Mapping) and c.get("type") == "Ready"
        ),
        None,
    )
    since = (
        previous.get("lastTransitionTime")
        if previous is not None and previous.get("status") == status
        else _time(now)
    )
    return {
        "type": "Ready",
        "status": status,
        "reason": str(reason),
        "message": message,
        "lastTransitionTime": since,
        "observedGeneration": generation,
    }


def compute_stopped_status(
    old: Mapping[str, Any],
    *,
    phase: Phase,
    reason: Reason,
    message: str,
    generation: int,
    now: datetime,
) -> dict[str, Any]:
    """The status of a pass a gate or an error stopped: Pending or Failed."""
    return {
        **old,
        "phase": str(phase),
        "observedGeneration": generation,
        "message": message,
        "conditions": [_ready_condition(old, False, reason, message, generation, now)],
    }


def compute_creating_status(
    old: Mapping[str, Any], *, spec: ValidSpec, site: str, generation: int, now: datetime
) -> dict[str, Any]:
    """The write-ahead stamp, written after the preflight and before the first statement."""
    message = f"applying database {spec.database_name} on site {site}"
    status: dict[str, Any] = {
        **old,
        "phase": str(Phase.CREATING),
        "observedGeneration": generation,
        "databaseCreated": True,
        "message": message,
        "conditions": [_ready_condition(old, False, Reason.APPLYING, message, generation, now)],
    }
    recorded = old.get("ownerUser") or ""
    if recorded and recorded != spec.owner_username:
        status["pendingOwnerUser"] = spec.owner_username
    else:
        status["ownerUser"] = spec.owner_username
    return status


_OWNER_RECORDS = ("ownerUser", "pendingOwnerUser")


def compute_withdrawn_status(
    prior: Mapping[str, Any],
    stamped: Mapping[str, Any],
    *,
    ran: frozenset[str],
    schema_present: bool,
    present: frozenset[str],
) -> dict[str, Any]:
    """The records to keep after a batch failed: only what may have run, or was already ours.

    A status may name an account (or claim the schema) only if, when the record was written,
    the account had just been seen absent or was already this order's. So after a failure:

    - an account none of whose statements may have run (``ran``) keeps the record the order
      had before the pass, and loses even that when the pass saw it absent (``present``): a
      foreign account of that name made later is then refused, never adopted;
    - ``databaseCreated`` goes back to what it was unless a schema statement may have run,
      and is withdrawn when the schema was seen absent and no account record is left.

    A statement that may have run keeps its record, and the next pass verifies it by looking.

    Args:
        prior: the status the pass read, before its Creating stamp.
        stamped: the Creating stamp as written.
        ran: ``apply.compute_ran_subjects`` of the failed batch.
        schema_present: whether the pass saw the schema.
        present: the accounts the pass saw exist.
    """
    status = dict(stamped)
    for key in _OWNER_RECORDS:
        name = stamped.get(key)
        if not name or name in ran:
            continue
        before = prior.get(key)
        if before and before in present:
            status[key] = before
        else:
            status.pop(key, None)
    if SCHEMA_SUBJECT not in ran:
        if "databaseCreated" in prior:
            status["databaseCreated"] = prior["databaseCreated"]
        else:
            status.pop("databaseCreated", None)
        if not schema_present and not any(status.get(k) for k in _OWNER_RECORDS):
            status.pop("databaseCreated", None)
    return status


def compute_ready_status(
    old: Mapping[str, Any],
    *,
    spec: ValidSpec,
    site: str,
    applied_hash: str,
    generation: int,
    now: datetime,
) -> dict[str, Any]:
    """The Ready stamp, written once the apply (and any owner rotation) finished."""
    message = f"database {spec.database_name} ready on site {site}"
    status = {key: value for key, value in old.items() if key != "pendingOwnerUser"}
    status.update(
        {
            "phase": str(Phase.READY),
            "observedGeneration": generation,
            "databaseCreated": True,
            "ownerUser": spec.owner_username,
            "appliedGrants": [spec.owner_username, *(g.username for g in spec.grants)],
            "activeSite": site,
            "lastAppliedHash": applied_hash,
            "message": message,
            "conditions": [
                _ready_condition(old, True, Reason.DATABASE_RECONCILED, message, generation, now)
            ],
        }
    )
    return status


def should_write_status(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """Whether the new status differs from the stored one (a parked order writes nothing)."""
    return dict(old) != dict(new)


def compute_deleting_status(
    old: Mapping[str, Any], *, database: str, message: str = "", generation: int, now: datetime
) -> dict[str, Any]:
    """The status of an order whose drop runs or waits (status.observedGeneration is kept)."""
    text = message or f"dropping database {database}"
    return {
        **old,
        "phase": str(Phase.DELETING),
        "message": text,
        "conditions": [_ready_condition(old, False, Reason.DELETING, text, generation, now)],
    }
