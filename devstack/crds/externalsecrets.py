"""The External Secrets Operator CRDs the devstack serves.

Owns the schemas of ExternalSecret, SecretStore and ClusterSecretStore (`external-secrets.io/v1`)
and of the VaultDynamicSecret generator (`generators.external-secrets.io/v1alpha1`) for the fields
tenantdb and the stand-in controller use, with ESO's names, enums and defaults. Deliberately left
out: every provider but Vault (kept as unknown fields), the other generator kinds, PushSecret,
ClusterExternalSecret and the template engine's bodies (kept as unknown fields).
"""

from __future__ import annotations

from devstack.crds.schema import (
    Schema,
    array,
    boolean,
    conditions,
    crd,
    integer,
    name_ref,
    obj,
    string,
    string_map,
)

GROUP = "external-secrets.io"
VERSION = "v1"
GENERATORS_GROUP = "generators.external-secrets.io"
GENERATORS_VERSION = "v1alpha1"
GENERATOR_KINDS = (
    "ACRAccessToken",
    "ClusterGenerator",
    "ECRAuthorizationToken",
    "Fake",
    "GCRAccessToken",
    "GithubAccessToken",
    "QuayAccessToken",
    "Password",
    "SSHKey",
    "STSSessionToken",
    "UUID",
    "VaultDynamicSecret",
    "Webhook",
    "Grafana",
    "MFA",
)
_READY = '.status.conditions[?(@.type=="Ready")].status'


def vault_provider() -> Schema:
    """ESO's `VaultProvider` (Kubernetes auth, CA provider and client TLS modelled)."""
    secret_key_ref = name_ref("key", "namespace")
    return obj(
        {
            "server": string(),
            "path": string(),
            "version": string(enum=["v1", "v2"], default="v2"),
            "namespace": string(),
            "caBundle": string(format="byte"),
            "caProvider": obj(
                {
                    "type": string(enum=["Secret", "ConfigMap"]),
                    "name": string(),
                    "key": string(),
                    "namespace": string(),
                },
                required=("type", "name"),
            ),
            "auth": obj(
                {
                    "kubernetes": obj(
                        {
                            "mountPath": string(default="kubernetes"),
                            "role": string(),
                            "serviceAccountRef": obj(
                                {
                                    "name": string(),
                                    "namespace": string(),
                                    "audiences": array(string()),
                                },
                                required=("name",),
                            ),
                            "secretRef": secret_key_ref,
                        },
                        required=("mountPath", "role"),
                    ),
                    "tokenSecretRef": secret_key_ref,
                    "appRole": obj(preserve=True),
                    "cert": obj(preserve=True),
                    "jwt": obj(preserve=True),
                    "ldap": obj(preserve=True),
                    "userPass": obj(preserve=True),
                    "iam": obj(preserve=True),
                }
            ),
            "tls": obj({"certSecretRef": secret_key_ref, "keySecretRef": secret_key_ref}),
            "readYourWrites": boolean(),
            "forwardInconsistent": boolean(),
            "headers": string_map(),
        },
        required=("server",),
    )


def _store(kind: str, plural: str, *, namespaced: bool) -> Schema:
    return crd(
        group=GROUP,
        kind=kind,
        plural=plural,
        version=VERSION,
        namespaced=namespaced,
        short_names=("ss",) if namespaced else ("css",),
        categories=("external-secrets",),
        spec=obj(
            {
                "provider": obj({"vault": vault_provider()}, preserve=True),
                "controller": string(),
                "refreshInterval": integer(),
                "retrySettings": obj({"maxRetries": integer(), "retryInterval": string()}),
                "conditions": array(obj(preserve=True)),
            },
            required=("provider",),
        ),
        status=obj(
            {"conditions": conditions(), "capabilities": string()},
        ),
        columns=(
            ("Status", "string", '.status.conditions[?(@.type=="Ready")].reason'),
            ("Capabilities", "string", ".status.capabilities"),
            ("Ready", "string", _READY),
        ),
    )


def secret_store() -> Schema:
    """The namespaced SecretStore CRD."""
    return _store("SecretStore", "secretstores", namespaced=True)


def cluster_secret_store() -> Schema:
    """The ClusterSecretStore CRD."""
    return _store("ClusterSecretStore", "clustersecretstores", namespaced=False)


def _data_from() -> Schema:
    return obj(
        {
            "extract": obj(preserve=True),
            "find": obj(preserve=True),
            "rewrite": array(obj(preserve=True)),
            "sourceRef": obj(
                {
                    "storeRef": obj(
                        {
                            "name": string(),
                            "kind": string(enum=["SecretStore", "ClusterSecretStore"]),
                        }
                    ),
                    "generatorRef": obj(
                        {
                            "apiVersion": string(
                                default=f"{GENERATORS_GROUP}/{GENERATORS_VERSION}"
                            ),
                            "kind": string(enum=list(GENERATOR_KINDS)),
                            "name": string(),
                        },
                        required=("kind", "name"),
                    ),
                }
            ),
        }
    )


def external_secret() -> Schema:
    """The ExternalSecret CRD."""
    return crd(
        group=GROUP,
        kind="ExternalSecret",
        plural="externalsecrets",
        version=VERSION,
        short_names=("es",),
        categories=("external-secrets",),
        spec=obj(
            {
                "secretStoreRef": obj(
                    {
                        "name": string(),
                        "kind": string(enum=["SecretStore", "ClusterSecretStore"]),
                    }
                ),
                "target": obj(
                    {
                        "name": string(),
                        "creationPolicy": string(
                            enum=["Owner", "Orphan", "Merge", "None"], default="Owner"
                        ),
                        "deletionPolicy": string(
                            enum=["Delete", "Merge", "Retain"], default="Retain"
                        ),
                        "immutable": boolean(),
                        "template": obj(
                            {
                                "type": string(),
                                "engineVersion": string(enum=["v1", "v2"], default="v2"),
                                "mergePolicy": string(enum=["Replace", "Merge"], default="Replace"),
                                "metadata": obj(
                                    {"annotations": string_map(), "labels": string_map()}
                                ),
                                "data": string_map(),
                                "templateFrom": array(obj(preserve=True)),
                            }
                        ),
                    },
                    default={"creationPolicy": "Owner", "deletionPolicy": "Retain"},
                ),
                "refreshInterval": string(default="1h0m0s"),
                "refreshPolicy": string(enum=["CreatedOnce", "Periodic", "OnChange"]),
                "data": array(obj(preserve=True)),
                "dataFrom": array(_data_from()),
            }
        ),
        status=obj(
            {
                "refreshTime": string(format="date-time", nullable=True),
                "syncedResourceVersion": string(),
                "conditions": array(
                    obj(
                        {
                            "type": string(),
                            "status": string(),
                            "reason": string(),
                            "message": string(),
                            "lastTransitionTime": string(format="date-time"),
                        },
                        required=("type", "status"),
                    )
                ),
                "binding": obj({"name": string()}),
            }
        ),
        columns=(
            ("Store", "string", ".spec.secretStoreRef.name"),
            ("Refresh Interval", "string", ".spec.refreshInterval"),
            ("Status", "string", '.status.conditions[?(@.type=="Ready")].reason'),
            ("Ready", "string", _READY),
        ),
    )


def vault_dynamic_secret() -> Schema:
    """The VaultDynamicSecret generator CRD."""
    return crd(
        group=GENERATORS_GROUP,
        kind="VaultDynamicSecret",
        plural="vaultdynamicsecrets",
        version=GENERATORS_VERSION,
        categories=("external-secrets", "external-secrets-generators"),
        spec=obj(
            {
                "controller": string(),
                "path": string(),
                "method": string(),
                "parameters": obj(preserve=True),
                "getParameters": {
                    "type": "object",
                    "additionalProperties": array(string()),
                },
                "resultType": string(enum=["Data", "Auth", "Raw"], default="Data"),
                "allowEmptyResponse": boolean(default=False),
                "retrySettings": obj({"maxRetries": integer(), "retryInterval": string()}),
                "provider": vault_provider(),
            },
            required=("path", "provider"),
        ),
        status=obj(preserve=True),
    )


CRDS = (external_secret, secret_store, cluster_secret_store, vault_dynamic_secret)
