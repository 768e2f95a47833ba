"""The cert-manager CRDs the devstack serves: Certificate, Issuer and ClusterIssuer.

Owns their schemas for the fields tenantdb and the stand-in controller use, with cert-manager's
names, enums and defaults. Deliberately left out: CertificateRequest, Order and Challenge (the
stand-in signs directly), ACME/Vault/Venafi issuer bodies (kept as unknown fields), and
keystores, nameConstraints and otherNames on Certificates.
"""

from __future__ import annotations

from devstack.crds.schema import (
    Schema,
    array,
    boolean,
    conditions,
    crd,
    integer,
    obj,
    string,
    string_map,
)

GROUP = "cert-manager.io"
VERSION = "v1"
USAGES = (
    "signing",
    "digital signature",
    "content commitment",
    "key encipherment",
    "key agreement",
    "data encipherment",
    "cert sign",
    "crl sign",
    "encipher only",
    "decipher only",
    "any",
    "server auth",
    "client auth",
    "code signing",
    "email protection",
    "s/mime",
    "ipsec end system",
    "ipsec tunnel",
    "ipsec user",
    "timestamping",
    "ocsp signing",
    "microsoft sgc",
    "netscape sgc",
)
_READY = ('.status.conditions[?(@.type=="Ready")].status',)


def _certificate_spec() -> Schema:
    return obj(
        {
            "secretName": string(),
            "issuerRef": obj(
                {"name": string(), "kind": string(), "group": string()}, required=("name",)
            ),
            "commonName": string(),
            "dnsNames": array(string()),
            "ipAddresses": array(string()),
            "uris": array(string()),
            "emailAddresses": array(string()),
            "duration": string(),
            "renewBefore": string(),
            "renewBeforePercentage": integer(format="int32"),
            "usages": array(string(enum=list(USAGES))),
            "isCA": boolean(),
            "revisionHistoryLimit": integer(format="int32"),
            "subject": obj(
                {
                    key: array(string())
                    for key in (
                        "organizations",
                        "countries",
                        "organizationalUnits",
                        "localities",
                        "provinces",
                        "streetAddresses",
                        "postalCodes",
                    )
                }
                | {"serialNumber": string()}
            ),
            "privateKey": obj(
                {
                    "algorithm": string(enum=["RSA", "ECDSA", "Ed25519"]),
                    "size": integer(),
                    "encoding": string(enum=["PKCS1", "PKCS8"]),
                    "rotationPolicy": string(enum=["Never", "Always"]),
                }
            ),
            "secretTemplate": obj({"annotations": string_map(), "labels": string_map()}),
        },
        required=("secretName", "issuerRef"),
    )


def certificate() -> Schema:
    """The Certificate CRD."""
    return crd(
        group=GROUP,
        kind="Certificate",
        plural="certificates",
        version=VERSION,
        short_names=("cert", "certs"),
        categories=("cert-manager",),
        spec=_certificate_spec(),
        status=obj(
            {
                "conditions": conditions(),
                "notBefore": string(format="date-time"),
                "notAfter": string(format="date-time"),
                "renewalTime": string(format="date-time"),
                "revision": integer(),
                "lastFailureTime": string(format="date-time"),
                "failedIssuanceAttempts": integer(),
            }
        ),
        columns=(
            ("Ready", "string", _READY[0]),
            ("Secret", "string", ".spec.secretName"),
            ("Issuer", "string", ".spec.issuerRef.name"),
        ),
    )


def _issuer_spec() -> Schema:
    return obj(
        {
            "ca": obj(
                {"secretName": string(), "crlDistributionPoints": array(string())},
                required=("secretName",),
            ),
            "selfSigned": obj({"crlDistributionPoints": array(string())}),
            "acme": obj(preserve=True),
            "vault": obj(preserve=True),
            "venafi": obj(preserve=True),
        }
    )


def _issuer(kind: str, plural: str, *, namespaced: bool) -> Schema:
    return crd(
        group=GROUP,
        kind=kind,
        plural=plural,
        version=VERSION,
        namespaced=namespaced,
        categories=("cert-manager",),
        spec=_issuer_spec(),
        status=obj({"conditions": conditions()}),
        columns=(("Ready", "string", _READY[0]),),
    )


def issuer() -> Schema:
    """The namespaced Issuer CRD."""
    return _issuer("Issuer", "issuers", namespaced=True)


def cluster_issuer() -> Schema:
    """The ClusterIssuer CRD (a CA issuer's Secret lives in the cluster resource namespace)."""
    return _issuer("ClusterIssuer", "clusterissuers", namespaced=False)


CRDS = (certificate, issuer, cluster_issuer)
