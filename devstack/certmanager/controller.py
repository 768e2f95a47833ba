"""The cert-manager stand-in's controllers: CA issuers and Certificates.

Owns what cert-manager does to the objects tenantdb writes: a `ClusterIssuer` or `Issuer` with a
`ca` block goes Ready once its Secret holds a CA keypair; a `Certificate` naming a Ready CA issuer
gets its Secret (`kubernetes.io/tls`, keys `tls.crt`, `tls.key`, `ca.crt`, cert-manager's
annotations) issued with its commonName, SANs, usages, duration and key settings, is re-issued
when the Secret goes missing or stops matching the spec, and is renewed at its renewal time
(`duration - renewBefore`, divided by the devstack's time scale). Status carries Ready,
notBefore, notAfter, renewalTime and revision.

It must never write a key anywhere but the Certificate's Secret, and never touch a Certificate
whose issuerRef names another group. Deliberately left out compared with cert-manager:
CertificateRequests (the controller signs directly), every issuer type but `ca`, key reuse
(`rotationPolicy: Never` still re-keys), keystores, additional output formats, owner references
on Secrets, and the Issuing condition.
"""

from __future__ import annotations

import base64
import datetime
import ipaddress
import logging
from collections.abc import Iterable
from typing import Any

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization

from devstack.ca import (
    DEFAULT_USAGES,
    CertificateAuthority,
    Request,
    extended_usages,
    requested_extended_usages,
)
from devstack.kubeclient import ApiError, KubeApi
from devstack.reconciler import (
    Controller,
    Key,
    Obj,
    condition,
    get_or_none,
    meta,
    now_text,
    parse_go_duration,
    stop_all,
)

log = logging.getLogger(__name__)

GROUP = "cert-manager.io"
CERTIFICATES = "certificates.cert-manager.io"
ISSUERS = "issuers.cert-manager.io"
CLUSTER_ISSUERS = "clusterissuers.cert-manager.io"
SECRETS = "secrets"
MANAGER = "cert-manager-certificates-issuing"
CERT_NAME_ANNOTATION = "cert-manager.io/certificate-name"
CLUSTER_RESOURCE_NAMESPACE = "cert-manager"
DEFAULT_DURATION = 90 * 24 * 3600.0
_RETRY = 2.0


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _unb64(value: Any) -> bytes:
    try:
        return base64.b64decode(str(value or ""), validate=True)
    except ValueError:
        return b""


def _secret_bytes(secret: Obj | None, key: str) -> bytes:
    return _unb64((secret or {}).get("data", {}).get(key)) if secret else b""


class CertManager:
    """The issuer and Certificate controllers of one cluster."""

    def __init__(
        self,
        cluster: KubeApi,
        *,
        time_scale: float = 1.0,
        cluster_resource_namespace: str = CLUSTER_RESOURCE_NAMESPACE,
    ) -> None:
        """Bind to a cluster.

        Args:
            cluster: The cluster whose Certificates and issuers this controller serves.
            time_scale: Simulated seconds per real second for renewal timing.
            cluster_resource_namespace: Where ClusterIssuers' CA Secrets live.
        """
        self.cluster = cluster
        self.time_scale = time_scale
        self.resource_namespace = cluster_resource_namespace
        self.issuers = Controller(f"cert-manager-issuers-{cluster.name}", self._reconcile_issuer)
        self.certificates = Controller(
            f"cert-manager-certificates-{cluster.name}", self._reconcile_certificate
        )
        self.issuers.watch(cluster, ISSUERS, self._own_keys)
        self.issuers.watch(cluster, CLUSTER_ISSUERS, self._own_keys)
        self.issuers.watch(cluster, SECRETS, self._issuers_of_secret)
        self.certificates.watch(cluster, CERTIFICATES, self._own_keys)
        self.certificates.watch(cluster, SECRETS, self._certificate_of_secret)
        self.certificates.watch(cluster, ISSUERS, self._certificates_of_issuer)
        self.certificates.watch(cluster, CLUSTER_ISSUERS, self._certificates_of_issuer)

    def start(self) -> None:
        """Start both controllers."""
        self.issuers.start()
        self.certificates.start()

    @property
    def controllers(self) -> tuple[Controller, ...]:
        """The controllers this stand-in runs."""
        return (self.issuers, self.certificates)

    def stop(self) -> None:
        """Stop both controllers."""
        stop_all(self.controllers)

    # ------------------------------------------------------------ mapping

    def _own_keys(self, event: str, obj: Obj) -> Iterable[Key]:
        m = meta(obj)
        return [Key(self.cluster.name, str(m.get("namespace", "")), str(m.get("name", "")))]

    def _issuers_of_secret(self, event: str, obj: Obj) -> Iterable[Key]:
        ns = str(meta(obj).get("namespace", ""))
        keys = []
        if ns == self.resource_namespace:
            keys += [
                Key(self.cluster.name, "", str(meta(i).get("name", "")))
                for i in self.cluster.list(CLUSTER_ISSUERS)
            ]
        keys += [
            Key(self.cluster.name, ns, str(meta(i).get("name", "")))
            for i in self.cluster.list(ISSUERS, ns)
        ]
        return keys

    def _certificate_of_secret(self, event: str, obj: Obj) -> Iterable[Key]:
        m = meta(obj)
        name = (m.get("annotations") or {}).get(CERT_NAME_ANNOTATION)
        return [Key(self.cluster.name, str(m.get("namespace", "")), str(name))] if name else []

    def _certificates_of_issuer(self, event: str, obj: Obj) -> Iterable[Key]:
        kind = str(obj.get("kind", ""))
        m = meta(obj)
        ns = m.get("namespace") or None
        keys = []
        for cert in self.cluster.list(CERTIFICATES, ns):
            ref = (cert.get("spec") or {}).get("issuerRef") or {}
            if (ref.get("kind") or "Issuer") == kind and ref.get("name") == m.get("name"):
                cm = meta(cert)
                keys.append(Key(self.cluster.name, str(cm["namespace"]), str(cm["name"])))
        return keys

    # ------------------------------------------------------------ issuers

    def _issuer_secret_namespace(self, namespace: str) -> str:
        return namespace or self.resource_namespace

    def _load_ca(self, issuer: Obj) -> CertificateAuthority:
        """Load a CA issuer's keypair.

        Raises:
            ValueError: The issuer is not a CA issuer, or its Secret holds no usable CA.
        """
        ca = (issuer.get("spec") or {}).get("ca") or {}
        secret_name = ca.get("secretName")
        if not secret_name:
            raise ValueError("the devstack serves only CA issuers (spec.ca)")
        ns = self._issuer_secret_namespace(str(meta(issuer).get("namespace", "")))
        secret = get_or_none(self.cluster, SECRETS, str(secret_name), ns)
        if secret is None:
            raise ValueError(f'secrets "{secret_name}" not found')
        return CertificateAuthority.from_pem(
            _secret_bytes(secret, "tls.crt"), _secret_bytes(secret, "tls.key")
        )

    def _reconcile_issuer(self, key: Key) -> float | None:
        resource = ISSUERS if key.namespace else CLUSTER_ISSUERS
        issuer = get_or_none(self.cluster, resource, key.name, key.namespace)
        if issuer is None:
            return None
        previous = (issuer.get("status") or {}).get("conditions") or []
        generation = meta(issuer).get("generation")
        try:
            self._load_ca(issuer)
            ready = condition(
                "Ready", True, "KeyPairVerified", "Signing CA verified", previous, generation
            )
        except ValueError as exc:
            ready = condition(
                "Ready",
                False,
                "ErrGetKeyPair",
                f"Error getting keypair for CA issuer: {exc}",
                previous,
                generation,
            )
        if previous != [ready]:
            self.cluster.patch(
                resource,
                key.name,
                {"status": {"conditions": [ready]}},
                key.namespace,
                subresource="status",
                manager="cert-manager-issuers",
            )
        return None

    # ------------------------------------------------------------ certificates

    def _issuer_of(self, cert: Obj) -> tuple[Obj | None, str]:
        ref = (cert.get("spec") or {}).get("issuerRef") or {}
        kind = ref.get("kind") or "Issuer"
        if kind == "ClusterIssuer":
            return get_or_none(self.cluster, CLUSTER_ISSUERS, str(ref.get("name", ""))), kind
        ns = str(meta(cert).get("namespace", ""))
        return get_or_none(self.cluster, ISSUERS, str(ref.get("name", "")), ns), kind

    def _set_status(self, key: Key, cert: Obj, status: Obj) -> None:
        old = cert.get("status") or {}
        if all(old.get(k) == v for k, v in status.items()):
            return
        self.cluster.patch(
            CERTIFICATES,
            key.name,
            {"status": status},
            key.namespace,
            subresource="status",
            manager="cert-manager-certificates",
        )

    def _fail(self, key: Key, cert: Obj, reason: str, message: str) -> float:
        previous = (cert.get("status") or {}).get("conditions") or []
        ready = condition("Ready", False, reason, message, previous, meta(cert).get("generation"))
        self._set_status(key, cert, {"conditions": [ready]})
        return _RETRY

    def _reconcile_certificate(self, key: Key) -> float | None:
        cert = get_or_none(self.cluster, CERTIFICATES, key.name, key.namespace)
        if cert is None or meta(cert).get("deletionTimestamp"):
            return None
        spec = cert.get("spec") or {}
        ref = spec.get("issuerRef") or {}
        if (ref.get("group") or GROUP) != GROUP:
            return None
        try:
            request, renew_before = _request_of(spec)
        except ValueError as exc:
            return self._fail(key, cert, "Failed", str(exc))
        issuer, kind = self._issuer_of(cert)
        if issuer is None:
            return self._fail(
                key, cert, "Pending", f'Referenced "{kind}" not found: {ref.get("name", "")}'
            )
        try:
            ca = self._load_ca(issuer)
        except ValueError as exc:
            return self._fail(
                key, cert, "Pending", f"Issuer {ref.get('name', '')} not ready: {exc}"
            )
        secret_name = str(spec.get("secretName", ""))
        secret = get_or_none(self.cluster, SECRETS, secret_name, key.namespace)
        current = _current_cert(secret, ca)
        revision = int((cert.get("status") or {}).get("revision") or 0)
        reason = self._reissue_reason(current, request, renew_before, ca)
        if current is None or reason is not None:
            try:
                current = self._issue(key, cert, ca, request, issuer_kind=kind)
            except ApiError as exc:
                return self._fail(key, cert, "Failed", f"writing the Secret failed: {exc.message}")
            revision += 1
            log.info("issued certificate %s/%s (%s)", key.namespace, key.name, reason)
        return self._record_ready(key, cert, current, request, renew_before, revision)

    def _renewal_at(
        self, current: x509.Certificate, request: Request, renew_before: float
    ) -> datetime.datetime:
        lifetime = (current.not_valid_after_utc - current.not_valid_before_utc).total_seconds()
        simulated = max(0.0, lifetime - renew_before)
        return current.not_valid_before_utc + datetime.timedelta(
            seconds=simulated / self.time_scale
        )

    def _reissue_reason(
        self,
        current: x509.Certificate | None,
        request: Request,
        renew_before: float,
        ca: CertificateAuthority,
    ) -> str | None:
        if current is None:
            return "the Secret holds no certificate of this issuer"
        if _mismatch(current, request, ca):
            return "the certificate no longer matches the spec"
        if datetime.datetime.now(datetime.UTC) >= self._renewal_at(current, request, renew_before):
            return "renewal time reached"
        return None

    def _issue(
        self, key: Key, cert: Obj, ca: CertificateAuthority, request: Request, *, issuer_kind: str
    ) -> x509.Certificate:
        spec = cert.get("spec") or {}
        encoding = str((spec.get("privateKey") or {}).get("encoding") or "PKCS1")
        issued = ca.sign(request, encoding=encoding)
        template = spec.get("secretTemplate") or {}
        ref = spec.get("issuerRef") or {}
        annotations = {
            **(template.get("annotations") or {}),
            CERT_NAME_ANNOTATION: key.name,
            "cert-manager.io/common-name": request.common_name,
            "cert-manager.io/alt-names": ",".join(request.dns_names),
            "cert-manager.io/ip-sans": ",".join(request.ip_addresses),
            "cert-manager.io/uri-sans": ",".join(request.uris),
            "cert-manager.io/issuer-name": str(ref.get("name", "")),
            "cert-manager.io/issuer-kind": issuer_kind,
            "cert-manager.io/issuer-group": str(ref.get("group") or ""),
        }
        labels = {**(template.get("labels") or {}), "controller.cert-manager.io/fao": "true"}
        self.cluster.apply(
            SECRETS,
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {
                    "name": spec.get("secretName"),
                    "namespace": key.namespace,
                    "annotations": annotations,
                    "labels": labels,
                },
                "type": "kubernetes.io/tls",
                "data": {
                    "tls.crt": _b64(issued.cert_pem),
                    "tls.key": _b64(issued.key_pem),
                    "ca.crt": _b64(ca.cert_pem),
                },
            },
            key.namespace,
            manager=MANAGER,
        )
        return x509.load_pem_x509_certificate(issued.cert_pem)

    def _record_ready(
        self,
        key: Key,
        cert: Obj,
        current: x509.Certificate,
        request: Request,
        renew_before: float,
        revision: int,
    ) -> float:
        previous = (cert.get("status") or {}).get("conditions") or []
        renewal = self._renewal_at(current, request, renew_before)
        ready = condition(
            "Ready",
            True,
            "Ready",
            "Certificate is up to date and has not expired",
            previous,
            meta(cert).get("generation"),
        )
        self._set_status(
            key,
            cert,
            {
                "conditions": [ready],
                "notBefore": now_text(current.not_valid_before_utc),
                "notAfter": now_text(current.not_valid_after_utc),
                "renewalTime": now_text(renewal),
                "revision": max(revision, 1),
            },
        )
        wait = (renewal - datetime.datetime.now(datetime.UTC)).total_seconds()
        return max(0.5, wait)


def _request_of(spec: Obj) -> tuple[Request, float]:
    """Read a Certificate spec into a signing request and its renewBefore in seconds.

    Raises:
        ValueError: A duration is unreadable or out of cert-manager's bounds.
    """
    duration = parse_go_duration(str(spec["duration"])) if spec.get("duration") else None
    duration = duration if duration is not None else DEFAULT_DURATION
    if duration < 3600:
        raise ValueError(f"certificate duration {spec.get('duration')} must be greater than 1h")
    renew_before = (
        parse_go_duration(str(spec["renewBefore"])) if spec.get("renewBefore") else duration / 3
    )
    if renew_before >= duration:
        raise ValueError(
            f"certificate duration {spec.get('duration')} must be greater than renewBefore "
            f"{spec.get('renewBefore')}"
        )
    key = spec.get("privateKey") or {}
    subject = spec.get("subject") or {}
    request = Request(
        common_name=str(spec.get("commonName") or ""),
        dns_names=tuple(spec.get("dnsNames") or ()),
        ip_addresses=tuple(spec.get("ipAddresses") or ()),
        uris=tuple(spec.get("uris") or ()),
        emails=tuple(spec.get("emailAddresses") or ()),
        organizations=tuple(subject.get("organizations") or ()),
        usages=tuple(spec.get("usages") or DEFAULT_USAGES),
        duration=datetime.timedelta(seconds=duration),
        is_ca=bool(spec.get("isCA")),
        algorithm=str(key.get("algorithm") or "RSA"),
        size=int(key.get("size") or 0),
    )
    try:
        request = _checked(request)
    except ValueError as exc:
        raise ValueError(f"invalid certificate spec: {exc}") from exc
    return request, renew_before


def _checked(request: Request) -> Request:
    for ip in request.ip_addresses:
        ipaddress.ip_address(ip)
    named = (request.common_name, request.dns_names, request.ip_addresses, request.uris)
    if not any(named) and not request.emails:
        raise ValueError(
            "at least one of commonName, dnsNames, uris ipAddresses, or emailAddresses must be set"
        )
    return request


def _current_cert(secret: Obj | None, ca: CertificateAuthority) -> x509.Certificate | None:
    """Return the Secret's certificate when it is complete and signed by this CA."""
    if secret is None:
        return None
    pem, key_pem, ca_pem = (_secret_bytes(secret, k) for k in ("tls.crt", "tls.key", "ca.crt"))
    if not (pem and key_pem and ca_pem) or ca_pem != ca.cert_pem:
        return None
    try:
        cert = x509.load_pem_x509_certificate(pem)
        key = serialization.load_pem_private_key(key_pem, password=None)
        cert.verify_directly_issued_by(ca.cert)
    except (ValueError, TypeError, InvalidSignature):
        return None
    spki = serialization.PublicFormat.SubjectPublicKeyInfo
    der = serialization.Encoding.DER
    if key.public_key().public_bytes(der, spki) != cert.public_key().public_bytes(der, spki):
        return None
    return cert


def _names(cert: x509.Certificate) -> tuple[set[str], set[str], set[str], set[str]]:
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return set(), set(), set(), set()
    return (
        set(san.get_values_for_type(x509.DNSName)),
        {str(ip) for ip in san.get_values_for_type(x509.IPAddress)},
        set(san.get_values_for_type(x509.UniformResourceIdentifier)),
        set(san.get_values_for_type(x509.RFC822Name)),
    )


def _mismatch(cert: x509.Certificate, request: Request, ca: CertificateAuthority) -> bool:
    common = [a.value for a in cert.subject.get_attributes_for_oid(x509.NameOID.COMMON_NAME)]
    if (common[0] if common else "") != request.common_name:
        return True
    dns, ips, uris, emails = _names(cert)
    wanted_ips = {str(ipaddress.ip_address(ip)) for ip in request.ip_addresses}
    if (dns, ips, uris, emails) != (
        set(request.dns_names),
        wanted_ips,
        set(request.uris),
        set(request.emails),
    ):
        return True
    if extended_usages(cert) != requested_extended_usages(request.usages):
        return True
    lifetime = cert.not_valid_after_utc - cert.not_valid_before_utc
    capped = cert.not_valid_after_utc >= ca.cert.not_valid_after_utc
    return abs(lifetime - request.duration) > datetime.timedelta(seconds=1) and not capped
