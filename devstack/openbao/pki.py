"""Throw-away TLS material for the OpenBao stand-in's listener and its clients.

Owns generating a CA, a server certificate for the loopback listener and client certificates,
written as PEM files into a directory the caller owns (a test's temporary directory, the devstack's
state directory). Must never be used for anything but local tests and the demo: the keys are
unprotected files and the CA is trusted by nothing else.
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

_VALIDITY = datetime.timedelta(days=2)


@dataclass(frozen=True)
class Keypair:
    """A certificate and its key as PEM files."""

    cert_file: str
    key_file: str


@dataclass(frozen=True)
class LocalPKI:
    """A CA with one server and one client keypair, as PEM files.

    Attributes:
        ca_file: The CA certificate (trust it for the server, and require it of clients).
        server: The listener's keypair (SANs: localhost, 127.0.0.1, the in-cluster name).
        client: A client keypair signed by the same CA.
    """

    ca_file: str
    server: Keypair
    client: Keypair


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _write_key(key: ec.EllipticCurvePrivateKey, path: Path) -> None:
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    path.chmod(0o600)


class CertificateAuthority:
    """An in-memory CA that issues server and client certificates."""

    def __init__(self, common_name: str = "devstack OpenBao CA") -> None:
        """Create the CA's key and self-signed certificate."""
        now = datetime.datetime.now(datetime.UTC)
        self.key = ec.generate_private_key(ec.SECP256R1())
        self.cert = (
            x509.CertificateBuilder()
            .subject_name(_name(common_name))
            .issuer_name(_name(common_name))
            .public_key(self.key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + _VALIDITY)
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    key_cert_sign=True,
                    crl_sign=True,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .sign(self.key, hashes.SHA256())
        )

    def write_ca(self, path: Path) -> str:
        """Write the CA certificate as PEM and return its path."""
        path.write_bytes(self.cert.public_bytes(serialization.Encoding.PEM))
        return str(path)

    def issue(
        self,
        directory: Path,
        stem: str,
        common_name: str,
        *,
        server: bool,
        dns_names: tuple[str, ...] = (),
        ip_addresses: tuple[str, ...] = (),
    ) -> Keypair:
        """Issue a server or client certificate and write `<stem>.crt` and `<stem>.key`.

        Args:
            directory: Where to write the files.
            stem: The file name stem.
            common_name: The subject's common name.
            server: True for serverAuth (with SANs), False for clientAuth.
            dns_names: DNS subject alternative names.
            ip_addresses: IP subject alternative names.

        Returns:
            The written keypair.
        """
        now = datetime.datetime.now(datetime.UTC)
        key = ec.generate_private_key(ec.SECP256R1())
        usage = ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH
        builder = (
            x509.CertificateBuilder()
            .subject_name(_name(common_name))
            .issuer_name(self.cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + _VALIDITY)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        )
        alt_names: list[x509.GeneralName] = [x509.DNSName(name) for name in dns_names]
        alt_names += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in ip_addresses]
        if alt_names:
            builder = builder.add_extension(x509.SubjectAlternativeName(alt_names), critical=False)
        cert = builder.sign(self.key, hashes.SHA256())
        cert_path = directory / f"{stem}.crt"
        key_path = directory / f"{stem}.key"
        cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        _write_key(key, key_path)
        return Keypair(cert_file=str(cert_path), key_file=str(key_path))


def write_local_pki(directory: Path) -> LocalPKI:
    """Create a CA, a loopback server keypair and one client keypair under a directory.

    Args:
        directory: An existing directory the caller owns.

    Returns:
        The paths of the PEM files.
    """
    authority = CertificateAuthority()
    return LocalPKI(
        ca_file=authority.write_ca(directory / "ca.crt"),
        server=authority.issue(
            directory,
            "server",
            "openbao",
            server=True,
            dns_names=("localhost", "openbao.shared-services.svc"),
            ip_addresses=("127.0.0.1", "::1"),
        ),
        client=authority.issue(directory, "client", "order-db-openbao-client", server=False),
    )
