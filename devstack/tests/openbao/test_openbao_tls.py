"""The listener's mutual TLS: a client must present a certificate from the configured CA."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import hvac
import pytest
import requests

from devstack.openbao import TLSConfig
from devstack.openbao.pki import LocalPKI, write_local_pki

from .openbao_support import MOUNT, Platform, ServerFactory


def _tls(pki: LocalPKI) -> TLSConfig:
    return TLSConfig(pki.server.cert_file, pki.server.key_file, client_ca_file=pki.ca_file)


def test_client_with_certificate_works_end_to_end(
    make_platform: Callable[..., Platform], pki: LocalPKI
) -> None:
    client_cert = (pki.client.cert_file, pki.client.key_file)
    platform = make_platform(
        tls=_tls(pki), client_kwargs={"cert": client_cert, "verify": pki.ca_file}
    )
    assert platform.server.url.startswith("https://127.0.0.1:")
    operator = platform.client(cert=client_cert, verify=pki.ca_file)
    jwt = platform.reviewer.issue("c5c3-system", "c5c3-operator")
    operator.auth.kubernetes.login("c5c3-operator", jwt, mount_point="kubernetes/management")
    assert operator.is_authenticated()
    with pytest.raises(hvac.exceptions.InvalidPath):
        operator.secrets.database.read_role(f"order.{platform.cp_namespace}.x", mount_point=MOUNT)


def test_client_without_certificate_is_refused(start_server: ServerFactory, pki: LocalPKI) -> None:
    server = start_server(tls=_tls(pki))
    url = server.url
    client = hvac.Client(url=url, verify=pki.ca_file)
    with pytest.raises(requests.exceptions.RequestException):
        client.sys.read_health_status(method="GET")
    client.adapter.close()


def test_client_certificate_from_another_ca_is_refused(
    start_server: ServerFactory, pki: LocalPKI, tmp_path: Path
) -> None:
    server = start_server(tls=_tls(pki))
    stranger = write_local_pki(tmp_path)
    client = hvac.Client(
        url=server.url,
        cert=(stranger.client.cert_file, stranger.client.key_file),
        verify=pki.ca_file,
    )
    with pytest.raises(requests.exceptions.RequestException):
        client.sys.read_health_status(method="GET")
    client.adapter.close()


def test_server_certificate_is_verified_by_the_client(
    start_server: ServerFactory, pki: LocalPKI, tmp_path: Path
) -> None:
    server = start_server(tls=_tls(pki))
    other_ca = write_local_pki(tmp_path).ca_file
    client = hvac.Client(
        url=server.url,
        cert=(pki.client.cert_file, pki.client.key_file),
        verify=other_ca,
    )
    with pytest.raises(requests.exceptions.SSLError):
        client.sys.read_health_status(method="GET")
    client.adapter.close()


def test_tls_without_client_ca_accepts_any_client(
    start_server: ServerFactory, pki: LocalPKI
) -> None:
    server = start_server(tls=TLSConfig(pki.server.cert_file, pki.server.key_file))
    client = hvac.Client(url=server.url, verify=pki.ca_file)
    assert client.sys.read_health_status(method="GET")["sealed"] is False
    client.adapter.close()
