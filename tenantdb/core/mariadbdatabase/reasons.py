"""Condition types, condition reasons and the exact condition messages of a MariaDBDatabase.

This is the one home for every string a user reads in `status.conditions`: the types and
reasons are spelled as the MariaDBDatabase API spells them, and each message builder returns
the reference text word for word, so a user moving from the reference reconciler sees the same
status. It must never decide anything: callers pick the reason, this module only words it.
"""

from __future__ import annotations

from enum import StrEnum

MAX_NAME_LENGTH = 63
"""The longest value a Kubernetes label carries; cluster and order names end up in labels."""

BOOTSTRAP_HINT = (
    "the operator's OpenBao login or policy is missing; re-run "
    "deploy/openbao/bootstrap/setup-auth.sh, setup-policies.sh and setup-database-tenant.sh: "
)
"""Prefix of an OpenBaoError message when OpenBao answered 403."""


class ConditionType(StrEnum):
    """The condition types a MariaDBDatabase carries."""

    DATABASE_READY = "DatabaseReady"
    DELIVERY_READY = "DeliveryReady"
    READY = "Ready"


class Reason(StrEnum):
    """Every reason a MariaDBDatabase condition can carry."""

    # Written on both DatabaseReady and DeliveryReady by the admission gates.
    CLUSTER_NAME_TOO_LONG = "ClusterNameTooLong"
    CONTROL_PLANE_NOT_FOUND = "ControlPlaneNotFound"
    NAMESPACE_NOT_ASSIGNED = "NamespaceNotAssigned"
    DYNAMIC_CREDENTIALS_UNAVAILABLE = "DynamicCredentialsUnavailable"
    WAITING_FOR_DB_CREDENTIALS = "WaitingForDBCredentials"
    # DatabaseReady.
    TARGET_CLUSTER_UNAVAILABLE = "TargetClusterUnavailable"
    CLUSTER_NOT_READY = "ClusterNotReady"
    DATABASE_NAME_INVALID = "DatabaseNameInvalid"
    DATABASE_NAME_RESERVED = "DatabaseNameReserved"
    DATABASE_COLLISION = "DatabaseCollision"
    WAITING_FOR_CLIENT_CERTIFICATE = "WaitingForClientCertificate"
    OPENBAO_ERROR = "OpenBaoError"
    WAITING_FOR_DATABASE = "WaitingForDatabase"
    WAITING_FOR_CREDENTIALS = "WaitingForCredentials"
    DATABASE_PROVISIONED = "DatabaseProvisioned"
    # Written on both by tenantdb (the reference has no such reason: it retries without one).
    DEPENDENCY_UNREADABLE = "DependencyUnreadable"
    ORDER_UNREADABLE = "OrderUnreadable"
    # DeliveryReady.
    DATABASE_NOT_PUBLISHED = "DatabaseNotPublished"
    WAITING_FOR_CA_BUNDLE = "WaitingForCABundle"
    DELIVERY_REFUSED = "DeliveryRefused"
    DELIVERY_ERROR = "DeliveryError"
    DELIVERED = "Delivered"
    # Ready.
    ALL_READY = "AllReady"
    NOT_ALL_READY = "NotAllReady"


ALL_READY_MESSAGE = "All sub-conditions are ready"
NOT_ALL_READY_MESSAGE = "One or more sub-conditions are not ready"
NOT_PROVISIONED_MESSAGE = "the database is not provisioned yet; nothing is delivered"
NOT_CURRENT_MESSAGE = "the delivered Secret does not carry the current credential yet"


_NEWER_VERSION = "(an object of a newer API version than tenantdb reads needs a newer tenantdb)"


def msg_dependency_unreadable(what: str, detail: str) -> str:
    """Word DependencyUnreadable: an object the order depends on does not parse (tenantdb's)."""
    return f"{what} cannot be read: {detail}; the order goes on once it is fixed {_NEWER_VERSION}"


def msg_deletion_unreadable(what: str, detail: str) -> str:
    """Word DependencyUnreadable on a deleting order: its teardown waits for the object."""
    return (
        f"{what} cannot be read: {detail}; the deletion waits until it is fixed, and nothing is "
        f"removed meanwhile {_NEWER_VERSION}"
    )


def msg_order_unreadable(detail: str, *, deleting: bool) -> str:
    """Word OrderUnreadable: the order's own body does not parse (tenantdb's)."""
    then = (
        "its deletion waits until it is fixed, and nothing is removed meanwhile"
        if deleting
        else "nothing is done for it until it is fixed"
    )
    return f"the MariaDBDatabase cannot be read: {detail}; {then} {_NEWER_VERSION}"


def describe_location(cluster: str) -> str:
    """Name the cluster an order lives on the way every message names it."""
    return "the management cluster" if cluster == "" else f'target cluster "{cluster}"'


def msg_cluster_name_too_long(cluster: str) -> str:
    """Word ClusterNameTooLong (the reference text is not published; this wording is ours)."""
    return (
        f'the order lives on target cluster "{cluster}", whose name is longer than the '
        f"{MAX_NAME_LENGTH} characters a label value carries; register the cluster under a "
        "shorter name"
    )


def msg_control_plane_not_found(cp_namespace: str, cp_name: str) -> str:
    """Word ControlPlaneNotFound."""
    return f"ControlPlane {cp_namespace}/{cp_name} not found; the order is deferred until it exists"


def msg_namespace_not_assigned(
    cp_namespace: str, cp_name: str, order_namespace: str, cluster: str
) -> str:
    """Word NamespaceNotAssigned (also used when a target-cluster order names no ControlPlane)."""
    return (
        f'ControlPlane {cp_namespace}/{cp_name} assigns no namespace "{order_namespace}" on '
        f"{describe_location(cluster)} (spec.namespaceAssignments); the order is frozen: nothing "
        "is provisioned, delivered or repaired, and what was created stays"
    )


def msg_dynamic_credentials_unavailable(cp_namespace: str, cp_name: str) -> str:
    """Word DynamicCredentialsUnavailable."""
    return (
        f"ControlPlane {cp_namespace}/{cp_name} does not issue dynamic credentials for its shared "
        "database (External mode, a brownfield database, a dedicated Keystone database or "
        "credentialsMode Static); a MariaDBDatabase order needs the OpenBao database engine, "
        "which issues against a managed shared database in Dynamic mode"
    )


def msg_waiting_for_db_credentials(cp_namespace: str, cp_name: str) -> str:
    """Word WaitingForDBCredentials."""
    return (
        f"ControlPlane {cp_namespace}/{cp_name} reports DBCredentialsReady is not True; the "
        "OpenBao database engine is not onboarded for its database yet "
        "(deploy/openbao/bootstrap/setup-database-tenant.sh)"
    )


def msg_cluster_not_ready(cluster_ref: str, keystone_namespace: str) -> str:
    """Word ClusterNotReady."""
    return f'MariaDB cluster "{cluster_ref}" in namespace "{keystone_namespace}" is not ready'


def msg_database_name_invalid(name: str) -> str:
    """Word DatabaseNameInvalid."""
    return (
        f'database name "{name}" is not a MySQL identifier of 1 to 64 characters from '
        "[A-Za-z0-9_]; delete and re-create the order with another databaseName"
    )


def msg_database_name_reserved(name: str) -> str:
    """Word DatabaseNameReserved."""
    return (
        f'database name "{name}" is a MariaDB system schema; delete and re-create the order '
        "with another databaseName"
    )


def msg_database_collision(name: str) -> str:
    """Word DatabaseCollision; it names the schema only, never the other Database CR."""
    return (
        f'database "{name}" is already in use on the ControlPlane\'s shared MariaDB; the order '
        "never takes over a database it did not create; delete and re-create the order with "
        "another databaseName"
    )


def msg_adoption_refused(kind: str, namespace: str, name: str) -> str:
    """Word the refusal to take over a live child of the order's name that it did not create."""
    return (
        f"refusing to adopt pre-existing {kind} {namespace}/{name}: "
        "it was not created by this order"
    )


def msg_waiting_for_client_certificate(cp_namespace: str, secret_name: str) -> str:
    """Word WaitingForClientCertificate."""
    return f"the OpenBao client certificate {cp_namespace}/{secret_name} is not issued yet"


def msg_openbao_error(error: str, *, permission_denied: bool) -> str:
    """Word OpenBaoError: OpenBao's error, with the bootstrap hint in front of a 403."""
    return f"{BOOTSTRAP_HINT}{error}" if permission_denied else error


def msg_login_ttl_too_short(
    auth_mount: str, auth_role: str, login_ttl: int, refresh_seconds: int, max_ttl: int
) -> str:
    """Word OpenBaoError when every credential ESO reads would die before its refresh."""
    return (
        f"OpenBao's auth role {auth_mount}/role/{auth_role} gives ESO's login tokens"
        f" {login_ttl}s, and a credential is revoked with the token that read it: it would"
        f" die before ESO replaces it every {refresh_seconds}s; raise the role's token_ttl"
        f" and token_max_ttl to at least the database role's max_ttl ({max_ttl}s)"
    )


def msg_waiting_for_database(keystone_namespace: str, cr_name: str) -> str:
    """Word WaitingForDatabase."""
    return f"MariaDB Database {keystone_namespace}/{cr_name} is not ready"


def msg_waiting_for_external_secret(creds_path: str, cp_namespace: str, es_name: str) -> str:
    """Word WaitingForCredentials while ESO has not issued a credential."""
    return (
        f'ESO has not issued a credential from OpenBao path "{creds_path}" yet '
        f"(ExternalSecret {cp_namespace}/{es_name})"
    )


def msg_waiting_for_engine_username(cp_namespace: str, secret_name: str) -> str:
    """Word WaitingForCredentials while the materialised Secret lacks an engine-issued user."""
    return (
        f"the materialised credential {cp_namespace}/{secret_name} does not carry an "
        "engine-issued username yet"
    )


def msg_database_provisioned(
    name: str, keystone_namespace: str, cluster_ref: str, role_name: str
) -> str:
    """Word DatabaseProvisioned."""
    return (
        f'database "{name}" on MariaDB {keystone_namespace}/{cluster_ref} is provisioned; '
        f'OpenBao role "{role_name}" issues its users'
    )


def msg_database_not_published(
    cluster: str, in_cluster_address: str, cp_namespace: str, cp_name: str
) -> str:
    """Word DatabaseNotPublished."""
    return (
        f"the order lives on {describe_location(cluster)}, which cannot reach the in-cluster "
        f"MariaDB Service {in_cluster_address}; set spec.infrastructure.publishedDatabaseEndpoint "
        f"on ControlPlane {cp_namespace}/{cp_name}"
    )


def msg_endpoint_invalid(endpoint: str, error: str) -> str:
    """Word DeliveryError for an endpoint that is not host:port."""
    return f'spec.infrastructure.publishedDatabaseEndpoint "{endpoint}" is not host:port: {error}'


def msg_waiting_for_ca_bundle(namespace: str, secret_name: str) -> str:
    """Word WaitingForCABundle."""
    return f"the database CA bundle Secret {namespace}/{secret_name} does not carry ca.crt yet"


def msg_waiting_for_materialised_credential(cp_namespace: str, secret_name: str) -> str:
    """Word DeliveryReady WaitingForCredentials while the ESO Secret lacks a user or password."""
    return (
        f"the materialised credential {cp_namespace}/{secret_name} does not carry a username "
        "and a password yet"
    )


def msg_delivery_refused(namespace: str, secret_name: str) -> str:
    """Word DeliveryRefused."""
    return (
        f"Secret {namespace}/{secret_name} exists and is not owned by this order; delete it or "
        "rename the order"
    )


def msg_delivered(secret_name: str, keys: tuple[str, ...], namespace: str, cluster: str) -> str:
    """Word Delivered."""
    return (
        f'credentials are delivered in Secret "{secret_name}" (keys {", ".join(keys)}) in '
        f'namespace "{namespace}" on {describe_location(cluster)}'
    )
