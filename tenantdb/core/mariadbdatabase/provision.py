"""The provision leg of a MariaDBDatabase pass: observed children in, actions and DatabaseReady out.

Owns the seven provision steps in the reference order: Keystone's cluster and the shared
MariaDB, the schema-name checks and the collision guard, the shared identity and its client
certificate, the OpenBao role, the Database CR (applied on every pass, so a deletionPolicy edit
reaches its cleanupPolicy), the ESO generator and ExternalSecret, and the engine-issued
credential. A plan lists the actions up to the first step that is not done yet, and the
outcome to record once they all succeeded; `plan_provision_failure` words a failed action. It
must never perform an action, and never names another owner's Database CR in a status.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from tenantdb.core.actions import ApplyObject, ApplyStrategy, LogEvent, ObjectRef, read_version
from tenantdb.core.applied import is_applied, is_contained
from tenantdb.core.mariadbdatabase.actions import Action, ClientCertificateRef, EnsureRole
from tenantdb.core.mariadbdatabase.conditions import ConditionUpdate
from tenantdb.core.mariadbdatabase.manifests import (
    REFRESH_SECONDS,
    build_client_certificate,
    build_database_cr,
    build_external_secret,
    build_service_account,
    build_vault_dynamic_secret,
)
from tenantdb.core.mariadbdatabase.models import (
    DatabaseCR,
    ExternalSecret,
    MariaDB,
    MariaDBDatabase,
)
from tenantdb.core.mariadbdatabase.naming import (
    CLIENT_CERTIFICATE,
    MANAGEMENT_CLUSTER,
    is_order_child,
    is_owned_order_child,
)
from tenantdb.core.mariadbdatabase.openbao import (
    GENERATOR_AUTH_ROLE,
    MAX_TTL_SECONDS,
    OpenBaoConnection,
    build_role,
    compute_openbao_failure,
    is_login_ttl_too_short,
    should_write_role,
)
from tenantdb.core.mariadbdatabase.reasons import (
    NOT_PROVISIONED_MESSAGE,
    ConditionType,
    Reason,
    msg_adoption_refused,
    msg_cluster_not_ready,
    msg_database_collision,
    msg_database_provisioned,
    msg_dependency_unreadable,
    msg_login_ttl_too_short,
    msg_waiting_for_client_certificate,
    msg_waiting_for_database,
    msg_waiting_for_engine_username,
    msg_waiting_for_external_secret,
)
from tenantdb.core.mariadbdatabase.results import REQUEUE_SHORT, StepOutcome
from tenantdb.core.mariadbdatabase.scope import OrderScope
from tenantdb.core.mariadbdatabase.validation import classify_database_name
from tenantdb.core.objects import KubeObject, ObjectMeta, Secret

READY = "Ready"
CLIENT_CERTIFICATE_KEYS = ("tls.crt", "tls.key", "ca.crt")
ENGINE_USERNAME_PREFIX = "v-"
TAKEN_LOG = "the database an order names is taken on the shared MariaDB"

LiveObjects = Mapping[ObjectRef, Mapping[str, Any] | None]
"""Children as the pass read them, raw (None: absent), for skipping applies that change nothing."""


@dataclass(frozen=True)
class ProvisionObservation:
    """What the provision leg looks at, all read before any of its writes.

    `keystone_cluster_error` is the resolver's error text when Keystone's cluster does not
    resolve. `databases` holds the mariadb-operator Databases in Keystone's namespace on
    Keystone's cluster that can matter (`is_relevant_database`: the child's name, or the
    schema on the order's MariaDB), the child included when it exists. Objects absent are None.

    `claimed_by` names the Database CR of another order that claimed the schema on the same
    MariaDB before this order's child exists (the claim closes the race of two orders creating
    at once, before either CR is seen); the guard refuses on it as on the CR.

    `live` holds the children the pass read, raw, by reference; an apply whose object is there
    and already as desired is left out of the plan, and one whose child was not read stays in.
    `role` is the OpenBao role's data when `role_observed` (None: no such role); without an
    observation the role is always ensured. `login_ttl` is the lifetime of the tokens the
    generators' auth role (`order-db`) issues, read with the role (None: not read, or the
    mount's defaults apply).
    """

    order: MariaDBDatabase
    scope: OrderScope
    connection: OpenBaoConnection
    keystone_cluster_error: str | None = None
    mariadb: MariaDB | None = None
    databases: tuple[DatabaseCR, ...] = ()
    client_certificate: Secret | None = None
    vault_dynamic_secret: KubeObject | None = None
    external_secret: ExternalSecret | None = None
    materialised_secret: Secret | None = None
    live: LiveObjects = field(default_factory=dict)
    role: Mapping[str, Any] | None = None
    role_observed: bool = False
    login_ttl: int | None = None
    claimed_by: str | None = None


@dataclass(frozen=True)
class LegResult:
    """What a leg records: its outcome, and the status fields it sets (None: leave)."""

    outcome: StepOutcome
    role_name: str | None = None
    database_name: str | None = None


@dataclass(frozen=True)
class ProvisionPlan:
    """Actions to run in order, and what to record once every one succeeded."""

    actions: tuple[Action, ...]
    result: LegResult


def _database_ready(
    update: ConditionUpdate, *, requeue: bool, logs: tuple[LogEvent, ...] = ()
) -> StepOutcome:
    """Wrap a DatabaseReady refusal: DeliveryReady learns that nothing is delivered."""
    not_provisioned = ConditionUpdate(
        ConditionType.DELIVERY_READY, False, Reason.WAITING_FOR_CREDENTIALS, NOT_PROVISIONED_MESSAGE
    )
    return StepOutcome(
        conditions=(update, not_provisioned),
        requeue_after=REQUEUE_SHORT if requeue else None,
        logs=logs,
    )


def _refused(
    reason: Reason, message: str, *, requeue: bool, logs: tuple[LogEvent, ...] = ()
) -> StepOutcome:
    update = ConditionUpdate(ConditionType.DATABASE_READY, False, reason, message)
    return _database_ready(update, requeue=requeue, logs=logs)


def _is_child(meta: ObjectMeta, obs: ProvisionObservation) -> bool:
    order = obs.order.metadata
    return is_order_child(
        meta,
        order_uid=order.uid,
        cluster=obs.scope.cluster,
        namespace=order.namespace,
        name=order.name,
    )


def _find_collision(obs: ProvisionObservation) -> DatabaseCR | None:
    order, scope = obs.order.metadata, obs.scope
    for database in obs.databases:
        if database.spec.maria_db_ref.name != scope.cluster_ref:
            continue
        if database.schema_name() != scope.schema:
            continue
        if not is_owned_order_child(
            database.metadata,
            order_uid=order.uid,
            cluster=scope.cluster,
            namespace=order.namespace,
            name=order.name,
        ):
            return database
    return None


def _has_client_certificate(secret: Secret | None) -> bool:
    return secret is not None and all(secret.value(key) for key in CLIENT_CERTIFICATE_KEYS)


def is_relevant_database(raw: Mapping[str, Any], scope: OrderScope) -> bool:
    """Whether a listed Database CR can matter to the plan: the child's name, or the schema.

    Keystone's namespace can hold thousands of Database CRs; only these can be the child (or a
    foreign object of its name) or collide with the order's schema on its MariaDB, so only these
    need reading in full. The test is the same as ``_find_collision``'s and the child lookup's.
    """
    meta = raw.get("metadata") or {}
    if meta.get("name") == scope.names.database_cr:
        return True
    return compute_database_slot(raw) == (scope.cluster_ref, scope.schema)


def compute_database_slot(raw: Mapping[str, Any]) -> tuple[str, str] | None:
    """The (MariaDB name, schema name) a raw Database CR carries; None without a MariaDB.

    The schema is ``spec.name``, or the CR's own name without one, as mariadb-operator reads it.
    """
    meta = raw.get("metadata")
    spec = raw.get("spec")
    meta = meta if isinstance(meta, Mapping) else {}
    spec = spec if isinstance(spec, Mapping) else {}
    ref = spec.get("mariaDbRef")
    mariadb = ref.get("name") if isinstance(ref, Mapping) else None
    schema = spec.get("name") or meta.get("name")
    if not isinstance(mariadb, str) or not mariadb or not isinstance(schema, str):
        return None
    return mariadb, schema


def _check_prerequisites(obs: ProvisionObservation) -> StepOutcome | None:
    """Steps 1 and 2: Keystone's cluster, the MariaDB, the schema name and collisions."""
    scope = obs.scope
    if obs.keystone_cluster_error is not None:
        return _refused(Reason.TARGET_CLUSTER_UNAVAILABLE, obs.keystone_cluster_error, requeue=True)
    if obs.mariadb is None or not obs.mariadb.status.is_true(READY):
        message = msg_cluster_not_ready(scope.cluster_ref, scope.keystone_namespace)
        return _refused(Reason.CLUSTER_NOT_READY, message, requeue=True)
    refusal = classify_database_name(scope.schema)
    if refusal is not None:
        return _refused(refusal.reason, refusal.message, requeue=False)
    collision = _find_collision(obs)
    taken = collision.metadata.name if collision is not None else obs.claimed_by
    if taken is not None:
        order = obs.order.metadata
        log = LogEvent(
            TAKEN_LOG,
            (
                ("order", f"{order.namespace}/{order.name}"),
                ("cluster", scope.cluster),
                ("database", scope.schema),
                ("mariadb", scope.cluster_ref),
                ("takenBy", taken),
            ),
        )
        message = msg_database_collision(scope.schema)
        return _refused(Reason.DATABASE_COLLISION, message, requeue=False, logs=(log,))
    return None


def plan_provision(obs: ProvisionObservation) -> ProvisionPlan:
    """Plan the provision leg: the actions up to the first unfinished step, and its outcome.

    Actions that would change nothing (the child already as desired, the role up to date) are
    left out, so a converged order's plan holds no action at all.
    """
    plan = _plan_all(obs)
    needed = tuple(_fenced(a, obs) for a in plan.actions if is_action_needed(a, obs))
    return ProvisionPlan(needed, plan.result)


def find_role_to_observe(plan: ProvisionPlan) -> EnsureRole | None:
    """The OpenBao role the plan reaches, which the pass asks OpenBao about (None: none).

    Only a plan that reaches the role step asks how the role stands; planned again over the
    answer, it leaves out a role already as desired.
    """
    return next((a for a in plan.actions if isinstance(a, EnsureRole)), None)


def _fenced(action: Action, obs: ProvisionObservation) -> Action:
    """Give an apply of a child the pass read the precondition of that read.

    A create-or-update reads the object itself right before it writes, and fences that write
    with the read; a child the pass did not read is applied without a precondition.
    """
    if (
        not isinstance(action, ApplyObject)
        or action.strategy is not ApplyStrategy.SERVER_SIDE_APPLY
        or action.ref not in obs.live
    ):
        return action
    return replace(action, read_version=read_version(obs.live[action.ref]))


def is_action_needed(action: Action, obs: ProvisionObservation) -> bool:
    """Whether performing ``action`` could change anything, given what the pass observed."""
    if isinstance(action, EnsureRole):
        return not obs.role_observed or should_write_role(obs.role, action.body)
    if not isinstance(action, ApplyObject) or action.ref not in obs.live:
        return True
    live = obs.live[action.ref]
    if action.strategy is ApplyStrategy.CREATE_OR_UPDATE:
        # Create-or-update writes the spec only, over whatever else the object carries.
        return live is None or not is_contained(action.manifest.get("spec") or {}, live.get("spec"))
    return not is_applied(action.manifest, live)


def _plan_all(obs: ProvisionObservation) -> ProvisionPlan:
    scope, names = obs.scope, obs.scope.names
    blocked = _check_prerequisites(obs)
    if blocked is not None:
        return ProvisionPlan(actions=(), result=LegResult(blocked))
    actions: list[Action] = [
        ApplyObject(MANAGEMENT_CLUSTER, build_service_account(scope.cp_namespace)),
        ApplyObject(
            MANAGEMENT_CLUSTER,
            build_client_certificate(scope.cp_namespace),
            ApplyStrategy.CREATE_OR_UPDATE,
        ),
    ]
    if not _has_client_certificate(obs.client_certificate):
        message = msg_waiting_for_client_certificate(scope.cp_namespace, CLIENT_CERTIFICATE)
        outcome = _refused(Reason.WAITING_FOR_CLIENT_CERTIFICATE, message, requeue=True)
        return ProvisionPlan(actions=tuple(actions), result=LegResult(outcome))
    actions.append(
        EnsureRole(
            role_name=names.role,
            body=build_role(scope.schema, scope.keystone_namespace),
            connection=obs.connection,
            client_certificate=ClientCertificateRef(scope.cp_namespace, CLIENT_CERTIFICATE),
        )
    )
    if obs.login_ttl is not None and is_login_ttl_too_short(obs.login_ttl, REFRESH_SECONDS):
        # No generator, no credential: one would be revoked before ESO replaced it.
        message = msg_login_ttl_too_short(
            obs.connection.auth_mount,
            GENERATOR_AUTH_ROLE,
            obs.login_ttl,
            REFRESH_SECONDS,
            MAX_TTL_SECONDS,
        )
        outcome = _refused(Reason.OPENBAO_ERROR, message, requeue=True)
        return ProvisionPlan(tuple(actions), LegResult(outcome, role_name=names.role))
    return _plan_after_role(obs, actions)


def _plan_after_role(obs: ProvisionObservation, actions: list[Action]) -> ProvisionPlan:
    """Steps 5 to 7: the Database CR, the ESO objects and the issued credential."""
    scope, names, role = obs.scope, obs.scope.names, obs.scope.names.role
    live = next((d for d in obs.databases if d.metadata.name == names.database_cr), None)
    if live is not None and not _is_child(live.metadata, obs):
        message = msg_adoption_refused("Database", scope.keystone_namespace, names.database_cr)
        outcome = _refused(Reason.DATABASE_COLLISION, message, requeue=False)
        return ProvisionPlan(tuple(actions), LegResult(outcome, role_name=role))
    actions.append(
        ApplyObject(
            scope.keystone_cluster,
            build_database_cr(
                name=names.database_cr,
                keystone_namespace=scope.keystone_namespace,
                cluster_ref=scope.cluster_ref,
                schema=scope.schema,
                deletion_policy=obs.order.spec.deletion_policy,
                labels=scope.labels,
            ),
        )
    )
    if live is None or not live.status.is_true(READY):
        message = msg_waiting_for_database(scope.keystone_namespace, names.database_cr)
        outcome = _refused(Reason.WAITING_FOR_DATABASE, message, requeue=True)
        return ProvisionPlan(tuple(actions), LegResult(outcome, role_name=role))
    for kind, existing in (
        ("VaultDynamicSecret", obs.vault_dynamic_secret),
        ("ExternalSecret", obs.external_secret),
    ):
        if existing is not None and not _is_child(existing.metadata, obs):
            # Refused as the Database CR's adoption is (DatabaseCollision with the refusal's
            # text), and returned as an error so the pass backs off and counts it.
            error = msg_adoption_refused(kind, scope.cp_namespace, names.credentials)
            update = ConditionUpdate(
                ConditionType.DATABASE_READY, False, Reason.DATABASE_COLLISION, error
            )
            outcome = StepOutcome(conditions=(update,), error=error)
            return ProvisionPlan(tuple(actions), LegResult(outcome, role_name=role))
    actions += [
        ApplyObject(
            MANAGEMENT_CLUSTER,
            build_vault_dynamic_secret(
                name=names.credentials,
                cp_namespace=scope.cp_namespace,
                creds_path=names.creds_path,
                connection=obs.connection,
                labels=scope.labels,
            ),
        ),
        ApplyObject(
            MANAGEMENT_CLUSTER,
            build_external_secret(
                name=names.credentials, cp_namespace=scope.cp_namespace, labels=scope.labels
            ),
        ),
    ]
    outcome = _check_credential(obs)
    database_name = scope.schema if outcome.proceed else None
    return ProvisionPlan(
        tuple(actions), LegResult(outcome, role_name=role, database_name=database_name)
    )


def _check_credential(obs: ProvisionObservation) -> StepOutcome:
    """Steps 6 and 7: ESO reports Ready and its Secret carries an engine-issued user."""
    scope, names = obs.scope, obs.scope.names
    es = obs.external_secret
    if es is None or not es.status.is_true(READY):
        message = msg_waiting_for_external_secret(
            names.creds_path, scope.cp_namespace, names.credentials
        )
        return _refused(Reason.WAITING_FOR_CREDENTIALS, message, requeue=True)
    secret = obs.materialised_secret
    username = secret.value("username") if secret else ""
    password = secret.value("password") if secret else ""
    if not username.startswith(ENGINE_USERNAME_PREFIX) or not password:
        message = msg_waiting_for_engine_username(scope.cp_namespace, names.credentials)
        return _refused(Reason.WAITING_FOR_CREDENTIALS, message, requeue=True)
    message = msg_database_provisioned(
        scope.schema, scope.keystone_namespace, scope.cluster_ref, names.role
    )
    update = ConditionUpdate(
        ConditionType.DATABASE_READY, True, Reason.DATABASE_PROVISIONED, message
    )
    return StepOutcome(conditions=(update,), proceed=True)


def plan_unreadable(what: str, detail: str) -> LegResult:
    """Refuse on an object the provision leg reads that does not parse: DependencyUnreadable.

    The refusal is written, not retried: the object's watch event or the 10-minute refresh
    brings the next pass.
    """
    update = ConditionUpdate(
        ConditionType.DATABASE_READY,
        False,
        Reason.DEPENDENCY_UNREADABLE,
        msg_dependency_unreadable(what, detail),
    )
    return LegResult(_database_ready(update, requeue=False))


def plan_provision_failure(
    plan: ProvisionPlan, failed: int, error: str, *, status_code: int | None = None
) -> LegResult:
    """Word the failure of `plan.actions[failed]`; the pass ends with an error and backs off.

    A failed OpenBao step writes DatabaseReady=OpenBaoError (a 403 gets the bootstrap hint;
    pass the HTTP status OpenBao answered, None for a failure before any answer). A failed
    Kubernetes write keeps the conditions as they were. DeliveryReady is not rewritten either
    way. status.roleName is recorded when the role step succeeded before the failure.
    """
    action = plan.actions[failed]
    role_done = any(isinstance(a, EnsureRole) for a in plan.actions[:failed])
    role_name = plan.result.role_name if role_done else None
    if isinstance(action, EnsureRole):
        update = ConditionUpdate(
            ConditionType.DATABASE_READY,
            False,
            Reason.OPENBAO_ERROR,
            compute_openbao_failure(error, status_code),
        )
        outcome = StepOutcome(
            conditions=(update,),
            error=f'ensuring OpenBao database role "{action.role_name}": {error}',
        )
        return LegResult(outcome)
    ref = action.ref if isinstance(action, ApplyObject) else None
    where = f"{ref.kind} {ref.namespace}/{ref.name}" if ref is not None else "a child"
    return LegResult(StepOutcome(error=f"ensuring {where}: {error}"), role_name=role_name)
