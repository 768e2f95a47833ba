"""Desired child objects of a MariaDBDatabase, built as plain API dicts.

Owns one pure builder per child: the shared ServiceAccount and cert-manager Certificate, the
mariadb-operator Database CR (cleanupPolicy from deletionPolicy), the ESO VaultDynamicSecret
and ExternalSecret, and the Secret delivered beside the order (keys in contract order, ca.crt
only under TLS). The OpenBao role body lives in `openbao`. Builders never read live objects
and never carry creationTimestamp, resourceVersion, managedFields or status.
"""

from __future__ import annotations

import base64
from typing import Any

from tenantdb.core.mariadbdatabase.models import DeletionPolicy, MariaDBDatabase
from tenantdb.core.mariadbdatabase.naming import (
    API_VERSION,
    CLIENT_CERTIFICATE,
    KIND,
    SHARED_SERVICE_ACCOUNT,
    build_delivered_secret_labels,
)
from tenantdb.core.mariadbdatabase.openbao import GENERATOR_AUTH_ROLE, OpenBaoConnection

DATABASE_API_VERSION = "k8s.mariadb.com/v1alpha1"
GENERATOR_API_VERSION = "generators.external-secrets.io/v1alpha1"
ESO_API_VERSION = "external-secrets.io/v1"
CERTIFICATE_API_VERSION = "cert-manager.io/v1"
CLEANUP_SKIP = "Skip"
CLEANUP_DELETE = "Delete"
REFRESH_INTERVAL = "24h"
REFRESH_SECONDS = 24 * 3600
"""`REFRESH_INTERVAL` in seconds: how long each credential ESO reads must stay valid."""
CLIENT_CERT_ISSUER = "openbao-ca-issuer"
SECRET_KEYS = ("host", "port", "database", "username", "password")
CA_KEY = "ca.crt"


def compute_cleanup_policy(policy: DeletionPolicy | str | None) -> str:
    """Return the Database CR cleanupPolicy a deletionPolicy selects (Delete, else Skip)."""
    return CLEANUP_DELETE if policy == DeletionPolicy.DELETE else CLEANUP_SKIP


def build_service_account(cp_namespace: str) -> dict[str, Any]:
    """Build the ServiceAccount the generators present to OpenBao (shared, unlabelled)."""
    return {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": SHARED_SERVICE_ACCOUNT, "namespace": cp_namespace},
    }


def build_client_certificate(cp_namespace: str) -> dict[str, Any]:
    """Build the cert-manager Certificate whose keypair every OpenBao client here presents."""
    return {
        "apiVersion": CERTIFICATE_API_VERSION,
        "kind": "Certificate",
        "metadata": {"name": CLIENT_CERTIFICATE, "namespace": cp_namespace},
        "spec": {
            "secretName": CLIENT_CERTIFICATE,
            "duration": "8760h",
            "renewBefore": "720h",
            "usages": ["client auth"],
            "commonName": f"{CLIENT_CERTIFICATE}.{cp_namespace}.svc",
            "issuerRef": {"name": CLIENT_CERT_ISSUER, "kind": "ClusterIssuer"},
        },
    }


def build_database_cr(
    *,
    name: str,
    keystone_namespace: str,
    cluster_ref: str,
    schema: str,
    deletion_policy: DeletionPolicy,
    labels: dict[str, str],
) -> dict[str, Any]:
    """Build the mariadb-operator Database beside the MariaDB, in Keystone's namespace."""
    return {
        "apiVersion": DATABASE_API_VERSION,
        "kind": "Database",
        "metadata": {"name": name, "namespace": keystone_namespace, "labels": dict(labels)},
        "spec": {
            "mariaDbRef": {"name": cluster_ref, "waitForIt": True},
            "characterSet": "utf8",
            "collate": "utf8_general_ci",
            "name": schema,
            "cleanupPolicy": compute_cleanup_policy(deletion_policy),
        },
    }


def build_cleanup_policy_patch(deletion_policy: DeletionPolicy) -> dict[str, Any]:
    """Build the merge patch the teardown sends before it deletes a Database CR."""
    return {"spec": {"cleanupPolicy": compute_cleanup_policy(deletion_policy)}}


def build_vault_dynamic_secret(
    *,
    name: str,
    cp_namespace: str,
    creds_path: str,
    connection: OpenBaoConnection,
    labels: dict[str, str],
) -> dict[str, Any]:
    """Build the ESO generator that reads the order's role as the order-db auth role."""
    return {
        "apiVersion": GENERATOR_API_VERSION,
        "kind": "VaultDynamicSecret",
        "metadata": {"name": name, "namespace": cp_namespace, "labels": dict(labels)},
        "spec": {
            "path": creds_path,
            "method": "GET",
            "provider": {
                "server": connection.server,
                "version": "v2",
                "auth": {
                    "kubernetes": {
                        "mountPath": connection.auth_mount,
                        "role": GENERATOR_AUTH_ROLE,
                        "serviceAccountRef": {"name": SHARED_SERVICE_ACCOUNT},
                    }
                },
                "caProvider": {"type": "Secret", "name": CLIENT_CERTIFICATE, "key": CA_KEY},
                "tls": {
                    "certSecretRef": {"name": CLIENT_CERTIFICATE},
                    "keySecretRef": {"name": CLIENT_CERTIFICATE},
                },
            },
        },
    }


def build_external_secret(
    *, name: str, cp_namespace: str, labels: dict[str, str]
) -> dict[str, Any]:
    """Build the ExternalSecret that refreshes the credential daily and labels its Secret."""
    return {
        "apiVersion": ESO_API_VERSION,
        "kind": "ExternalSecret",
        "metadata": {"name": name, "namespace": cp_namespace, "labels": dict(labels)},
        "spec": {
            "refreshInterval": REFRESH_INTERVAL,
            "target": {
                "name": name,
                "creationPolicy": "Owner",
                "template": {"metadata": {"labels": dict(labels)}},
            },
            "dataFrom": [
                {
                    "sourceRef": {
                        "generatorRef": {
                            "apiVersion": GENERATOR_API_VERSION,
                            "kind": "VaultDynamicSecret",
                            "name": name,
                        }
                    }
                }
            ],
        },
    }


def compute_secret_keys(tls: bool) -> tuple[str, ...]:
    """Return the delivered keys in contract order; ca.crt only under TLS."""
    return (*SECRET_KEYS, CA_KEY) if tls else SECRET_KEYS


def _b64(value: str) -> str:
    return base64.b64encode(value.encode()).decode("ascii")


def build_delivered_secret(
    order: MariaDBDatabase,
    *,
    secret_name: str,
    values: dict[str, str],
    ca_crt: str | None,
) -> dict[str, Any]:
    """Build the Opaque Secret beside the order, controlled by it.

    `values` carries host, port, database, username and password; `ca_crt` is None without
    TLS, so a ca.crt written earlier is dropped by the apply.
    """
    data = {key: _b64(values[key]) for key in SECRET_KEYS}
    if ca_crt is not None:
        data[CA_KEY] = _b64(ca_crt)
    meta = order.metadata
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": secret_name,
            "namespace": meta.namespace,
            "labels": build_delivered_secret_labels(meta.namespace, meta.name),
            "ownerReferences": [
                {
                    "apiVersion": API_VERSION,
                    "kind": KIND,
                    "name": meta.name,
                    "uid": meta.uid,
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "type": "Opaque",
        "data": data,
    }
