"""The devstack CA: it signs the platform's certificates and backs cert-manager's CA issuer.

Owns the devstack CA (a self-signed key and certificate, or one loaded from a Secret's PEMs) and
signing leaf or CA certificates for a requested subject, SANs, usages, validity and key algorithm,
with cert-manager's mapping of usage names to X.509 key usages and extended key usages. It must
never write a private key anywhere itself: callers decide where PEMs go.
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass, field

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID, ObjectIdentifier

PrivateKey = rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey | ed25519.Ed25519PrivateKey

_EXTENDED = {
    "any": ExtendedKeyUsageOID.ANY_EXTENDED_KEY_USAGE,
    "server auth": ExtendedKeyUsageOID.SERVER_AUTH,
    "client auth": ExtendedKeyUsageOID.CLIENT_AUTH,
    "code signing": ExtendedKeyUsageOID.CODE_SIGNING,
    "email protection": ExtendedKeyUsageOID.EMAIL_PROTECTION,
    "s/mime": ExtendedKeyUsageOID.EMAIL_PROTECTION,
    "ipsec end system": ObjectIdentifier("1.3.6.1.5.5.7.3.5"),
    "ipsec tunnel": ObjectIdentifier("1.3.6.1.5.5.7.3.6"),
    "ipsec user": ObjectIdentifier("1.3.6.1.5.5.7.3.7"),
    "timestamping": ExtendedKeyUsageOID.TIME_STAMPING,
    "ocsp signing": ExtendedKeyUsageOID.OCSP_SIGNING,
    "microsoft sgc": ObjectIdentifier("1.3.6.1.4.1.311.10.3.3"),
    "netscape sgc": ObjectIdentifier("2.16.840.1.113730.4.1"),
}
_KEY_USAGE = {
    "signing": "digital_signature",
    "digital signature": "digital_signature",
    "content commitment": "content_commitment",
    "key encipherment": "key_encipherment",
    "key agreement": "key_agreement",
    "data encipherment": "data_encipherment",
    "cert sign": "key_cert_sign",
    "crl sign": "crl_sign",
    "encipher only": "encipher_only",
    "decipher only": "decipher_only",
}
DEFAULT_USAGES = ("digital signature", "key encipherment")


@dataclass(frozen=True)
class Request:
    """What a certificate should say.

    Attributes:
        common_name: The subject's CN ("" for none).
        dns_names: DNS subject alternative names.
        ip_addresses: IP subject alternative names.
        uris: URI subject alternative names.
        emails: e-mail subject alternative names.
        organizations: The subject's O values.
        usages: cert-manager usage names (`client auth`, `digital signature`, …).
        duration: Validity from now.
        is_ca: Whether the certificate may sign others.
        algorithm: RSA, ECDSA or Ed25519.
        size: RSA modulus bits or ECDSA curve size.
    """

    common_name: str = ""
    dns_names: tuple[str, ...] = ()
    ip_addresses: tuple[str, ...] = ()
    uris: tuple[str, ...] = ()
    emails: tuple[str, ...] = ()
    organizations: tuple[str, ...] = ()
    usages: tuple[str, ...] = DEFAULT_USAGES
    duration: datetime.timedelta = datetime.timedelta(days=90)
    is_ca: bool = False
    algorithm: str = "RSA"
    size: int = 0


@dataclass(frozen=True)
class Issued:
    """A signed certificate and its key, PEM; the key never shows in a repr."""

    cert_pem: bytes
    key_pem: bytes = field(repr=False)


def generate_key(algorithm: str = "RSA", size: int = 0) -> PrivateKey:
    """Generate a private key the way cert-manager sizes it by default."""
    if algorithm == "ECDSA":
        curves: dict[int, ec.EllipticCurve] = {
            256: ec.SECP256R1(),
            384: ec.SECP384R1(),
            521: ec.SECP521R1(),
        }
        return ec.generate_private_key(curves.get(size or 256, ec.SECP256R1()))
    if algorithm == "Ed25519":
        return ed25519.Ed25519PrivateKey.generate()
    return rsa.generate_private_key(public_exponent=65537, key_size=size or 2048)


def key_pem(key: PrivateKey, encoding: str = "PKCS1") -> bytes:
    """Serialize a key: PKCS1 (the traditional form, as cert-manager's default) or PKCS8."""
    pkcs1 = encoding == "PKCS1" and not isinstance(key, ed25519.Ed25519PrivateKey)
    fmt = (
        serialization.PrivateFormat.TraditionalOpenSSL
        if pkcs1
        else serialization.PrivateFormat.PKCS8
    )
    return key.private_bytes(serialization.Encoding.PEM, fmt, serialization.NoEncryption())


def _spki(public: object) -> bytes:
    encode = getattr(public, "public_bytes", None)
    if encode is None:
        return b""
    data: bytes = encode(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return data


def _subject(request: Request) -> x509.Name:
    attributes = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in request.organizations]
    if request.common_name:
        attributes.append(x509.NameAttribute(NameOID.COMMON_NAME, request.common_name))
    return x509.Name(attributes)


def _key_usage(usages: tuple[str, ...], is_ca: bool) -> x509.KeyUsage:
    flags = {name: False for name in set(_KEY_USAGE.values())}
    for usage in usages:
        if usage in _KEY_USAGE:
            flags[_KEY_USAGE[usage]] = True
    if is_ca:
        flags["key_cert_sign"] = True
    return x509.KeyUsage(**flags)


class CertificateAuthority:
    """A CA key and certificate that sign certificates."""

    def __init__(self, key: PrivateKey, cert: x509.Certificate) -> None:
        """Wrap an existing CA keypair."""
        self.key = key
        self.cert = cert

    @classmethod
    def generate(
        cls, common_name: str = "devstack CA", validity: datetime.timedelta | None = None
    ) -> CertificateAuthority:
        """Create a self-signed CA (ECDSA P-256, ten years unless told otherwise)."""
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
        cert = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + (validity or datetime.timedelta(days=3650)))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(_key_usage(("digital signature", "cert sign", "crl sign"), True), True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), False)
            .sign(key, hashes.SHA256())
        )
        return cls(key, cert)

    @classmethod
    def from_pem(cls, cert_pem: bytes, key_pem_bytes: bytes) -> CertificateAuthority:
        """Load a CA keypair from PEM.

        Raises:
            ValueError: The PEMs do not hold a CA certificate and its matching key.
        """
        cert = x509.load_pem_x509_certificate(cert_pem)
        key = serialization.load_pem_private_key(key_pem_bytes, password=None)
        if not isinstance(key, rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey):
            raise ValueError("the CA key is neither RSA nor ECDSA")
        if _spki(key.public_key()) != _spki(cert.public_key()):
            raise ValueError("the CA certificate does not match its private key")
        try:
            constraints = cert.extensions.get_extension_for_class(x509.BasicConstraints).value
        except x509.ExtensionNotFound as exc:
            raise ValueError("the certificate is not a CA") from exc
        if not constraints.ca:
            raise ValueError("the certificate is not a CA")
        return cls(key, cert)

    @property
    def cert_pem(self) -> bytes:
        """The CA certificate as PEM."""
        return self.cert.public_bytes(serialization.Encoding.PEM)

    @property
    def key_pem(self) -> bytes:
        """The CA key as PKCS8 PEM."""
        return key_pem(self.key, "PKCS8")

    def sign(
        self, request: Request, key: PrivateKey | None = None, encoding: str = "PKCS1"
    ) -> Issued:
        """Sign a certificate for a request, with a fresh key unless one is given.

        The validity starts now and is capped at the CA's own expiry, as cert-manager's CA
        issuer does.
        """
        private = key or generate_key(request.algorithm, request.size)
        now = datetime.datetime.now(datetime.UTC).replace(microsecond=0)
        not_after = min(now + request.duration, self.cert.not_valid_after_utc)
        builder = (
            x509.CertificateBuilder()
            .subject_name(_subject(request))
            .issuer_name(self.cert.subject)
            .public_key(private.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now)
            .not_valid_after(not_after)
            .add_extension(x509.BasicConstraints(ca=request.is_ca, path_length=None), True)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(self.key.public_key()), False
            )
        )
        # As Go's x509 does, a certificate without key usage bits carries no KeyUsage extension.
        if request.is_ca or any(u in _KEY_USAGE for u in request.usages):
            builder = builder.add_extension(_key_usage(request.usages, request.is_ca), True)
        extended = [_EXTENDED[u] for u in request.usages if u in _EXTENDED]
        if extended:
            builder = builder.add_extension(x509.ExtendedKeyUsage(extended), False)
        names: list[x509.GeneralName] = [x509.DNSName(n) for n in request.dns_names]
        names += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in request.ip_addresses]
        names += [x509.UniformResourceIdentifier(u) for u in request.uris]
        names += [x509.RFC822Name(e) for e in request.emails]
        if names:
            builder = builder.add_extension(x509.SubjectAlternativeName(names), False)
        cert = builder.sign(self.key, hashes.SHA256())
        return Issued(cert.public_bytes(serialization.Encoding.PEM), key_pem(private, encoding))


def extended_usages(cert: x509.Certificate) -> set[str]:
    """Return the cert-manager names of a certificate's extended key usages."""
    try:
        oids = set(cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value)
    except x509.ExtensionNotFound:
        return set()
    return {name for name, oid in _EXTENDED.items() if oid in oids and name != "s/mime"}


def requested_extended_usages(usages: tuple[str, ...]) -> set[str]:
    """Return the extended key usages a usage list asks for, named as `extended_usages` does."""
    return {"email protection" if u == "s/mime" else u for u in usages if u in _EXTENDED}
