"""The OpenBao stand-in's fixtures (devstack/tests/openbao/conftest.py: servers, bootstrapped
platforms, a local PKI), and the PKI's client keypair as tenantdb's adapter takes it."""

from __future__ import annotations

from pathlib import Path

import pytest

from devstack.openbao.pki import LocalPKI
from devstack.tests.openbao.conftest import (
    make_platform,
    pki,
    platform,
    reviewer,
    schemas,
    start_server,
    tls_platform,
)
from tenantdb.adapters.openbao import ClientCertificate

__all__ = [
    "client_certificate",
    "make_platform",
    "pki",
    "platform",
    "reviewer",
    "schemas",
    "start_server",
    "tls_platform",
]


@pytest.fixture(scope="session")
def client_certificate(pki: LocalPKI) -> ClientCertificate:
    """The PKI's client keypair and CA as tenantdb's adapter takes them from a Secret."""
    return ClientCertificate(
        ca_crt=Path(pki.ca_file).read_bytes(),
        tls_crt=Path(pki.client.cert_file).read_bytes(),
        tls_key=Path(pki.client.key_file).read_bytes(),
    )
