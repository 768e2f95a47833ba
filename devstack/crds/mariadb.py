"""The mariadb-operator CRDs the devstack serves: MariaDB and Database (`k8s.mariadb.com/v1alpha1`).

Owns their schemas for the fields tenantdb and the stand-in controller use, with the operator's
names, defaults and printer columns. Deliberately left out: every other SQL kind (User, Grant,
Connection, Backup, …), the operator's validating webhook (its immutability of `mariaDbRef`,
`characterSet`, `collate` and `name` is not enforced), and the MariaDB spec beyond the root
password and port (the rest is kept as unknown fields).
"""

from __future__ import annotations

from devstack.crds.schema import Schema, boolean, conditions, crd, integer, obj, string

GROUP = "k8s.mariadb.com"
VERSION = "v1alpha1"
_READY = '.status.conditions[?(@.type=="Ready")].status'
_MESSAGE = '.status.conditions[?(@.type=="Ready")].message'


def mariadb() -> Schema:
    """The MariaDB CRD."""
    return crd(
        group=GROUP,
        kind="MariaDB",
        plural="mariadbs",
        version=VERSION,
        short_names=("mdb",),
        spec=obj(
            {
                "rootPasswordSecretKeyRef": obj(
                    {"name": string(), "key": string(), "generate": boolean()}
                ),
                "port": integer(format="int32", default=3306),
                "image": string(),
                "replicas": integer(format="int32", default=1),
            },
            preserve=True,
        ),
        status=obj(
            {
                "conditions": conditions(),
                "currentPrimary": string(),
                "replicas": integer(format="int32"),
            },
            preserve=True,
        ),
        columns=(
            ("Ready", "string", _READY),
            ("Status", "string", _MESSAGE),
            ("Primary", "string", ".status.currentPrimary"),
        ),
    )


def database() -> Schema:
    """The Database CRD."""
    return crd(
        group=GROUP,
        kind="Database",
        plural="databases",
        version=VERSION,
        short_names=("dmdb",),
        spec=obj(
            {
                "mariaDbRef": obj(
                    {
                        "name": string(),
                        "namespace": string(),
                        "kind": string(),
                        "waitForIt": boolean(default=True),
                    }
                ),
                "characterSet": string(default="utf8"),
                "collate": string(default="utf8_general_ci"),
                "name": string(maxLength=80),
                "requeueInterval": string(),
                "retryInterval": string(),
                "cleanupPolicy": string(enum=["Skip", "Delete"]),
            },
            required=("mariaDbRef",),
        ),
        status=obj({"conditions": conditions()}),
        columns=(
            ("Ready", "string", _READY),
            ("Status", "string", _MESSAGE),
            ("CharSet", "string", ".spec.characterSet"),
            ("Collate", "string", ".spec.collate"),
            ("MariaDB", "string", ".spec.mariaDbRef.name"),
            ("Name", "string", ".spec.name"),
        ),
    )


CRDS = (mariadb, database)
