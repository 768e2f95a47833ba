"""The mariadb-operator CRDs the devstack serves: MariaDB and Database (`k8s.mariadb.com/v1alpha1`).

Owns their schemas for the fields tenantdb and the stand-in controller use, with upstream
mariadb-operator's names, defaults, printer columns and short names. The operator's validating
webhook is left out; the immutability it gives a Database's `mariaDbRef` (as a whole),
`characterSet`, `collate` and `name` is kept by CEL transition rules with the webhook's message:
`self == oldSelf` on the first three (always set, the latter two by their defaults), and one on
the spec for `name`, which may be unset and must stay so. Deliberately left out as well: every
other SQL kind (User, Grant, Connection, Backup, …), ExternalMariaDB, and the MariaDB spec beyond
the root password and port (the rest is kept as unknown fields).
"""

from __future__ import annotations

from devstack.crds.schema import Schema, boolean, conditions, crd, integer, obj, string

GROUP = "k8s.mariadb.com"
VERSION = "v1alpha1"
_READY = '.status.conditions[?(@.type=="Ready")].status'
_MESSAGE = '.status.conditions[?(@.type=="Ready")].message'


_NAME_IMMUTABLE = {
    "rule": "(has(self.name) ? self.name : '') == (has(oldSelf.name) ? oldSelf.name : '')",
    "message": "'spec.name' field is immutable",
    "fieldPath": ".name",
}


def _immutable(node: Schema, field: str) -> Schema:
    """A Database spec field the operator's webhook keeps as it was created."""
    rule = {"rule": "self == oldSelf", "message": f"'spec.{field}' field is immutable"}
    return {**node, "x-kubernetes-validations": [rule]}


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
    spec = obj(
        {
            "mariaDbRef": _immutable(
                obj(
                    {
                        "name": string(),
                        "namespace": string(),
                        # MariaDB (also when unset) or ExternalMariaDB, as upstream: no enum.
                        "kind": string(),
                        "waitForIt": boolean(default=True),
                    }
                ),
                "mariaDbRef",
            ),
            "characterSet": _immutable(string(default="utf8"), "characterSet"),
            "collate": _immutable(string(default="utf8_general_ci"), "collate"),
            "name": string(maxLength=80),
            "requeueInterval": string(),
            "retryInterval": string(),
            "cleanupPolicy": string(enum=["Skip", "Delete"]),
        },
        required=("mariaDbRef",),
    )
    # `name` may be unset, and the webhook refuses setting or unsetting it too.
    spec["x-kubernetes-validations"] = [_NAME_IMMUTABLE]
    built = crd(
        group=GROUP,
        kind="Database",
        plural="databases",
        version=VERSION,
        short_names=("dmdb",),
        spec=spec,
        status=obj({"conditions": conditions()}),
        columns=(
            ("Ready", "string", _READY),
            ("Status", "string", _MESSAGE),
            ("CharSet", "string", ".spec.characterSet"),
            ("Collate", "string", ".spec.collate"),
            ("MariaDB", "string", ".spec.mariaDbRef.name"),
        ),
    )
    # Upstream prints the Name column after Age, which `crd` puts last.
    columns = built["spec"]["versions"][0]["additionalPrinterColumns"]
    columns.append({"name": "Name", "type": "string", "jsonPath": ".spec.name"})
    return built


CRDS = (mariadb, database)
