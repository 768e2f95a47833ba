"""The reads and writes of a MariaDBDatabase pass: observations in, actions out.

Owns the I/O around ``tenantdb.core``'s MariaDBDatabase decisions: fetching the order, its
ControlPlane, the OpenBao connection of its store and each leg's observation from the right
cluster and namespace (as ``OrderScope`` says); running the actions a plan returns (server-side
apply, create-or-update, merge patch, delete, the OpenBao role calls); and writing the status
and the finalizer. It decides nothing: which object to read, which to write and what the status
says all come from core.

Errors surface as ``ActionError`` (an action failed; its message is the adapter's, without any
credential) and ``ReadError`` (a read other than NotFound failed).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol, TypeVar, assert_never

import redis
from pydantic import BaseModel, ValidationError
from redis import RedisError

from tenantdb.adapters.clusters import MANAGEMENT, ClusterRegistry, ClusterUnavailableError
from tenantdb.adapters.errors import SafeError
from tenantdb.adapters.events import record_event
from tenantdb.adapters.kube import (
    SECRET,
    SERVICE_ACCOUNT,
    ConflictError,
    KindNotServedError,
    KubeClient,
    KubeError,
    NotFoundError,
    Resource,
    register_resources,
    resource_for,
)
from tenantdb.adapters.metrics import RECONCILE_ERRORS
from tenantdb.adapters.openbao import (
    ClientCertificate,
    OpenBaoError,
    OpenBaoSession,
    open_session,
)
from tenantdb.adapters.schemaindex import SchemaIndex
from tenantdb.adapters.versionindex import SharedObjects, SharedRef, Versions
from tenantdb.core.actions import (
    ApplyObject,
    ApplyStrategy,
    DeleteObject,
    ObjectRef,
    PatchObject,
    read_version,
)
from tenantdb.core.applied import is_applied
from tenantdb.core.events import Event
from tenantdb.core.keys import OrderKey
from tenantdb.core.mariadbdatabase.actions import (
    Action,
    ClientCertificateRef,
    EnsureRole,
    RemoveRole,
)
from tenantdb.core.mariadbdatabase.conditions import build_status_body
from tenantdb.core.mariadbdatabase.delivery import DeliveryObservation
from tenantdb.core.mariadbdatabase.gates import ControlPlaneRead
from tenantdb.core.mariadbdatabase.models import (
    ControlPlane,
    DatabaseCR,
    ExternalSecret,
    MariaDB,
    MariaDBDatabase,
    MariaDBDatabaseStatus,
    SecretStore,
)
from tenantdb.core.mariadbdatabase.naming import CLIENT_CERTIFICATE, SHARED_SERVICE_ACCOUNT
from tenantdb.core.mariadbdatabase.openbao import (
    GENERATOR_AUTH_ROLE,
    NAMESPACED_STORE_KIND,
    OpenBaoConnection,
    compute_connection,
    compute_login_ttl,
    should_write_role,
)
from tenantdb.core.mariadbdatabase.passes import Leg, PassRecord
from tenantdb.core.mariadbdatabase.provision import ProvisionObservation, is_relevant_database
from tenantdb.core.mariadbdatabase.results import Unreadable
from tenantdb.core.mariadbdatabase.scope import OrderScope, compute_order_scope
from tenantdb.core.mariadbdatabase.teardown import TeardownObservation
from tenantdb.core.objects import KubeObject, Secret
from tenantdb.settings import Settings

# What a MariaDBDatabase pass reads and writes beyond core objects, registered with the kube
# adapter so that it knows them by apiVersion and kind.
MARIADB_DATABASE = Resource("c5c3.io", "v1alpha1", "mariadbdatabases", "MariaDBDatabase")
CONTROL_PLANE = Resource("c5c3.io", "v1alpha1", "controlplanes", "ControlPlane")
CERTIFICATE = Resource("cert-manager.io", "v1", "certificates", "Certificate")
MARIADB = Resource("k8s.mariadb.com", "v1alpha1", "mariadbs", "MariaDB")
DATABASE = Resource("k8s.mariadb.com", "v1alpha1", "databases", "Database")
EXTERNAL_SECRET = Resource("external-secrets.io", "v1", "externalsecrets", "ExternalSecret")
VAULT_DYNAMIC_SECRET = Resource(
    "generators.external-secrets.io", "v1alpha1", "vaultdynamicsecrets", "VaultDynamicSecret"
)
CERTIFICATE_REUSE_SECONDS = 300.0
"""How long a worker process reuses the OpenBao client certificate it read for quiet refreshes."""
SECRET_STORE = Resource("external-secrets.io", "v1", "secretstores", "SecretStore")
CLUSTER_SECRET_STORE = Resource(
    "external-secrets.io", "v1", "clustersecretstores", "ClusterSecretStore", namespaced=False
)

CLIENT_CERTIFICATE_WATCH = "ClientCertificate"
"""The watcher's name for its watch of the OpenBao client certificate's Secrets, under which it
keeps their resourceVersions (``tenantdb.adapters.versionindex``)."""

register_resources(
    MARIADB_DATABASE,
    CONTROL_PLANE,
    CERTIFICATE,
    MARIADB,
    DATABASE,
    EXTERNAL_SECRET,
    VAULT_DYNAMIC_SECRET,
    SECRET_STORE,
    CLUSTER_SECRET_STORE,
)

log = logging.getLogger(__name__)

Model = TypeVar("Model", bound=BaseModel)


def _with_version(manifest: dict[str, Any], version: str) -> dict[str, Any]:
    """``manifest`` with the resourceVersion its apply is conditional on."""
    return {**manifest, "metadata": {**manifest["metadata"], "resourceVersion": version}}


def _create_or_update(
    client: KubeClient, resource: Resource, manifest: dict[str, Any]
) -> dict[str, Any]:
    """Create the object, or replace its spec, conditional on the read made just before."""
    meta = manifest["metadata"]
    namespace, name = meta.get("namespace"), meta["name"]
    live = client.get_or_none(resource, namespace, name)
    if live is None:
        return client.create(manifest)
    version = live["metadata"]["resourceVersion"]
    patch = {"metadata": {"resourceVersion": version}, "spec": manifest["spec"]}
    return client.patch(resource, namespace, name, patch)


class ActionError(SafeError):
    """An action failed; ``status`` is the HTTP status the server answered, if any."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class FailedActionError(ActionError):
    """One action of a sequence failed: which (``index``, its place in the plan), and why."""

    def __init__(self, index: int, action: Action, error: ActionError) -> None:
        super().__init__(str(error), error.status)
        self.index = index
        self.action = action


class ReadError(SafeError):
    """A read failed for another reason than the object being absent."""

    def __init__(self, context: str, message: str) -> None:
        super().__init__(f"{context}: {message}")
        self.context = context
        self.message = message


class UnreadableError(ReadError):
    """An object the pass reads does not parse (malformed, or of a newer API version).

    The message names the object and the fields that failed, never their values.
    """

    def __init__(self, what: str, error: ValidationError) -> None:
        super().__init__(what, describe_validation(error))


def describe_validation(error: ValidationError, limit: int = 3) -> str:
    """The fields a validation failed on and why, without the values it failed on."""
    found = error.errors(include_url=False, include_input=False, include_context=False)
    parts = [
        f"{'.'.join(str(p) for p in e['loc']) or '(the object)'}: {e['msg']}" for e in found[:limit]
    ]
    more = len(found) - limit
    return "; ".join(parts) + (f" (and {more} more)" if more > 0 else "")


def parse_object(model: type[Model], raw: dict[str, Any], kind: str) -> Model:
    """Read a stored object of ``kind`` as ``model``; ``UnreadableError`` when it does not parse."""
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        meta = raw.get("metadata") or {}
        where = f"{meta.get('namespace')}/" if meta.get("namespace") else ""
        raise UnreadableError(f"{kind} {where}{meta.get('name', '')}", exc) from None


class WriteError(SafeError):
    """A write of a leg failed; ``context`` names what was written."""

    def __init__(self, context: str, message: str) -> None:
        super().__init__(f"{context}: {message}")
        self.context = context
        self.message = message


@dataclass(frozen=True)
class FetchedOrder:
    """The order as stored, and its typed view."""

    raw: dict[str, Any]
    order: MariaDBDatabase

    @classmethod
    def of(cls, raw: dict[str, Any]) -> FetchedOrder:
        """The order as stored, read as its typed view (``ValidationError`` when it does not
        parse)."""
        return cls(raw, MariaDBDatabase.model_validate(raw))


Remember = Callable[[str, Mapping[str, Any] | None], None]
"""Record an object a pass wrote (its cluster, the server's answer), so its echo wakes nothing."""

Noted = Callable[[OrderKey, Mapping[str, Any]], None]
"""Record the order's Ready state as a status write left it."""


Kept = Callable[[dict[str, Any]], None]
"""Receive the order as a status write left it."""


def keep_nothing(stored: dict[str, Any]) -> None:
    """Keep nothing of the order a status write left."""


Failed = Callable[[Action, str], None]
"""Hear of an action that failed (its error text) while the rest go on."""


def ignore_failure(action: Action, error: str) -> None:
    """Hear nothing of a failed action but what is returned."""


RunOne = Callable[[Action, Callable[[], None]], dict[str, Any] | None]
"""Perform one action under a lease check; the object the server answered with, if any."""


def run_in_order(
    actions: Iterable[tuple[int, Action]],
    run: RunOne,
    check: Callable[[], None],
    remember: Remember,
    *,
    keep_going: bool = False,
    failed: Failed = ignore_failure,
) -> tuple[tuple[int, str], ...]:
    """Perform each action with ``run`` in order, the lease checked before each; remember each
    object applied.

    Returns each failure's place and error text, when ``keep_going`` runs past them; each is
    handed to ``failed`` (the action and the error text) as it happens.

    Raises:
        FailedActionError: an action failed, and the rest is not to be run.
    """
    failures: list[tuple[int, str]] = []
    for index, action in actions:
        check()
        try:
            answer = run(action, check)
        except ActionError as error:
            if not keep_going:
                raise FailedActionError(index, action, error) from None
            failed(action, str(error))
            failures.append((index, str(error)))
            continue
        if isinstance(action, ApplyObject):
            remember(action.ref.cluster, answer)
    return tuple(failures)


class MariaDBIO(Protocol):
    """What a MariaDBDatabase pass reads and writes beyond the order store: ``MariaDBOrders``
    over the clusters and OpenBao, or a test's world."""

    def read_control_plane(self, order: MariaDBDatabase) -> ControlPlaneRead:
        """The order's ControlPlane for the gates; one that does not parse says so."""
        ...

    def read_provision(self, order: MariaDBDatabase, scope: OrderScope) -> ProvisionObservation:
        """What the provision leg decides on. Raises ``UnreadableError``."""
        ...

    def observe_role(
        self, observation: ProvisionObservation, role: EnsureRole | None
    ) -> ProvisionObservation:
        """The observation with the OpenBao role as it stands (``role`` None: unchanged)."""
        ...

    def role_as_desired(self, role: EnsureRole) -> bool:
        """Whether the OpenBao role stands as ``role`` wants it; False when OpenBao cannot say."""
        ...

    def fetch_delivery(
        self,
        order: MariaDBDatabase,
        scope: OrderScope,
        cp: ControlPlane,
        provision: ProvisionObservation | None = None,
    ) -> DeliveryObservation:
        """What the delivery leg decides on. Raises ``ReadError``."""
        ...

    def apply_delivery(
        self, apply: ApplyObject | None, check: Callable[[], None], remember: Remember
    ) -> Secret | None:
        """Apply the delivered Secret (None: nothing to apply). Raises ``WriteError``."""
        ...

    def run_each(
        self,
        actions: Iterable[tuple[int, Action]],
        check: Callable[[], None],
        remember: Remember,
        *,
        keep_going: bool = False,
        failed: Failed = ignore_failure,
    ) -> tuple[tuple[int, str], ...]:
        """Perform actions in order. Raises ``FailedActionError`` unless ``keep_going``, which
        hands each failure to ``failed`` as it happens."""
        ...

    def read_teardown(self, order: MariaDBDatabase, cluster: str) -> TeardownObservation:
        """What the teardown decides on. Raises ``UnreadableError``."""
        ...

    def release_schema(self, order: MariaDBDatabase, scope: OrderScope) -> None:
        """Drop the order's claim of its schema."""
        ...

    def write_record(
        self,
        key: OrderKey,
        fetched: FetchedOrder,
        rec: PassRecord,
        check: Callable[[], None],
        noted: Noted,
        written: Kept = keep_nothing,
    ) -> None:
        """Carry out what a pass record asks of the order."""
        ...

    def write_unreadable_status(
        self,
        key: OrderKey,
        raw: dict[str, Any],
        compute: Callable[[Mapping[str, Any]], Mapping[str, Any]],
        check: Callable[[], None],
    ) -> dict[str, Any]:
        """Patch the status of an order whose body does not parse."""
        ...

    def set_finalizers(
        self, key: OrderKey, fetched: FetchedOrder, finalizers: list[str]
    ) -> FetchedOrder:
        """Replace the order's finalizers."""
        ...


class MariaDBOrders:
    """The I/O of MariaDBDatabase passes over a set of clusters and one OpenBao login."""

    def __init__(
        self,
        clusters: ClusterRegistry,
        settings: Settings,
        read_jwt: Callable[[], str] | None = None,
        schemas: SchemaIndex | None = None,
        shared: SharedObjects | None = None,
    ) -> None:
        """Bind to the clusters, the OpenBao login settings, the schema index (without one,
        the collision guard lists Keystone's namespace and takes no claims) and this process's
        copies of the shared objects (without them, every pass reads those live)."""
        self.clusters = clusters
        self.settings = settings
        self.schemas = schemas
        self.shared = shared
        self._certificates: dict[ClientCertificateRef, tuple[float, ClientCertificate]] = {}
        self._login_ttls: dict[OpenBaoConnection, tuple[float, int | None]] = {}
        self.read_jwt = read_jwt or (
            lambda: Path(settings.service_account_token_file).read_text(encoding="utf-8")
        )

    @classmethod
    def over_redis(
        cls, clusters: ClusterRegistry, settings: Settings, client: redis.Redis
    ) -> MariaDBOrders:
        """A worker process's I/O: the schema index and the shared objects' versions read from
        the Redis the watcher keeps them in, under the installation's key prefix."""
        prefix = settings.key_prefix
        return cls(
            clusters,
            settings,
            schemas=SchemaIndex(client, prefix),
            shared=SharedObjects(client, prefix),
        )

    # -- reads ---------------------------------------------------------------------------------

    def _shared_get(
        self,
        cluster: str,
        resource: Resource,
        ns: str | None,
        name: str,
        *,
        watch: str = "",
        versions: Versions | None = None,
    ) -> dict[str, Any] | None:
        """An object every order of a ControlPlane reads, from this process's copy while the
        watch of it (``watch``, else the kind) last saw that version; else live.

        ``versions`` are the versions the pass looked up at once (``_shared_versions``)."""
        client = self.clusters.get(cluster)
        if self.shared is None:
            return _get(client, resource, ns, name)
        return self.shared.get(
            client, cluster, resource, watch or resource.kind, ns, name, versions=versions
        )

    def _shared_versions(self, scope: OrderScope) -> Versions | None:
        """The versions of the objects the provision leg shares with the ControlPlane's other
        orders (store, MariaDB, ServiceAccount, client Certificate and its Secret), looked up
        in one round trip; None without copies."""
        if self.shared is None:
            return None
        store, cp_ns = scope.store, scope.cp_namespace
        store_kind = (
            SECRET_STORE if store.kind == NAMESPACED_STORE_KIND else CLUSTER_SECRET_STORE
        ).kind
        refs = [
            SharedRef(MANAGEMENT, store_kind, store.namespace or "", store.name),
            SharedRef(MANAGEMENT, SERVICE_ACCOUNT.kind, cp_ns, SHARED_SERVICE_ACCOUNT),
            SharedRef(MANAGEMENT, CERTIFICATE.kind, cp_ns, CLIENT_CERTIFICATE),
            SharedRef(MANAGEMENT, CLIENT_CERTIFICATE_WATCH, cp_ns, CLIENT_CERTIFICATE),
        ]
        if scope.cluster_ref:
            refs.append(
                SharedRef(
                    scope.keystone_cluster,
                    MARIADB.kind,
                    scope.keystone_namespace,
                    scope.cluster_ref,
                )
            )
        return self.shared.versions(refs)

    def fetch_control_plane(
        self, order: MariaDBDatabase, *, live: bool = True
    ) -> ControlPlane | None:
        """Read the order's ControlPlane on the management cluster; None when absent.

        ``live`` False may serve this process's copy while the watch saw no newer version."""
        ns, name = order.control_plane_namespace(), order.spec.control_plane_ref.name
        raw = (
            _get(self.clusters.get(MANAGEMENT), CONTROL_PLANE, ns, name)
            if live
            else self._shared_get(MANAGEMENT, CONTROL_PLANE, ns, name)
        )
        return None if raw is None else parse_object(ControlPlane, raw, "ControlPlane")

    def read_control_plane(self, order: MariaDBDatabase) -> ControlPlaneRead:
        """The order's ControlPlane for the gates: found, absent, or why it does not parse."""
        try:
            return ControlPlaneRead(self.fetch_control_plane(order, live=False))
        except UnreadableError as exc:
            return ControlPlaneRead(unreadable=Unreadable(exc.context, exc.message))

    def fetch_connection(
        self, scope: OrderScope, *, live: bool = True, versions: Versions | None = None
    ) -> OpenBaoConnection:
        """The OpenBao server and mount of the order's store; defaults where unreadable.

        ``live`` False may serve this process's copy while the watch saw no newer version
        (``versions`` as for ``_shared_get``)."""
        store = scope.store
        resource = SECRET_STORE if store.kind == NAMESPACED_STORE_KIND else CLUSTER_SECRET_STORE
        try:
            if live:
                raw = _get(
                    self.clusters.get(MANAGEMENT), resource, store.namespace or None, store.name
                )
            else:
                raw = self._shared_get(
                    MANAGEMENT, resource, store.namespace or None, store.name, versions=versions
                )
        except KubeError:
            raw = None
        return compute_connection(
            None if raw is None else parse_object(SecretStore, raw, store.kind)
        )

    def fetch_provision(
        self,
        order: MariaDBDatabase,
        scope: OrderScope,
        connection: OpenBaoConnection,
        *,
        versions: Versions | None = None,
    ) -> ProvisionObservation:
        """Everything the provision leg decides on, read once before any of its writes.

        ``versions`` as for ``_shared_get``.

        The children it may apply are kept raw in ``live``, so core can leave out an apply that
        would change nothing. The OpenBao role is observed apart, by ``observe_role``.
        """
        try:
            keystone = self.clusters.get(scope.keystone_cluster)
        except ClusterUnavailableError as exc:
            return ProvisionObservation(
                order=order, scope=scope, connection=connection, keystone_cluster_error=str(exc)
            )
        management = self.clusters.get(MANAGEMENT)
        ns, cp_ns, names = scope.keystone_namespace, scope.cp_namespace, scope.names
        mariadb = (
            self._shared_get(
                scope.keystone_cluster, MARIADB, ns, scope.cluster_ref, versions=versions
            )
            if scope.cluster_ref
            else None
        )
        databases = self._relevant_databases(keystone, scope)
        vds = _get(management, VAULT_DYNAMIC_SECRET, cp_ns, names.credentials)
        es = _get(management, EXTERNAL_SECRET, cp_ns, names.credentials)
        live = {
            _ref(MANAGEMENT, SERVICE_ACCOUNT, cp_ns, SHARED_SERVICE_ACCOUNT): self._shared_get(
                MANAGEMENT, SERVICE_ACCOUNT, cp_ns, SHARED_SERVICE_ACCOUNT, versions=versions
            ),
            _ref(MANAGEMENT, CERTIFICATE, cp_ns, CLIENT_CERTIFICATE): self._shared_get(
                MANAGEMENT, CERTIFICATE, cp_ns, CLIENT_CERTIFICATE, versions=versions
            ),
            _ref(scope.keystone_cluster, DATABASE, ns, names.database_cr): next(
                (d for d in databases if d["metadata"]["name"] == names.database_cr), None
            ),
            _ref(MANAGEMENT, VAULT_DYNAMIC_SECRET, cp_ns, names.credentials): vds,
            _ref(MANAGEMENT, EXTERNAL_SECRET, cp_ns, names.credentials): es,
        }
        own = live[_ref(scope.keystone_cluster, DATABASE, ns, names.database_cr)]
        return ProvisionObservation(
            order=order,
            scope=scope,
            connection=connection,
            mariadb=_model(MariaDB, mariadb),
            databases=parse_databases(databases, names.database_cr),
            claimed_by=self._claim_schema(order, scope) if own is None else None,
            client_certificate=_model(
                Secret,
                self._shared_get(
                    MANAGEMENT,
                    SECRET,
                    cp_ns,
                    CLIENT_CERTIFICATE,
                    watch=CLIENT_CERTIFICATE_WATCH,
                    versions=versions,
                ),
            ),
            vault_dynamic_secret=_model(KubeObject, vds),
            external_secret=_model(ExternalSecret, es),
            materialised_secret=_model(Secret, _get(management, SECRET, cp_ns, names.credentials)),
            live=live,
        )

    def read_provision(self, order: MariaDBDatabase, scope: OrderScope) -> ProvisionObservation:
        """The provision leg's observation over the OpenBao connection of the order's store.

        A failed Kubernetes read is counted as a provision error before it ends the pass.

        Raises:
            UnreadableError: an object the leg decides on does not parse.
        """
        try:
            versions = self._shared_versions(scope)
            connection = self.fetch_connection(scope, live=False, versions=versions)
            return self.fetch_provision(order, scope, connection, versions=versions)
        except KubeError:
            leg = Leg.PROVISION
            RECONCILE_ERRORS.labels(sub_reconciler=leg, condition_type=leg.condition_type).inc()
            raise

    def _relevant_databases(self, keystone: KubeClient, scope: OrderScope) -> list[dict[str, Any]]:
        """The Database CRs of Keystone's namespace that can matter to the collision guard.

        The schema index names the CRs carrying the order's schema on its MariaDB; each is read
        again here, with the child, so the guard decides on what the API server holds now. Where
        the index is not to be trusted (no watch has it whole, Redis cannot say), the namespace
        is listed instead.
        """
        ns, own = scope.keystone_namespace, scope.names.database_cr
        holders = self._holders(scope)
        if holders is None:
            return [d for d in _list(keystone, DATABASE, ns) if is_relevant_database(d, scope)]
        names = [own, *(name for name in holders if name != own)]
        found = [_get(keystone, DATABASE, ns, name) for name in names]
        return [d for d in found if d is not None and is_relevant_database(d, scope)]

    def _holders(self, scope: OrderScope) -> list[str] | None:
        if self.schemas is None or not scope.cluster_ref:
            return None
        try:
            return self.schemas.holders(
                scope.keystone_cluster, scope.keystone_namespace, (scope.cluster_ref, scope.schema)
            )
        except RedisError as exc:
            log.warning("schema index unreadable (%s); listing Database CRs", type(exc).__name__)
            return None

    def _claim_schema(self, order: MariaDBDatabase, scope: OrderScope) -> str | None:
        """Claim the order's schema before it may create its Database CR; the Database CR name
        of another order's claim, which the guard refuses on as on the CR itself."""
        if self.schemas is None or not scope.cluster_ref:
            return None
        meta = order.metadata
        return self.schemas.claim(
            scope.keystone_cluster,
            scope.keystone_namespace,
            (scope.cluster_ref, scope.schema),
            schema_holder(scope.cluster, meta.namespace, meta.name, meta.uid),
            scope.names.database_cr,
        )

    def release_schema(self, order: MariaDBDatabase, scope: OrderScope) -> None:
        """Drop the order's claim of its schema, if it holds one: it is being deleted, and its
        Database CR (while it exists) is what keeps the schema from another order."""
        if self.schemas is None or not scope.cluster_ref:
            return
        meta = order.metadata
        self.schemas.release(
            scope.keystone_cluster,
            scope.keystone_namespace,
            (scope.cluster_ref, scope.schema),
            schema_holder(scope.cluster, meta.namespace, meta.name, meta.uid),
        )

    def observe_role(
        self, observation: ProvisionObservation, role: EnsureRole | None
    ) -> ProvisionObservation:
        """Add the OpenBao role as it stands; unobserved when OpenBao cannot be asked, or when
        the plan does not reach the role (``role`` None).

        A failure is left to the role step, which words it in the order's status.
        """
        certificate = observation.client_certificate
        if certificate is None or role is None:
            return observation
        try:
            with self._session(
                role.connection, role.client_certificate, _client_certificate(certificate)
            ) as session:
                data = session.read_role(role.role_name)
                login_ttl = self._login_ttl(session, role.connection)
        except OpenBaoError:
            return observation
        return replace(observation, role=data, role_observed=True, login_ttl=login_ttl)

    def _login_ttl(self, session: OpenBaoSession, connection: OpenBaoConnection) -> int | None:
        """The generators' login token lifetime at this server and mount, read at most once
        per ``openbao_token_reuse_seconds`` (it is the platform's, the same for every order)."""
        now = time.monotonic()
        found = self._login_ttls.get(connection)
        if found is not None and now - found[0] < self.settings.openbao_token_reuse_seconds:
            return found[1]
        login_ttl = compute_login_ttl(
            session.read_auth_role(connection.auth_mount, GENERATOR_AUTH_ROLE)
        )
        self._login_ttls[connection] = (now, login_ttl)
        return login_ttl

    def role_as_desired(self, role: EnsureRole) -> bool:
        """Whether the OpenBao role stands as ``role`` wants it: a quiet refresh's one check.

        The client certificate comes from this process's memory when it read it less than
        ``CERTIFICATE_REUSE_SECONDS`` ago (cert-manager renews long before the old one expires),
        so a quiet refresh reads nothing from Kubernetes. False when OpenBao cannot answer or
        refuses the login: the full pass that follows reads the certificate again and says why
        on the order.
        """
        ref = role.client_certificate
        try:
            certificate = self._reused_certificate(ref)
            with self._session(role.connection, ref, certificate) as session:
                data = session.read_role(role.role_name)
        except (OpenBaoError, KubeError):
            self._certificates.pop(ref, None)
            return False
        return not should_write_role(data, role.body)

    def _reused_certificate(self, ref: ClientCertificateRef) -> ClientCertificate:
        now = time.monotonic()
        found = self._certificates.get(ref)
        if found is not None and now - found[0] < CERTIFICATE_REUSE_SECONDS:
            return found[1]
        certificate = self._certificate(ref)
        self._certificates[ref] = (now, certificate)
        return certificate

    def fetch_delivery(
        self,
        order: MariaDBDatabase,
        scope: OrderScope,
        cp: ControlPlane,
        provision: ProvisionObservation | None = None,
    ) -> DeliveryObservation:
        """Everything the delivery leg decides on, read before its one write.

        The issued Secret and the ExternalSecret come from ``provision`` when the same pass
        read them there; otherwise they are read here.

        Raises:
            ReadError: a read other than NotFound failed; the leg reports DeliveryError.
        """
        keystone_error: str | None = None
        ca_bundle: dict[str, Any] | None = None
        if scope.tls:
            try:
                keystone = self.clusters.get(scope.keystone_cluster)
            except ClusterUnavailableError as exc:
                keystone_error = str(exc)
            else:
                ns, name = scope.keystone_namespace, scope.ca_bundle_secret
                ca_bundle = _read(
                    f"reading database CA bundle {ns}/{name}", keystone, SECRET, ns, name
                )
        management = self.clusters.get(MANAGEMENT)
        cp_ns, name = scope.cp_namespace, scope.names.credentials
        delivered_name = scope.names.delivered_secret
        if provision is not None:
            materialised, external = provision.materialised_secret, provision.external_secret
        else:
            materialised = _model(
                Secret, _read(f"reading Secret {cp_ns}/{name}", management, SECRET, cp_ns, name)
            )
            external = _model(
                ExternalSecret,
                _read(
                    f"reading ExternalSecret {cp_ns}/{name}",
                    management,
                    EXTERNAL_SECRET,
                    cp_ns,
                    name,
                ),
            )
        delivered = _read(
            f"reading Secret {order.metadata.namespace}/{delivered_name}",
            self.clusters.get(scope.cluster),
            SECRET,
            order.metadata.namespace,
            delivered_name,
        )
        return DeliveryObservation(
            order=order,
            scope=scope,
            control_plane=cp,
            database_name=scope.schema,
            keystone_cluster_error=keystone_error,
            ca_bundle=_model(Secret, ca_bundle),
            materialised_secret=materialised,
            external_secret=external,
            delivered_secret=_model(Secret, delivered),
            delivered_raw=delivered,
        )

    def read_teardown(self, order: MariaDBDatabase, cluster: str) -> TeardownObservation:
        """What the teardown of the order on ``cluster`` decides on: its ControlPlane (which
        decides held or fail-open) and the children still listed by the order's labels.

        Raises:
            UnreadableError: an object the teardown decides on does not parse.
        """
        cp = self.fetch_control_plane(order)
        scope = compute_order_scope(order, cluster, cp)
        connection = self.fetch_connection(scope)
        return self.fetch_teardown(
            order, scope, control_plane_present=cp is not None, connection=connection
        )

    def fetch_teardown(
        self,
        order: MariaDBDatabase,
        scope: OrderScope,
        *,
        control_plane_present: bool,
        connection: OpenBaoConnection,
    ) -> TeardownObservation:
        """What the teardown decides on: the children still listed by the order's labels."""
        management = self.clusters.get(MANAGEMENT)
        cp_ns, selector = scope.cp_namespace, scope.label_selector
        try:
            keystone: KubeClient | None = self.clusters.get(scope.keystone_cluster)
        except ClusterUnavailableError:
            keystone = None
        databases = (
            _list(keystone, DATABASE, scope.keystone_namespace, selector) if keystone else []
        )
        return TeardownObservation(
            order=order,
            scope=scope,
            control_plane_present=control_plane_present,
            connection=connection,
            client_certificate=_model(Secret, _get(management, SECRET, cp_ns, CLIENT_CERTIFICATE)),
            external_secrets=tuple(
                KubeObject.model_validate(o)
                for o in _list(management, EXTERNAL_SECRET, cp_ns, selector)
            ),
            vault_dynamic_secrets=tuple(
                KubeObject.model_validate(o)
                for o in _list(management, VAULT_DYNAMIC_SECRET, cp_ns, selector)
            ),
            databases=tuple(parse_object(DatabaseCR, d, "Database") for d in databases),
            delivered_secret=_model(
                Secret,
                _get(
                    self.clusters.get(scope.cluster),
                    SECRET,
                    order.metadata.namespace,
                    scope.names.delivered_secret,
                ),
            ),
        )

    # -- writes --------------------------------------------------------------------------------

    def run_each(
        self,
        actions: Iterable[tuple[int, Action]],
        check: Callable[[], None],
        remember: Remember,
        *,
        keep_going: bool = False,
        failed: Failed = ignore_failure,
    ) -> tuple[tuple[int, str], ...]:
        """Perform each action in order (its place in the plan beside it), the lease checked
        before each; remember each object applied.

        Returns each failure's place and error text, when ``keep_going`` runs past them; each
        is handed to ``failed`` (the action and the error text) as it happens.

        Raises:
            FailedActionError: an action failed, and the rest is not to be run.
        """
        return run_in_order(
            actions, self.run, check, remember, keep_going=keep_going, failed=failed
        )

    def apply_delivery(
        self, apply: ApplyObject | None, check: Callable[[], None], remember: Remember
    ) -> Secret | None:
        """Apply the Secret beside the order, the lease checked first; return it as the server
        answered (None: nothing to apply, or no answer).

        Raises:
            WriteError: the apply failed.
        """
        if apply is None:
            return None
        check()
        try:
            answer = self.run(apply, check)
        except ActionError as error:
            ref = apply.ref
            raise WriteError(f"delivering Secret {ref.namespace}/{ref.name}", str(error)) from None
        remember(apply.ref.cluster, answer)
        return None if answer is None else Secret.model_validate(answer)

    def run(self, action: Action, check: Callable[[], None]) -> dict[str, Any] | None:
        """Perform one action; return the object the server answered with, if any.

        ``check`` raises when the pass has lost its lease. It is called where an action writes
        after a read of its own: before an OpenBao role write, and before an apply is sent again
        over an object that changed since the pass read it.

        Raises:
            ActionError: the action failed.
        """
        try:
            if isinstance(action, ApplyObject):
                return self._apply(action, check)
            if isinstance(action, PatchObject):
                client = self.clusters.get(action.ref.cluster)
                return client.patch(
                    _resource(action.ref), action.ref.namespace, action.ref.name, action.merge_patch
                )
            if isinstance(action, DeleteObject):
                client = self.clusters.get(action.ref.cluster)
                client.delete(
                    _resource(action.ref), action.ref.namespace, action.ref.name, uid=action.uid
                )
                return None
            if isinstance(action, EnsureRole):
                self._ensure_role(action, check)
                return None
            if isinstance(action, RemoveRole):
                self._remove_role(action)
                return None
            assert_never(action)
        except (KubeError, OpenBaoError) as exc:
            raise ActionError(str(exc), exc.status) from None
        except ClusterUnavailableError as exc:
            raise ActionError(str(exc)) from None

    def _apply(self, action: ApplyObject, check: Callable[[], None]) -> dict[str, Any]:
        client = self.clusters.get(action.cluster)
        manifest = action.manifest
        meta = manifest["metadata"]
        namespace, name = meta.get("namespace"), meta["name"]
        resource = resource_for(manifest)
        if action.strategy is ApplyStrategy.CREATE_OR_UPDATE:
            try:
                return _create_or_update(client, resource, manifest)
            except ConflictError:
                check()
                return _create_or_update(client, resource, manifest)
        if action.read_version is None:
            return client.apply(manifest)
        try:
            return client.apply(_with_version(manifest, action.read_version))
        except ConflictError:
            # The object changed since the pass read it. A newer pass of the order may have
            # written it, and then this pass's lease is gone: check says so before anything is
            # sent again. Otherwise another writer (the object's operator, another order's pass
            # over a shared object) moved it on: read it again and apply over that, once.
            check()
            current = client.get_or_none(resource, namespace, name)
            if current is not None and is_applied(manifest, current):
                return current
            return client.apply(_with_version(manifest, read_version(current)))

    def _certificate(self, ref: ClientCertificateRef) -> ClientCertificate:
        raw = _get(self.clusters.get(MANAGEMENT), SECRET, ref.namespace, ref.name)
        secret = _model(Secret, raw)
        if secret is None:
            raise OpenBaoError(f"the OpenBao client certificate {ref.namespace}/{ref.name} is gone")
        return _client_certificate(secret)

    def _session(
        self,
        connection: OpenBaoConnection,
        ref: ClientCertificateRef,
        certificate: ClientCertificate | None = None,
    ) -> Any:
        return open_session(
            connection.server,
            connection.auth_mount,
            self.settings.openbao_role,
            self.read_jwt,
            certificate or self._certificate(ref),
            timeout=self.settings.openbao_timeout_seconds,
            token_reuse=self.settings.openbao_token_reuse_seconds,
        )

    def _ensure_role(self, action: EnsureRole, check: Callable[[], None]) -> None:
        # OpenBao takes no precondition: the lease is checked right before the write, and a pass
        # that lost it after writing asks for another pass, which reads the role and writes it
        # again when a stale write changed it.
        with self._session(action.connection, action.client_certificate) as session:
            if should_write_role(session.read_role(action.role_name), action.body):
                check()
                session.write_role(action.role_name, action.body.to_request())

    def _remove_role(self, action: RemoveRole) -> None:
        with self._session(action.connection, action.client_certificate) as session:
            session.revoke_role_leases(action.role_name)
            session.delete_role(action.role_name)

    def write_status(
        self,
        key: OrderKey,
        fetched: FetchedOrder,
        status: MariaDBDatabaseStatus,
        check: Callable[[], None],
    ) -> dict[str, Any]:
        """Write the order's status, guarded by the resourceVersion it was read at.

        ``check`` confirms the lease before a write that follows a conflict; see
        ``KubeClient.write_status``.
        """
        body = build_status_body(status)
        return self.clusters.get(key.cluster).write_status(
            MARIADB_DATABASE, fetched.raw, lambda _stored: body, check
        )

    def write_record(
        self,
        key: OrderKey,
        fetched: FetchedOrder,
        rec: PassRecord,
        check: Callable[[], None],
        noted: Noted,
        written: Kept = keep_nothing,
    ) -> None:
        """Carry out what a pass record asks of the order, in order: count the leg that failed,
        then (when the status changed, the lease checked first) write the status, note the
        order's Ready state (``noted``), record the Events, and hand the order as written to
        ``written``.

        The error is counted before the status shows it, so the alert never lags the order.
        """
        failure = rec.failure
        if failure is not None:
            RECONCILE_ERRORS.labels(
                sub_reconciler=failure.leg, condition_type=failure.leg.condition_type
            ).inc()
        if not rec.write_status:
            return
        check()
        stored = self.write_status(key, fetched, rec.status, check)
        noted(key, stored)
        self.record_events(key, stored, rec.events)
        written(stored)

    def record_events(
        self, key: OrderKey, order: Mapping[str, Any], events: Iterable[Event]
    ) -> None:
        """Record Events on the order as stored; a failed write is logged, never raised."""
        client = self.clusters.get(key.cluster)
        for event in events:
            record_event(client, order, event.type.value, event.reason, event.message)

    def write_unreadable_status(
        self,
        key: OrderKey,
        raw: dict[str, Any],
        compute: Callable[[Mapping[str, Any]], Mapping[str, Any]],
        check: Callable[[], None],
    ) -> dict[str, Any]:
        """Patch the status of an order whose body does not parse, from the order as stored.

        ``compute`` turns the stored status into the patch (empty: nothing to write); the write
        is guarded by the resourceVersion ``raw`` was read at, as ``write_status`` is.
        """
        return self.clusters.get(key.cluster).write_status(MARIADB_DATABASE, raw, compute, check)

    def set_finalizers(
        self, key: OrderKey, fetched: FetchedOrder, finalizers: list[str]
    ) -> FetchedOrder:
        """Replace the order's finalizers; return the order as written.

        Raises:
            ConflictError: the order changed since it was read.
        """
        return FetchedOrder.of(
            self.clusters.get(key.cluster).set_finalizers(fetched.raw, finalizers)
        )


_RESOURCES = {
    (r.api_version, r.kind): r
    for r in (SECRET, DATABASE, EXTERNAL_SECRET, VAULT_DYNAMIC_SECRET, MARIADB_DATABASE)
}


def schema_holder(cluster: str, namespace: str, name: str, uid: str) -> str:
    """How a schema claim names the order that holds it: its place and its uid, so an order
    deleted and created again under the same name is another holder."""
    return f"{cluster}/{namespace}/{name}/{uid}"


def _client_certificate(secret: Secret) -> ClientCertificate:
    return ClientCertificate(
        ca_crt=secret.value("ca.crt").encode(),
        tls_crt=secret.value("tls.crt").encode(),
        tls_key=secret.value("tls.key").encode(),
    )


def _ref(cluster: str, resource: Resource, namespace: str, name: str) -> ObjectRef:
    return ObjectRef(cluster, resource.api_version, resource.kind, namespace, name)


def _resource(ref: ObjectRef) -> Resource:
    return _RESOURCES[(ref.api_version, ref.kind)]


def _get(
    client: KubeClient, resource: Resource, ns: str | None, name: str
) -> dict[str, Any] | None:
    try:
        return client.get(resource, ns, name)
    except (NotFoundError, KindNotServedError):
        return None


def _read(
    context: str, client: KubeClient, resource: Resource, ns: str | None, name: str
) -> dict[str, Any] | None:
    try:
        return _get(client, resource, ns, name)
    except KubeError as exc:
        raise ReadError(context, exc.server_message) from None


def _list(
    client: KubeClient, resource: Resource, ns: str, selector: str | None = None
) -> list[dict[str, Any]]:
    try:
        return client.list_objects(resource, ns, label_selector=selector)
    except KindNotServedError:
        return []


def _model(model: type[Model], raw: dict[str, Any] | None) -> Model | None:
    return None if raw is None else parse_object(model, raw, str(raw.get("kind") or model.__name__))


def parse_databases(raws: list[dict[str, Any]], own: str) -> tuple[DatabaseCR, ...]:
    """The Database CRs that parse. A foreign one that does not is passed over (mariadb-operator
    cannot serve it either), so it cannot stop every order of the namespace; the order's own
    child must parse."""
    parsed = []
    for raw in raws:
        try:
            parsed.append(parse_object(DatabaseCR, raw, "Database"))
        except UnreadableError as exc:
            if raw["metadata"]["name"] == own:
                raise
            log.warning("passing over a Database that does not parse: %s", exc)
    return tuple(parsed)
