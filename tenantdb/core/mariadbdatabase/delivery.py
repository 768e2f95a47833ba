"""The delivery leg of a MariaDBDatabase pass: the Secret beside the order, and DeliveryReady.

Owns the delivery steps in the reference order: the address for the order's cluster, the CA
bundle under TLS, the credential ESO wrote, the refusal of a Secret the order does not control,
the apply of the delivered Secret, and the check that the apply response carries the current
credential before the status says Delivered. `plan_delivery` decides up to the apply;
`compute_delivery_result` judges the apply response. It must never perform a write, and never
put a password in a message, a log event or an action's repr.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tenantdb.core.actions import ApplyObject, LogEvent, read_version
from tenantdb.core.applied import is_applied
from tenantdb.core.mariadbdatabase.conditions import ConditionUpdate, DeliveredFields
from tenantdb.core.mariadbdatabase.endpoint import (
    Endpoint,
    EndpointError,
    compute_endpoint_choice,
    parse_endpoint,
)
from tenantdb.core.mariadbdatabase.manifests import (
    CA_KEY,
    build_delivered_secret,
    compute_secret_keys,
)
from tenantdb.core.mariadbdatabase.models import ControlPlane, ExternalSecret, MariaDBDatabase
from tenantdb.core.mariadbdatabase.reasons import (
    NOT_CURRENT_MESSAGE,
    ConditionType,
    Reason,
    msg_database_not_published,
    msg_delivered,
    msg_delivery_refused,
    msg_endpoint_invalid,
    msg_waiting_for_ca_bundle,
    msg_waiting_for_materialised_credential,
)
from tenantdb.core.mariadbdatabase.results import REQUEUE_SHORT, StepOutcome
from tenantdb.core.mariadbdatabase.scope import OrderScope
from tenantdb.core.objects import Secret

REFRESHED_LOG = "delivered a refreshed database credential"


@dataclass(frozen=True)
class DeliveryObservation:
    """What the delivery leg looks at, read before its one write.

    `keystone_cluster_error` matters only under TLS, where the CA bundle is read on Keystone's
    cluster. `delivered_secret` is the live `<name>-credentials` beside the order, read
    uncached, and `delivered_raw` the same object as read, when the pass kept it (an apply that
    would change nothing is then skipped). `database_name` is the schema the provision leg
    recorded.
    """

    order: MariaDBDatabase
    scope: OrderScope
    control_plane: ControlPlane
    database_name: str
    keystone_cluster_error: str | None = None
    ca_bundle: Secret | None = None
    materialised_secret: Secret | None = None
    external_secret: ExternalSecret | None = None
    delivered_secret: Secret | None = None
    delivered_raw: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class DeliveryPlan:
    """Either an outcome already (`apply` None) or the Secret to apply and judge afterwards.

    `in_place` says the delivered Secret already is what the apply would write: judge the live
    one instead of an apply's answer.
    """

    outcome: StepOutcome | None
    apply: ApplyObject | None = None
    endpoint: Endpoint | None = None
    in_place: bool = False


@dataclass(frozen=True)
class DeliveryResult:
    """What the delivery leg records."""

    outcome: StepOutcome
    delivered: DeliveredFields | None = None


def _delivery(reason: Reason, message: str, *, requeue: bool) -> StepOutcome:
    update = ConditionUpdate(ConditionType.DELIVERY_READY, False, reason, message)
    return StepOutcome(conditions=(update,), requeue_after=REQUEUE_SHORT if requeue else None)


def _resolve_endpoint(obs: DeliveryObservation) -> Endpoint | StepOutcome:
    scope = obs.scope
    choice = compute_endpoint_choice(obs.control_plane, scope.cluster)
    if not choice.address:
        message = msg_database_not_published(
            scope.cluster, choice.in_cluster_address, scope.cp_namespace, scope.cp_name
        )
        return _delivery(Reason.DATABASE_NOT_PUBLISHED, message, requeue=False)
    try:
        return parse_endpoint(choice.address)
    except EndpointError as err:
        message = msg_endpoint_invalid(choice.address, str(err))
        return _delivery(Reason.DELIVERY_ERROR, message, requeue=False)


def _check_ca_bundle(obs: DeliveryObservation) -> str | StepOutcome | None:
    """Return ca.crt under TLS, None without TLS, or the outcome that stops the leg."""
    scope = obs.scope
    if not scope.tls:
        return None
    if obs.keystone_cluster_error is not None:
        return _delivery(
            Reason.TARGET_CLUSTER_UNAVAILABLE, obs.keystone_cluster_error, requeue=True
        )
    ca_crt = obs.ca_bundle.value(CA_KEY) if obs.ca_bundle is not None else ""
    if not ca_crt:
        message = msg_waiting_for_ca_bundle(scope.keystone_namespace, scope.ca_bundle_secret)
        return _delivery(Reason.WAITING_FOR_CA_BUNDLE, message, requeue=True)
    return ca_crt


def _is_controlled_by_order(secret: Secret, order: MariaDBDatabase) -> bool:
    controller = secret.metadata.controller_reference()
    return controller is not None and controller.uid == order.metadata.uid


def plan_delivery(obs: DeliveryObservation) -> DeliveryPlan:
    """Plan the delivery leg up to the apply of the Secret beside the order."""
    scope, order = obs.scope, obs.order
    endpoint = _resolve_endpoint(obs)
    if isinstance(endpoint, StepOutcome):
        return DeliveryPlan(outcome=endpoint)
    ca_crt = _check_ca_bundle(obs)
    if isinstance(ca_crt, StepOutcome):
        return DeliveryPlan(outcome=ca_crt)
    issued = obs.materialised_secret
    username = issued.value("username") if issued else ""
    password = issued.value("password") if issued else ""
    if not username or not password:
        message = msg_waiting_for_materialised_credential(
            scope.cp_namespace, scope.names.credentials
        )
        return DeliveryPlan(_delivery(Reason.WAITING_FOR_CREDENTIALS, message, requeue=True))
    live = obs.delivered_secret
    if live is not None and not _is_controlled_by_order(live, order):
        message = msg_delivery_refused(order.metadata.namespace, scope.names.delivered_secret)
        return DeliveryPlan(_delivery(Reason.DELIVERY_REFUSED, message, requeue=False))
    manifest = build_delivered_secret(
        order,
        secret_name=scope.names.delivered_secret,
        values={
            "host": endpoint.host,
            "port": str(endpoint.port),
            "database": obs.database_name,
            "username": username,
            "password": password,
        },
        ca_crt=ca_crt,
    )
    if _is_delivered(manifest, obs.delivered_raw):
        return DeliveryPlan(outcome=None, endpoint=endpoint, in_place=True)
    # Fenced by the read just made: a pass that lost its lease cannot replace a Secret a newer
    # pass delivered since (with a password issued later than the one this pass read).
    apply = ApplyObject(scope.cluster, manifest, read_version=read_version(obs.delivered_raw))
    return DeliveryPlan(outcome=None, apply=apply, endpoint=endpoint)


def _is_delivered(manifest: Mapping[str, Any], live: Mapping[str, Any] | None) -> bool:
    # The keys must match exactly: a ca.crt left from an earlier TLS setting is tenantdb's to
    # drop, and only an apply drops it.
    if live is None or set(live.get("data") or {}) != set(manifest["data"]):
        return False
    return is_applied(manifest, live)


def compute_delivery_result(
    obs: DeliveryObservation, plan: DeliveryPlan, applied: Secret | None
) -> DeliveryResult:
    """Judge the apply response: Delivered only when it carries the current credential.

    Call it with `applied` None when the plan had nothing to apply; it returns the plan's own
    outcome then, or judges the live Secret when the plan found it `in_place`.
    """
    if plan.in_place:
        applied = obs.delivered_secret
    if plan.outcome is not None or plan.endpoint is None or applied is None:
        return DeliveryResult(plan.outcome or StepOutcome())
    scope, order = obs.scope, obs.order
    issued = obs.materialised_secret
    username = issued.value("username") if issued else ""
    password = issued.value("password") if issued else ""
    if applied.value("username") != username or applied.value("password") != password:
        return DeliveryResult(
            _delivery(Reason.WAITING_FOR_CREDENTIALS, NOT_CURRENT_MESSAGE, requeue=True)
        )
    refresh_time = obs.external_secret.status.refresh_time if obs.external_secret else None
    logs: tuple[LogEvent, ...] = ()
    previous = obs.delivered_secret
    if previous is not None and previous.value("username") != username:
        logs = (
            LogEvent(
                REFRESHED_LOG,
                (
                    ("order", f"{order.metadata.namespace}/{order.metadata.name}"),
                    ("username", username),
                    ("refreshTime", refresh_time.isoformat() if refresh_time else ""),
                ),
            ),
        )
    keys = compute_secret_keys(scope.tls)
    message = msg_delivered(
        scope.names.delivered_secret, keys, order.metadata.namespace, scope.cluster
    )
    update = ConditionUpdate(ConditionType.DELIVERY_READY, True, Reason.DELIVERED, message)
    delivered = DeliveredFields(
        host=plan.endpoint.host,
        port=plan.endpoint.port,
        credentials_refreshed_at=refresh_time,
        secret_name=scope.names.delivered_secret,
        secret_keys=keys,
    )
    return DeliveryResult(StepOutcome(conditions=(update,), proceed=True, logs=logs), delivered)


def plan_delivery_failure(context: str, error: str) -> DeliveryResult:
    """Word a Kubernetes failure reading or writing a delivery object: DeliveryError, back off.

    `context` names what failed, e.g. `delivering Secret tenant-a/app-db-credentials`.
    """
    update = ConditionUpdate(ConditionType.DELIVERY_READY, False, Reason.DELIVERY_ERROR, error)
    return DeliveryResult(StepOutcome(conditions=(update,), error=f"{context}: {error}"))
