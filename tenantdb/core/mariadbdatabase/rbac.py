"""The Kubernetes access MariaDBDatabase needs, by role and place (``tenantdb.core.rbac``).

Written from the calls of ``tenantdb.adapters.mariadbdatabase`` (its registered resources), the
scaffold's order reads and writes, and the routes of ``watcher.mariadbdatabase``. ``make gen``
renders it into the chart's Role rules; a unit test fails while the chart is stale.
"""

from __future__ import annotations

from tenantdb.core.mariadbdatabase.naming import (
    CLIENT_CERTIFICATE,
    IDENTITY,
    SHARED_SERVICE_ACCOUNT,
)
from tenantdb.core.rbac import Grant, KindAccess, order_resource, patched_status, watched_orders

_ORDERS = order_resource(IDENTITY)
_GROUP = IDENTITY.group
_OWNER_REFERENCE = Grant(
    _GROUP,
    (order_resource(IDENTITY, "finalizers"),),
    ("update",),
    "the delivered Secret's blocking owner reference to the order.",
)

ACCESS = KindAccess(
    watcher=(
        watched_orders(IDENTITY),
        Grant(
            _GROUP,
            ("controlplanes",),
            ("list", "watch"),
            "which orders a ControlPlane serves, and the namespaces a target cluster is"
            " watched in.",
        ),
        Grant(
            "",
            ("secrets",),
            ("list", "watch"),
            "the delivered Secret (an edit or a deletion is repaired), the Secret ESO writes"
            " (a refresh is delivered) and the OpenBao client certificate (a renewal).",
        ),
        Grant(
            "external-secrets.io",
            ("externalsecrets",),
            ("list", "watch"),
            "the ExternalSecret of the credential in the ControlPlane namespace.",
        ),
        Grant(
            "generators.external-secrets.io",
            ("vaultdynamicsecrets",),
            ("list", "watch"),
            "the ESO generator of the credential in the ControlPlane namespace.",
        ),
        Grant(
            "k8s.mariadb.com",
            ("databases",),
            ("list", "watch"),
            "every Database CR beside the MariaDB, for the schema index of the collision guard.",
        ),
        Grant(
            "k8s.mariadb.com",
            ("mariadbs",),
            ("list", "watch"),
            "the MariaDB a pass reads for its Ready condition: a change wakes the orders on it.",
        ),
        Grant(
            "external-secrets.io",
            ("secretstores",),
            ("list", "watch"),
            "the store the OpenBao server and mount come from: a change wakes the orders whose"
            " ControlPlane names it.",
        ),
        Grant(
            "external-secrets.io",
            ("clustersecretstores",),
            ("list", "watch"),
            "the cluster store the OpenBao server and mount come from: a change wakes the orders"
            " whose ControlPlane names it.",
            cluster_scoped=True,
        ),
        Grant(
            "",
            ("serviceaccounts",),
            ("list", "watch"),
            "the shared ServiceAccount of a ControlPlane namespace: an edit or a deletion wakes"
            " the orders there, which apply it.",
            resource_names=(SHARED_SERVICE_ACCOUNT,),
        ),
        Grant(
            "cert-manager.io",
            ("certificates",),
            ("list", "watch"),
            "the shared OpenBao client Certificate of a ControlPlane namespace: an edit or a"
            " deletion wakes the orders there, which apply it.",
            resource_names=(CLIENT_CERTIFICATE,),
        ),
    ),
    worker=(
        Grant(
            _GROUP,
            (_ORDERS,),
            ("get", "list", "patch"),
            "the order is read at the start of a pass and its finalizer set and dropped by"
            " patch; the ops shell (`tenantdb status`) lists the orders.",
        ),
        patched_status(IDENTITY),
        _OWNER_REFERENCE,
        Grant(_GROUP, ("controlplanes",), ("get",), "provision reads the order's ControlPlane."),
        Grant("k8s.mariadb.com", ("mariadbs",), ("get",), "provision reads the MariaDB."),
        Grant(
            "external-secrets.io",
            ("secretstores",),
            ("get",),
            "the ControlPlane's secret store names the OpenBao server.",
        ),
        Grant(
            "external-secrets.io",
            ("clustersecretstores",),
            ("get",),
            "the ControlPlane's cluster secret store names the OpenBao server.",
            cluster_scoped=True,
        ),
        Grant(
            "k8s.mariadb.com",
            ("databases",),
            ("get", "list", "create", "patch", "delete"),
            "the Database CR is applied in provision (server-side apply creates it), its cleanup"
            " policy patched and it is deleted in teardown; the list is the guard against two"
            " orders claiming one database name.",
        ),
        Grant(
            "external-secrets.io",
            ("externalsecrets",),
            ("get", "list", "create", "patch", "delete"),
            "the ExternalSecret of the credential: applied in provision, listed by its order"
            " labels and deleted in teardown.",
        ),
        Grant(
            "generators.external-secrets.io",
            ("vaultdynamicsecrets",),
            ("get", "list", "create", "patch", "delete"),
            "the ESO generator of the credential: applied in provision, listed by its order"
            " labels and deleted in teardown.",
        ),
        Grant(
            "cert-manager.io",
            ("certificates",),
            ("get", "create", "patch"),
            "the shared OpenBao client certificate of a ControlPlane namespace, applied.",
        ),
        Grant(
            "",
            ("serviceaccounts",),
            ("create",),
            "the shared ServiceAccount ESO's generator logs in as (the admission policy lets"
            " the worker create no other).",
        ),
        Grant(
            "",
            ("serviceaccounts",),
            ("get", "patch"),
            "the shared ServiceAccount, read and applied.",
            resource_names=(SHARED_SERVICE_ACCOUNT,),
        ),
        Grant(
            "",
            ("secrets",),
            ("get", "create", "patch", "delete"),
            "the client certificate, ESO's credential and the CA bundle are read; the delivered"
            " Secret is applied and deleted (only Opaque ones, by the admission policy).",
        ),
    ),
    target_assigned=(
        Grant(
            _GROUP,
            (_ORDERS,),
            ("get", "list", "watch", "patch"),
            "the orders of the namespace are watched, read at the start of a pass, and their"
            " finalizer set and dropped by patch.",
        ),
        patched_status(IDENTITY),
        _OWNER_REFERENCE,
        Grant(
            "",
            ("secrets",),
            ("get", "list", "watch", "create", "patch", "delete"),
            "the delivered Secret is watched, read, applied (server-side apply creates it) and"
            " deleted.",
        ),
    ),
    target_placed=(
        Grant(
            "k8s.mariadb.com",
            ("databases",),
            ("get", "list", "watch", "create", "patch", "delete"),
            "Keystone's Database CRs: every one is watched for the schema index of the"
            " collision guard; the order's is applied in provision (server-side apply creates"
            " it), its cleanup policy patched and it is deleted in teardown.",
        ),
        Grant(
            "k8s.mariadb.com",
            ("mariadbs",),
            ("get", "list", "watch"),
            "provision reads the MariaDB; the watcher watches it, so that a change wakes the"
            " orders on it.",
        ),
        Grant(
            "",
            ("secrets",),
            ("get",),
            "delivery reads the database's CA bundle beside Keystone.",
        ),
    ),
)
"""What MariaDBDatabase needs of the management cluster and of a target cluster."""
