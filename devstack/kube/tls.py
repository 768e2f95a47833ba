"""TLS material for the simulated API servers.

Owns one throwaway certificate authority per process and a server certificate for 127.0.0.1 and
localhost signed by it. kubectl (client-go) only sends a bearer token over TLS, so the servers
speak HTTPS and the kubeconfig carries the CA. It must never write a private key anywhere but a
private temporary file that is removed right after loading.
"""

from __future__ import annotations

import base64
import datetime
import ipaddress
import os
import ssl
import tempfile
import threading
from dataclasses import dataclass

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


@dataclass(frozen=True)
class Material:
    """A CA certificate and a server certificate with its key, all PEM."""

    ca_pem: bytes
    cert_pem: bytes
    key_pem: bytes

    @property
    def ca_data(self) -> str:
        """The CA as kubeconfig's `certificate-authority-data`."""
        return base64.b64encode(self.ca_pem).decode()

    def server_context(self) -> ssl.SSLContext:
        """An SSL context for serving with the server certificate."""
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        fd, path = tempfile.mkstemp(suffix=".pem")
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(self.cert_pem + self.key_pem)
            ctx.load_cert_chain(path)
        finally:
            os.unlink(path)
        return ctx


def _name(common: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])


def _generate() -> Material:
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (
        x509.CertificateBuilder()
        .subject_name(_name("devstack-ca"))
        .issuer_name(_name("devstack-ca"))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=30))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    sans = x509.SubjectAlternativeName(
        [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
    )
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name("kube-apiserver"))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=30))
        .add_extension(sans, critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    return Material(
        ca.public_bytes(serialization.Encoding.PEM),
        cert.public_bytes(serialization.Encoding.PEM),
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ),
    )


_lock = threading.Lock()
_material: list[Material] = []


def material() -> Material:
    """The process-wide TLS material, generated on first use."""
    with _lock:
        if not _material:
            _material.append(_generate())
        return _material[0]
