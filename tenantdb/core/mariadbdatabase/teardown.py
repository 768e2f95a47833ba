"""The teardown of a deleted MariaDBDatabase, and when its finalizer goes.

Owns which children go in which order (the OpenBao role and its leases first, then the ESO
objects, then the Database CR with its cleanupPolicy patched to the policy in force, then the
delivered Secret), the two modes (held while the ControlPlane exists: the first failure ends the
pass and the finalizer stays while anything is still listed; fail-open once it is gone: every
step runs and the finalizer goes at once), and the client-certificate-gone path. The namespace
assignment is never consulted here, and the teardown writes no status, except when an object it
reads does not parse (``gates.plan_unreadable_teardown``): then it removes nothing and says why.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from tenantdb.core.actions import DeleteObject, LogEvent, LogLevel, ObjectRef, PatchObject
from tenantdb.core.mariadbdatabase.actions import Action, ClientCertificateRef, RemoveRole
from tenantdb.core.mariadbdatabase.manifests import (
    DATABASE_API_VERSION,
    ESO_API_VERSION,
    GENERATOR_API_VERSION,
    build_cleanup_policy_patch,
    compute_cleanup_policy,
)
from tenantdb.core.mariadbdatabase.models import DatabaseCR, MariaDBDatabase
from tenantdb.core.mariadbdatabase.naming import (
    CLIENT_CERTIFICATE,
    FINALIZER,
    MANAGEMENT_CLUSTER,
    is_owned_order_child,
)
from tenantdb.core.mariadbdatabase.openbao import OpenBaoConnection
from tenantdb.core.mariadbdatabase.provision import CLIENT_CERTIFICATE_KEYS
from tenantdb.core.mariadbdatabase.results import NO_REQUEUE, REQUEUE_SHORT, PassResult
from tenantdb.core.mariadbdatabase.scope import OrderScope
from tenantdb.core.objects import KubeObject, ObjectMeta, Secret

CHILD_LOG = "removing a MariaDBDatabase child"
CERTIFICATE_GONE_LOG = "the OpenBao client certificate is gone; leaving database role"
DELIVERED_REMOVAL_LOG = "removing the delivered MariaDBDatabase Secret"
WAITING_LOG = "waiting for MariaDBDatabase children to be removed before releasing the finalizer"
GONE_LOG = "referenced ControlPlane is gone; releasing the MariaDBDatabase finalizer"
BEST_EFFORT_LOG = (
    "best-effort teardown of MariaDBDatabase children failed; releasing the finalizer anyway"
)


class TeardownMode(StrEnum):
    """How patient the teardown is."""

    HELD = "Held"
    """The ControlPlane exists: stop at the first failure, hold the finalizer until all is gone."""
    FAIL_OPEN = "FailOpen"
    """The ControlPlane is gone: issue every delete, release the finalizer whatever happens."""


@dataclass(frozen=True)
class TeardownObservation:
    """What the teardown looks at.

    `scope` is `compute_order_scope(order, cluster, cp)` with cp None once the ControlPlane is
    gone. The lists hold the objects listed by the order's labels: ExternalSecrets and
    VaultDynamicSecrets in the ControlPlane namespace on the management cluster, Database CRs in
    Keystone's namespace on Keystone's cluster.
    """

    order: MariaDBDatabase
    scope: OrderScope
    control_plane_present: bool
    connection: OpenBaoConnection
    client_certificate: Secret | None = None
    external_secrets: tuple[KubeObject, ...] = ()
    vault_dynamic_secrets: tuple[KubeObject, ...] = ()
    databases: tuple[DatabaseCR, ...] = ()
    delivered_secret: Secret | None = None


@dataclass(frozen=True)
class TeardownPlan:
    """The teardown actions in order, the mode, and how many deletes they issue."""

    actions: tuple[Action, ...]
    mode: TeardownMode
    deletes: int
    logs: tuple[LogEvent, ...] = ()

    @property
    def fails_open(self) -> bool:
        """Whether every delete is issued whatever fails (the ControlPlane is gone), rather
        than the first failure stopping the teardown."""
        return self.mode is TeardownMode.FAIL_OPEN


@dataclass(frozen=True)
class TeardownResult:
    """Whether to remove the finalizer now, and the pass result."""

    release_finalizer: bool
    result: PassResult
    logs: tuple[LogEvent, ...] = ()

    @property
    def reason(self) -> str:
        """The teardown summed up in one word, as its task result says it."""
        return "FinalizerReleased" if self.release_finalizer else "TeardownHeld"


def _owned(meta: ObjectMeta, obs: TeardownObservation) -> bool:
    order = obs.order.metadata
    return is_owned_order_child(
        meta,
        order_uid=order.uid,
        cluster=obs.scope.cluster,
        namespace=order.namespace,
        name=order.name,
    )


def _role_step(obs: TeardownObservation) -> tuple[list[Action], list[LogEvent]]:
    scope = obs.scope
    secret = obs.client_certificate
    if secret is None or not all(secret.value(key) for key in CLIENT_CERTIFICATE_KEYS):
        message = f'{CERTIFICATE_GONE_LOG} "{scope.names.role}" to its TTLs'
        return [], [LogEvent(message)]
    remove = RemoveRole(
        role_name=scope.names.role,
        creds_path=scope.names.creds_path,
        connection=obs.connection,
        client_certificate=ClientCertificateRef(scope.cp_namespace, CLIENT_CERTIFICATE),
    )
    return [remove], []


def plan_teardown(obs: TeardownObservation) -> TeardownPlan:
    """Plan one teardown pass; objects still listed are deleted (and counted) again."""
    scope = obs.scope
    actions, logs = _role_step(obs)
    deletes = 0
    for api_version, kind, items in (
        (ESO_API_VERSION, "ExternalSecret", obs.external_secrets),
        (GENERATOR_API_VERSION, "VaultDynamicSecret", obs.vault_dynamic_secrets),
    ):
        for item in items:
            if not _owned(item.metadata, obs):
                continue
            ref = ObjectRef(
                MANAGEMENT_CLUSTER, api_version, kind, scope.cp_namespace, item.metadata.name
            )
            actions.append(DeleteObject(ref, item.metadata.uid))
            logs.append(LogEvent(CHILD_LOG, (("name", ref.name), ("namespace", ref.namespace))))
            deletes += 1
    policy = obs.order.spec.deletion_policy
    owned_databases = [d for d in obs.databases if _owned(d.metadata, obs)]
    for database in owned_databases:
        if database.spec.cleanup_policy != compute_cleanup_policy(policy):
            # The provision writes the policy only on a pass that reaches the Database CR; an
            # edit followed at once by the deletion reaches tenantdb as the deletion alone.
            actions.append(
                PatchObject(_database_ref(scope, database), build_cleanup_policy_patch(policy))
            )
    for database in owned_databases:
        actions.append(DeleteObject(_database_ref(scope, database), database.metadata.uid))
        deletes += 1
    secret = obs.delivered_secret
    controller = secret.metadata.controller_reference() if secret is not None else None
    if secret is not None and controller is not None and controller.uid == obs.order.metadata.uid:
        ref = ObjectRef(
            scope.cluster, "v1", "Secret", obs.order.metadata.namespace, secret.metadata.name
        )
        actions.append(DeleteObject(ref, secret.metadata.uid))
        logs.append(
            LogEvent(DELIVERED_REMOVAL_LOG, (("name", ref.name), ("namespace", ref.namespace)))
        )
        deletes += 1
    mode = TeardownMode.HELD if obs.control_plane_present else TeardownMode.FAIL_OPEN
    return TeardownPlan(actions=tuple(actions), mode=mode, deletes=deletes, logs=tuple(logs))


def _database_ref(scope: OrderScope, database: DatabaseCR) -> ObjectRef:
    return ObjectRef(
        scope.keystone_cluster,
        DATABASE_API_VERSION,
        "Database",
        scope.keystone_namespace,
        database.metadata.name,
    )


def describe_teardown_failure(action: Action, error: str) -> str:
    """Word the failure of one teardown action."""
    if isinstance(action, RemoveRole):
        return f'removing OpenBao database role "{action.role_name}": {error}'
    if isinstance(action, DeleteObject | PatchObject):
        verb = "deleting" if isinstance(action, DeleteObject) else "patching the cleanupPolicy of"
        return f"{verb} {action.ref}: {error}"
    return error


def compute_teardown_result(
    plan: TeardownPlan, failures: Sequence[tuple[int, str]] = ()
) -> TeardownResult:
    """Decide the finalizer after the engine ran the plan.

    `failures` pairs the index of each failed action with its error text. In held mode the
    engine stops at the first failure; in fail-open mode it runs every action.
    """
    worded = [describe_teardown_failure(plan.actions[i], error) for i, error in failures]
    return decide_teardown(plan.mode, plan.deletes, worded)


def decide_teardown(mode: TeardownMode, deletes: int, failures: Sequence[str]) -> TeardownResult:
    """Decide the finalizer from the mode, the deletes still issued, and the worded failures.

    Held: the first failure ends the pass with an error; deletes still issued hold the finalizer
    and bring the order back after 10 s; none releases it. Fail-open: released at once.
    """
    if mode is TeardownMode.FAIL_OPEN:
        if failures:
            log = LogEvent(BEST_EFFORT_LOG, (("errors", "; ".join(failures)),), LogLevel.ERROR)
        else:
            log = LogEvent(GONE_LOG)
        return TeardownResult(release_finalizer=True, result=NO_REQUEUE, logs=(log,))
    if failures:
        return TeardownResult(release_finalizer=False, result=PassResult(error=failures[0]))
    if deletes > 0:
        log = LogEvent(WAITING_LOG, level=LogLevel.DEBUG)
        return TeardownResult(
            release_finalizer=False, result=PassResult(requeue_after=REQUEUE_SHORT), logs=(log,)
        )
    return TeardownResult(release_finalizer=True, result=NO_REQUEUE)


def compute_released_finalizers(finalizers: Sequence[str]) -> list[str]:
    """The order's finalizers once the teardown released its own, the others kept in order."""
    return [f for f in finalizers if f != FINALIZER]
