"""The ControlPlane CRD (`c5c3.io/v1alpha1`) as far as a MariaDBDatabase depends on it.

Owns the schema of the ControlPlane fields tenantdb reads (namespace assignments, the shared
database, the published endpoint with its admission pattern, Keystone's placement, the secret
store reference) and its status conditions. Deliberately left out: the rest of the ControlPlane
API (kept as unknown fields, not validated) and its webhook rules (uniqueness of namespace and
cluster pairs, clusterRef XOR host).
"""

from __future__ import annotations

from devstack.crds.schema import Schema, array, boolean, conditions, crd, integer, obj, string

GROUP = "c5c3.io"
VERSION = "v1alpha1"
RFC1123_LABEL = "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
ENDPOINT_PATTERN = (
    r"^([a-zA-Z0-9._-]+|\[[0-9a-fA-F:.]+\]):"
    r"([1-9][0-9]{0,3}|[1-5][0-9]{4}|6[0-4][0-9]{3}|65[0-4][0-9]{2}|655[0-2][0-9]|6553[0-5])$"
)


def _name_ref() -> Schema:
    return obj({"name": string(minLength=1)}, required=("name",))


def _database() -> Schema:
    return obj(
        {
            "clusterRef": _name_ref(),
            "host": string(),
            "port": integer(format="int32", minimum=1, maximum=65535),
            "database": string(),
            "secretRef": _name_ref(),
            "credentialsMode": string(enum=["Static", "Dynamic"]),
            "tls": obj(
                {
                    "mode": string(
                        enum=["disabled", "prefer", "require", "verify-ca", "verify-full"]
                    ),
                    "caBundleSecretRef": _name_ref(),
                    "clientCertSecretRef": _name_ref(),
                }
            ),
        }
    )


def control_plane() -> Schema:
    """The ControlPlane CRD."""
    assignment = obj(
        {
            "namespace": string(minLength=1, maxLength=63, pattern=RFC1123_LABEL),
            "targetClusterRef": _name_ref(),
            "allowedRoles": array(string(), maxItems=16, **{"x-kubernetes-list-type": "set"}),
            "allowCatalogEntries": boolean(),
        },
        required=("namespace",),
    )
    spec = obj(
        {
            "namespaceAssignments": array(
                assignment, maxItems=32, **{"x-kubernetes-list-type": "atomic"}
            ),
            "infrastructure": obj(
                {
                    "database": _database(),
                    "publishedDatabaseEndpoint": string(maxLength=262, pattern=ENDPOINT_PATTERN),
                },
                preserve=True,
            ),
            "services": obj(
                {
                    "keystone": obj(
                        {
                            "mode": string(enum=["Managed", "External"]),
                            "namespace": obj({"name": string(), "lifecycle": string()}),
                            "targetClusterRef": _name_ref(),
                            "dedicatedBackingServices": obj({"database": _database()}),
                            "databaseCredentialsMode": string(enum=["Static", "Dynamic"]),
                        },
                        preserve=True,
                    )
                },
                preserve=True,
            ),
            "secretStoreRef": obj(
                {
                    "kind": string(enum=["SecretStore", "ClusterSecretStore"]),
                    "name": string(),
                }
            ),
        },
        preserve=True,
    )
    return crd(
        group=GROUP,
        kind="ControlPlane",
        plural="controlplanes",
        version=VERSION,
        short_names=("cp",),
        spec=spec,
        status=obj(
            {"conditions": conditions(), "observedGeneration": integer(format="int64")},
            preserve=True,
        ),
        columns=(("Ready", "string", '.status.conditions[?(@.type=="Ready")].status'),),
    )


CRDS = (control_plane,)
