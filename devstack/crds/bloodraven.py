"""The Bloodraven CRD the devstack serves: MysqlFailoverGroup (`shipstream.io/v1alpha1`).

Owns its schema for the fields tenantdb and the devstack's failover controller use, with
Bloodraven's names, enums and defaults: `spec.sites` (unique names, at least two
primary-candidate sites, checked with CEL), the credentials (the legacy DSN Secret `secretName`
or the per-role Secret names in `credentials`, exactly one of them), TLS, the in-place restore
request, and the status a MysqlDatabase reads (the active site, the restore and planned-failover
phases, the last failover target, conditions). Deliberately left out: the rest of the spec
(storage, resources, Dragonfly, backups) and of the status, kept as unknown fields and not
validated, and Bloodraven's webhook (immutability of site names, allowed phase transitions).
`spec.sites` holds at most 16 entries so that its CEL rules stay within the real server's cost
budget.
"""

from __future__ import annotations

from devstack.crds.schema import Schema, array, crd, obj, string

GROUP = "shipstream.io"
VERSION = "v1alpha1"
KIND = "MysqlFailoverGroup"
PLURAL = "mysqlfailovergroups"
RESOURCE = f"{PLURAL}.{GROUP}"
PRIMARY_CANDIDATE = "primary-candidate"
DR_ONLY = "dr-only"
RESTORE_PHASES = ("", "Preflight", "Fencing", "Restoring", "Resuming", "Succeeded", "Failed")
FAILOVER_PHASES = (
    "",
    "Pending",
    "Deferred",
    "Validating",
    "Draining",
    "WaitingForLag",
    "WaitingForDragonflySync",
    "PromotingDragonfly",
    "Promoting",
    "Resuming",
    "Succeeded",
    "Failed",
)
MAX_SITES = 16


def _sites() -> Schema:
    site = obj(
        {
            "name": string(minLength=1, maxLength=253),
            "role": string(enum=[PRIMARY_CANDIDATE, DR_ONLY], default=PRIMARY_CANDIDATE),
            "zone": string(),
            "lbIP": string(),
        },
        required=("name",),
        preserve=True,
    )
    return array(
        site,
        maxItems=MAX_SITES,
        **{
            "x-kubernetes-validations": [
                {
                    "rule": "self.all(s, self.exists_one(t, t.name == s.name))",
                    "message": "site names must be unique",
                },
                {
                    "rule": (
                        f"self.filter(s, !has(s.role) || s.role == '{PRIMARY_CANDIDATE}')"
                        ".size() >= 2"
                    ),
                    "message": f"at least two sites must have role {PRIMARY_CANDIDATE}",
                },
            ]
        },
    )


def _credentials() -> Schema:
    return obj(
        {
            "operatorSecret": string(minLength=1),
            "appSecret": string(),
            "readOnlySecret": string(),
            "monitorSecret": string(),
            "backupSecret": string(),
        },
        required=("operatorSecret",),
    )


def _spec() -> Schema:
    return obj(
        {
            "sites": _sites(),
            "secretName": string(minLength=1),
            "credentials": _credentials(),
            "tls": obj(
                {
                    "issuerRef": obj(
                        {
                            "name": string(),
                            "kind": string(enum=["Issuer", "ClusterIssuer"]),
                        }
                    ),
                    "secretName": string(),
                }
            ),
            "restoreInPlace": obj({"confirm": string()}),
        },
        required=("sites",),
        preserve=True,
        **{
            "x-kubernetes-validations": [
                {
                    "rule": "has(self.secretName) != has(self.credentials)",
                    "message": "exactly one of spec.secretName and spec.credentials must be set",
                }
            ]
        },
    )


def _status() -> Schema:
    return obj(
        {
            "activeSite": string(),
            "restoreInPlace": obj(
                {
                    "phase": string(enum=list(RESTORE_PHASES)),
                    "confirmTokenUsed": string(),
                },
                preserve=True,
            ),
            "plannedFailover": obj(
                {
                    "phase": string(enum=list(FAILOVER_PHASES)),
                    "targetSite": string(),
                    "message": string(),
                },
                preserve=True,
            ),
            "lastFailoverTarget": string(),
            "conditions": array(obj(preserve=True)),
        },
        preserve=True,
    )


def mysql_failover_group() -> Schema:
    """The MysqlFailoverGroup CRD."""
    return crd(
        group=GROUP,
        kind=KIND,
        plural=PLURAL,
        version=VERSION,
        short_names=("mfg",),
        categories=("bloodraven", "mysql"),
        spec=_spec(),
        status=_status(),
        columns=(
            ("Active", "string", ".status.activeSite"),
            ("Failover", "string", ".status.plannedFailover.phase"),
            ("Target", "string", ".status.plannedFailover.targetSite"),
        ),
    )


CRDS = (mysql_failover_group,)
