"""Names, labels and ownership marks of a MariaDBDatabase's children.

Owns the per-order child prefix (`<name>-<8 hex of sha256(cluster/namespace/name)>-database-`),
every child name derived from it, the OpenBao role name, the three ownership labels, the
finalizer, and the two tests "is this my child?" and "may I sweep it?". It must never read or
write an object: callers hand it names and metadata.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from tenantdb.core.keys import MANAGEMENT_CLUSTER as MANAGEMENT_CLUSTER
from tenantdb.core.kinds import KindIdentity
from tenantdb.core.objects import ObjectMeta

IDENTITY = KindIdentity(
    group="c5c3.io",
    version="v1alpha1",
    kind="MariaDBDatabase",
    plural="mariadbdatabases",
    finalizer="c5c3.io/mariadbdatabase-teardown",
    label_name="c5c3.io/mariadbdatabase-name",
    label_namespace="c5c3.io/mariadbdatabase-namespace",
    label_cluster="c5c3.io/mariadbdatabase-cluster",
    short_names=("mdbd",),
)
"""The MariaDBDatabase kind; the names below are read off it."""

GROUP = IDENTITY.group
VERSION = IDENTITY.version
API_VERSION = IDENTITY.api_version
KIND = IDENTITY.kind
LIST_KIND = IDENTITY.list_kind
PLURAL = IDENTITY.plural
SINGULAR = IDENTITY.singular

LABEL_NAME = IDENTITY.label_name
LABEL_NAMESPACE = IDENTITY.label_namespace
LABEL_CLUSTER = IDENTITY.label_cluster
FINALIZER = IDENTITY.finalizer

CHILD_SEGMENT = "database"
SHARED_SERVICE_ACCOUNT = "order-db-creds"
CLIENT_CERTIFICATE = "order-db-openbao-client"
"""The cert-manager Certificate and the Secret it fills, shared by every order of a namespace."""

ROLE_MOUNT = "database/mariadb"
DATABASE_CR_FINALIZER = "database.k8s.mariadb.com/finalizer"


def compute_child_prefix(cluster: str, namespace: str, name: str) -> str:
    """Return `<name>-<8 hex>-database-`; the hash keeps orders on other clusters apart."""
    digest = hashlib.sha256(f"{cluster}/{namespace}/{name}".encode()).hexdigest()
    return f"{name}-{digest[:8]}-{CHILD_SEGMENT}-"


def compute_role_name(cp_namespace: str, prefix: str) -> str:
    """Return `order.<ControlPlane namespace>.<prefix without its trailing dash>`.

    Dots separate the parts because a namespace cannot hold one, so the generators' policy
    `order.<ns>.*` reaches the roles of exactly one namespace.
    """
    return f"order.{cp_namespace}.{prefix.removesuffix('-')}"


def compute_creds_path(role_name: str) -> str:
    """Return the OpenBao path the generator reads and the teardown revokes by prefix."""
    return f"{ROLE_MOUNT}/creds/{role_name}"


def compute_delivered_secret_name(order_name: str) -> str:
    """Return the name of the Secret delivered beside the order."""
    return f"{order_name}-credentials"


def compute_effective_database_name(database_name: str | None, order_name: str) -> str:
    """Return spec.databaseName, or metadata.name with every dash as an underscore."""
    return database_name if database_name else order_name.replace("-", "_")


@dataclass(frozen=True)
class OrderNames:
    """Every name one order's children carry."""

    prefix: str
    database_cr: str
    credentials: str
    role: str
    creds_path: str
    delivered_secret: str


def compute_order_names(cluster: str, namespace: str, name: str, cp_namespace: str) -> OrderNames:
    """Name every child of the order (cp_namespace is the resolved controlPlaneRef namespace)."""
    prefix = compute_child_prefix(cluster, namespace, name)
    role = compute_role_name(cp_namespace, prefix)
    return OrderNames(
        prefix=prefix,
        database_cr=f"{prefix}database",
        credentials=f"{prefix}credentials",
        role=role,
        creds_path=compute_creds_path(role),
        delivered_secret=compute_delivered_secret_name(name),
    )


def build_order_labels(cluster: str, namespace: str, name: str) -> dict[str, str]:
    """Return the three labels that mark a child living away from the order."""
    return {LABEL_NAME: name, LABEL_NAMESPACE: namespace, LABEL_CLUSTER: cluster}


def build_delivered_secret_labels(namespace: str, name: str) -> dict[str, str]:
    """Return the labels of the delivered Secret (it has an owner reference, so no cluster)."""
    return {LABEL_NAME: name, LABEL_NAMESPACE: namespace}


def build_label_selector(cluster: str, namespace: str, name: str) -> str:
    """Return the label selector that lists an order's labelled children."""
    labels = build_order_labels(cluster, namespace, name)
    return ",".join(f"{key}={value}" for key, value in labels.items())


def is_order_child(
    meta: ObjectMeta, *, order_uid: str, cluster: str, namespace: str, name: str
) -> bool:
    """Report whether an object was created by the order.

    True when the order is its controller, or when all three labels name the order; the
    cluster label must be present even when it is empty (the management cluster).
    """
    controller = meta.controller_reference()
    if controller is not None and order_uid and controller.uid == order_uid:
        return True
    return (
        LABEL_CLUSTER in meta.labels
        and meta.labels[LABEL_CLUSTER] == cluster
        and meta.labels.get(LABEL_NAME) == name
        and meta.labels.get(LABEL_NAMESPACE) == namespace
    )


def is_owned_order_child(
    meta: ObjectMeta, *, order_uid: str, cluster: str, namespace: str, name: str
) -> bool:
    """Report whether the order may sweep or reshape an object: its child, under its prefix."""
    return is_order_child(
        meta, order_uid=order_uid, cluster=cluster, namespace=namespace, name=name
    ) and meta.name.startswith(compute_child_prefix(cluster, namespace, name))
