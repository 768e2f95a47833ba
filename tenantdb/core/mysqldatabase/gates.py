"""The gates a live MysqlDatabase passes before any SQL, strictly in the reference order.

The group exists, is not being deleted, has an active site and is not fenced; the owner Secret
exists and carries a username and a password; the spec is valid; the owner is none of the
group's accounts (read fail-closed); no older order claims the schema or the owner. Each of
these runs on every pass, before the apply fingerprint may skip the apply. A gate that stops
the pass says whether the order waits (Pending: a dependency, retried with jitter) or is refused
(Failed: a verdict about the order, re-checked every minute). Pure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from tenantdb.core.mysqldatabase.conflicts import Claim, find_conflict
from tenantdb.core.mysqldatabase.fingerprint import (
    AppliedInputs,
    compute_last_applied_hash,
    is_up_to_date,
)
from tenantdb.core.mysqldatabase.group import compute_active_site, compute_fence
from tenantdb.core.mysqldatabase.principals import (
    GroupSecretInvalidError,
    GroupSecretUnreadableError,
    compute_reserved_usernames,
)
from tenantdb.core.mysqldatabase.reasons import Phase, Reason, msg_owner_user_reserved
from tenantdb.core.mysqldatabase.validation import (
    GrantSpec,
    InvalidSpecError,
    ValidSpec,
    validate_spec,
)

EARLY_REASONS = frozenset(
    {
        Reason.GROUP_NOT_FOUND,
        Reason.GROUP_TERMINATING,
        Reason.NO_ACTIVE_SITE,
        Reason.RESTORE_IN_PROGRESS,
        Reason.PLANNED_FAILOVER_IN_PROGRESS,
        Reason.OWNER_SECRET_MISSING,
        Reason.OWNER_SECRET_INCOMPLETE,
        Reason.INVALID_SPEC,
    }
)
"""The gates decided from the group and the owner Secret alone: a pass stopped by one of them
needs neither the group's credential Secrets nor the peer orders read."""

PENDING_REQUEUE_BASE = timedelta(seconds=15)
PENDING_REQUEUE_JITTER = timedelta(seconds=30)
FAILED_REQUEUE = timedelta(seconds=60)
CIRCUIT_SPREAD = timedelta(seconds=15)
"""How far past a circuit's close the orders behind it come back, spread out."""


def compute_comeback_behind_circuit(pending: float, closes_in: float, spread: float) -> float:
    """When an order that could not reach its primary comes back, in seconds.

    Its usual wait (``pending``), but never before the site's circuit closes (``closes_in``,
    0 when none is open): a pass before then can do nothing. Past the close the orders are
    spread over ``CIRCUIT_SPREAD`` (``spread`` in [0, 1)), so that one probe, not all of
    them at once, meets the site.
    """
    if closes_in <= 0:
        return pending
    return max(pending, closes_in + CIRCUIT_SPREAD.total_seconds() * spread)


@dataclass(frozen=True, slots=True)
class OwnerSecret:
    """The owner Secret as the gates need it: its identity and decoded username and password."""

    uid: str
    resource_version: str
    username: str
    password_set: bool
    """Whether the password key is non-empty; the password itself never reaches core."""


@dataclass(frozen=True, slots=True)
class GateObservation:
    """What the gates look at, read before any connection to MySQL."""

    name: str
    namespace: str
    generation: int
    spec: Mapping[str, Any]
    status: Mapping[str, Any]
    group: Mapping[str, Any] | None
    """The MysqlFailoverGroup; None when not found."""
    owner_secret: OwnerSecret | None
    """None when the owner Secret is not found."""
    group_secrets: Mapping[str, Mapping[str, str] | None]
    """The group's credential Secrets by name (decoded); None for one that cannot be read."""
    me: Claim
    peers: Sequence[Claim] = ()


@dataclass(frozen=True, slots=True)
class GateDecision:
    """Where the gates leave the pass.

    ``phase`` is None when the pass goes on to apply (``spec`` and ``applied_hash`` set), or
    when it is already up to date (``up_to_date``: no SQL, no connection, no requeue).
    """

    phase: Phase | None = None
    reason: Reason | None = None
    message: str = ""
    spec: ValidSpec | None = None
    applied_hash: str = ""
    up_to_date: bool = False

    @property
    def requeue_after(self) -> timedelta | None:
        """The base wait before the next pass (Pending adds up to 30 s of jitter)."""
        if self.phase is Phase.PENDING:
            return PENDING_REQUEUE_BASE
        if self.phase is Phase.FAILED:
            return FAILED_REQUEUE
        return None


def _pending(reason: Reason, message: str) -> GateDecision:
    return GateDecision(Phase.PENDING, reason, message)


def _failed(reason: Reason, message: str) -> GateDecision:
    return GateDecision(Phase.FAILED, reason, message)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def plan_gates(obs: GateObservation) -> GateDecision:
    """Run the gates in order; the first that stops the pass decides."""
    spec = obs.spec
    group_name = _text(_object(spec.get("groupRef")).get("name"))
    stop = _group_gate(obs, group_name)
    if stop is not None:
        return stop
    secret_name = _text(_object(spec.get("owner")).get("secretName"))
    owner = obs.owner_secret
    if owner is None:
        return _pending(
            Reason.OWNER_SECRET_MISSING,
            f'Secret "{secret_name}" not found in namespace {obs.namespace}',
        )
    if not owner.username or not owner.password_set:
        return _pending(
            Reason.OWNER_SECRET_INCOMPLETE,
            f'Secret "{secret_name}" must carry non-empty username and password keys',
        )
    try:
        valid = _validate(spec, owner.username)
    except InvalidSpecError as error:
        return _failed(Reason.INVALID_SPEC, str(error))
    try:
        reserved = compute_reserved_usernames(obs.group_secrets)
    except (GroupSecretUnreadableError, GroupSecretInvalidError) as error:
        return _pending(
            Reason.GROUP_SECRET_MISSING,
            f'cannot resolve group "{group_name}"\'s reserved usernames: {error}',
        )
    if owner.username in reserved:
        message = msg_owner_user_reserved(secret_name, owner.username, group_name)
        return _failed(Reason.OWNER_USER_RESERVED, message)
    conflict = find_conflict(obs.me, obs.peers)
    if conflict is not None:
        return GateDecision(conflict.phase, conflict.reason, conflict.message)
    group = obs.group or {}
    applied = compute_last_applied_hash(
        AppliedInputs(
            spec=spec,
            active_site=compute_active_site(group),
            secret_uid=owner.uid,
            secret_resource_version=owner.resource_version,
            group_uid=_text((group.get("metadata") or {}).get("uid")),
            restore_token=_restore_token(group),
        )
    )
    status = obs.status
    observed = status.get("observedGeneration")
    skip = is_up_to_date(
        phase=_text(status.get("phase")),
        last_applied_hash=_text(status.get("lastAppliedHash")),
        observed_generation=observed if isinstance(observed, int) else None,
        generation=obs.generation,
        current=applied,
    )
    return GateDecision(spec=valid, applied_hash=applied, up_to_date=skip)


def _group_gate(obs: GateObservation, group_name: str) -> GateDecision | None:
    group = obs.group
    if group is None:
        return _pending(
            Reason.GROUP_NOT_FOUND,
            f'MysqlFailoverGroup "{group_name}" not found in namespace {obs.namespace}',
        )
    if (group.get("metadata") or {}).get("deletionTimestamp"):
        return _pending(
            Reason.GROUP_TERMINATING,
            f'MysqlFailoverGroup "{group_name}" is being deleted; not applying new tenant DDL',
        )
    if not compute_active_site(group):
        return _pending(
            Reason.NO_ACTIVE_SITE, f'MysqlFailoverGroup "{group_name}" has no active site yet'
        )
    fence = compute_fence(group)
    if fence is not None:
        return _pending(fence.reason, fence.message)
    return None


def _object(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _shaped(value: Any, field: str, kind: type[Any], wanted: str) -> Any:
    """``value`` when absent or of the JSON type the CRD declares for ``field``; otherwise the
    order is refused. The API server's schema admits no such order; the pass still never
    guesses what a wrong type meant (a privileges string read as absent would grant the
    default)."""
    if value is None or isinstance(value, kind):
        return value
    raise InvalidSpecError(f"{field} must be {wanted}")


def _privileges(value: Any, field: str) -> tuple[str, ...] | None:
    listed = _shaped(value, field, list, "a list of strings")
    if listed is None:
        return None
    if not all(isinstance(p, str) for p in listed):
        raise InvalidSpecError(f"{field} must be a list of strings")
    return tuple(listed) or None


def _validate(spec: Mapping[str, Any], owner_username: str) -> ValidSpec:
    owner = _shaped(spec.get("owner"), "spec.owner", Mapping, "an object") or {}
    grants: list[GrantSpec] = []
    listed = _shaped(spec.get("grants"), "spec.grants", list, "a list") or ()
    for index, grant in enumerate(listed):
        field = f"spec.grants[{index}]"
        _shaped(grant, field, Mapping, "an object")
        username = _shaped(grant.get("username"), f"{field}.username", str, "a string")
        privileges = _privileges(grant.get("privileges"), f"{field}.privileges")
        grants.append(GrantSpec(username or "", privileges or ()))
    return validate_spec(
        database_name=_text(spec.get("databaseName")),
        character_set=_text(spec.get("characterSet")) or None,
        collation=_text(spec.get("collation")) or None,
        owner_username=owner_username,
        owner_privileges=_privileges(owner.get("privileges"), "spec.owner.privileges"),
        grants=grants,
    )


def _restore_token(group: Mapping[str, Any]) -> str | None:
    restore = (group.get("status") or {}).get("restoreInPlace")
    if not isinstance(restore, Mapping):
        return None
    token = restore.get("confirmTokenUsed")
    return token if isinstance(token, str) else None
