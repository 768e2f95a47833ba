"""The cert-manager stand-in: Certificates from the devstack CA issuer, usable against OpenBao."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import hvac
import requests
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from kubernetes import client

from devstack.platform import Platform
from tenantdb.core.mariadbdatabase.manifests import build_client_certificate
from tests.support import wait_for

from .conftest import decoded, ready, write_secret_pems

CERT = ("cert-manager.io", "v1", "certificates")


def _certificate(custom: client.CustomObjectsApi, ns: str, name: str) -> dict[str, Any]:
    obj: dict[str, Any] = custom.get_namespaced_custom_object(*CERT[:2], ns, CERT[2], name)
    return obj


def test_client_certificate_honours_the_spec_and_passes_openbao_mtls(
    platform: Platform,
    core: client.CoreV1Api,
    custom: client.CustomObjectsApi,
    namespace: str,
    tmp_path: Path,
) -> None:
    body = build_client_certificate(namespace)
    custom.create_namespaced_custom_object(*CERT[:2], namespace, CERT[2], body)
    pems = write_secret_pems(core, namespace, "order-db-openbao-client", tmp_path)
    secret = core.read_namespaced_secret("order-db-openbao-client", namespace)
    assert secret.type == "kubernetes.io/tls"
    assert decoded(secret, "ca.crt") == platform.ca_file.read_bytes()

    cert = x509.load_pem_x509_certificate(decoded(secret, "tls.crt"))
    common_name = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value
    assert common_name == f"order-db-openbao-client.{namespace}.svc"
    usages = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(usages) == [ExtendedKeyUsageOID.CLIENT_AUTH]
    assert cert.not_valid_after_utc - cert.not_valid_before_utc == timedelta(hours=8760)

    status = wait_for(lambda: ready(_certificate(custom, namespace, "order-db-openbao-client")))
    assert status["reason"] == "Ready"

    bao = hvac.Client(url=platform.openbao_url, cert=pems.cert, verify=pems.ca_file)
    try:
        assert bao.sys.read_health_status(method="GET")["initialized"] is True
    finally:
        bao.adapter.close()
    with requests.Session() as bare:
        try:
            bare.get(f"{platform.openbao_url}/v1/sys/health", verify=pems.ca_file, timeout=5)
        except requests.exceptions.RequestException:
            pass
        else:
            raise AssertionError("OpenBao accepted a client without a certificate")


def test_server_certificate_with_sans_and_default_usages(
    core: client.CoreV1Api, custom: client.CustomObjectsApi, namespace: str
) -> None:
    body = {
        "apiVersion": "cert-manager.io/v1",
        "kind": "Certificate",
        "metadata": {"name": "web"},
        "spec": {
            "secretName": "web-tls",
            "dnsNames": ["web.example.test"],
            "ipAddresses": ["10.0.0.7"],
            "duration": "2160h",
            "privateKey": {"algorithm": "ECDSA", "size": 256},
            "issuerRef": {"name": "openbao-ca-issuer", "kind": "ClusterIssuer"},
        },
    }
    custom.create_namespaced_custom_object(*CERT[:2], namespace, CERT[2], body)
    wait_for(lambda: ready(_certificate(custom, namespace, "web")), what="the Certificate")
    secret = core.read_namespaced_secret("web-tls", namespace)
    cert = x509.load_pem_x509_certificate(decoded(secret, "tls.crt"))
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert sans.get_values_for_type(x509.DNSName) == ["web.example.test"]
    assert [str(ip) for ip in sans.get_values_for_type(x509.IPAddress)] == ["10.0.0.7"]
    key_usage = cert.extensions.get_extension_for_class(x509.KeyUsage).value
    assert key_usage.digital_signature
    assert key_usage.key_encipherment
    assert secret.metadata.annotations["cert-manager.io/certificate-name"] == "web"

    core.delete_namespaced_secret("web-tls", namespace)
    reissued = wait_for(
        lambda: _certificate(custom, namespace, "web")["status"].get("revision") == 2,
        what="the re-issue",
    )
    assert reissued
    assert core.read_namespaced_secret("web-tls", namespace).data["tls.crt"]


def test_unknown_issuer_leaves_certificate_not_ready(
    custom: client.CustomObjectsApi, namespace: str
) -> None:
    body = build_client_certificate(namespace)
    body["spec"]["issuerRef"]["name"] = "absent-issuer"
    custom.create_namespaced_custom_object(*CERT[:2], namespace, CERT[2], body)

    def refusal() -> str | None:
        """The message naming the missing issuer: cert-manager puts it on the request it made
        for the Certificate (the Certificate itself says its Secret does not exist yet)."""
        name = body["metadata"]["name"]
        objects = [_certificate(custom, namespace, name)]
        try:
            listed = custom.list_namespaced_custom_object(
                *CERT[:2], namespace, "certificaterequests"
            )
        except client.ApiException as exc:  # the stand-in makes no CertificateRequests
            if exc.status != 404:
                raise
        else:
            objects += listed.get("items") or []
        for obj in objects:
            for cond in (obj.get("status") or {}).get("conditions") or []:
                refused = cond["type"] == "Ready" and cond["status"] == "False"
                if refused and "absent-issuer" in cond.get("message", ""):
                    return str(cond["message"])
        return None

    assert "not found" in wait_for(refusal, what="the refusal")
    assert not ready(_certificate(custom, namespace, body["metadata"]["name"]))
