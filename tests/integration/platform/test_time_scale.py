"""A platform whose simulated time runs 3600 times faster: ESO refreshes and certificate renewals
follow their (simulated) intervals without anyone forcing them."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import hvac
import pytest
from kubernetes import client

from devstack.platform import Platform, start_platform
from tenantdb.core.mariadbdatabase.manifests import (
    build_external_secret,
    build_vault_dynamic_secret,
)
from tenantdb.core.mariadbdatabase.naming import compute_creds_path
from tenantdb.core.mariadbdatabase.openbao import OpenBaoConnection
from tests.support import wait_for

from .conftest import (
    CP_NAMESPACE,
    KUBE_MOUNT,
    ROLE_MOUNT,
    ClientPEMs,
    decoded,
    order_role_body,
    ready,
    suffix,
)

SCALE = 3600.0


@pytest.fixture(scope="module")
def platform(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Platform]:
    """A platform on management only, an hour of simulated time per real second."""
    running = start_platform(tmp_path_factory.mktemp("fast"), ("management",), time_scale=SCALE)
    yield running
    running.stop()


@pytest.fixture
def order_role(root: hvac.Client) -> Iterator[Callable[[str], str]]:
    """Write order roles with the root token (an operator token lives 0.25 s at this scale)."""
    written: list[str] = []

    def write(schema: str) -> str:
        role = f"order.{CP_NAMESPACE}.f{suffix()}"
        root.secrets.database.create_role(role, mount_point=ROLE_MOUNT, **order_role_body(schema))
        written.append(role)
        return role

    yield write
    for role in written:
        root.sys.revoke_prefix(f"{ROLE_MOUNT}/creds/{role}")
        root.secrets.database.delete_role(role, mount_point=ROLE_MOUNT)


@pytest.mark.slow
def test_external_secret_refreshes_at_its_scaled_interval(
    platform: Platform,
    core: client.CoreV1Api,
    custom: client.CustomObjectsApi,
    shared_identity: ClientPEMs,
    order_role: Callable[[str], str],
) -> None:
    role = order_role(f"fast_{suffix()}")
    name = f"fast-{suffix()}-credentials"
    connection = OpenBaoConnection(platform.openbao_url, KUBE_MOUNT)
    custom.create_namespaced_custom_object(
        "generators.external-secrets.io",
        "v1alpha1",
        CP_NAMESPACE,
        "vaultdynamicsecrets",
        build_vault_dynamic_secret(
            name=name,
            cp_namespace=CP_NAMESPACE,
            creds_path=compute_creds_path(role),
            connection=connection,
            labels={},
        ),
    )
    external = build_external_secret(name=name, cp_namespace=CP_NAMESPACE, labels={})
    external["spec"]["refreshInterval"] = "2h"
    custom.create_namespaced_custom_object(
        "external-secrets.io", "v1", CP_NAMESPACE, "externalsecrets", external
    )

    def username() -> str | None:
        try:
            return decoded(core.read_namespaced_secret(name, CP_NAMESPACE), "username").decode()
        except client.ApiException:
            return None

    first = wait_for(username, what="the first sync")
    second = wait_for(lambda: (u := username()) != first and u, seconds=10, what="a refresh")
    assert str(second).startswith("v-")
    custom.delete_namespaced_custom_object(
        "external-secrets.io", "v1", CP_NAMESPACE, "externalsecrets", name
    )
    custom.delete_namespaced_custom_object(
        "generators.external-secrets.io", "v1alpha1", CP_NAMESPACE, "vaultdynamicsecrets", name
    )


def test_certificate_renews_before_it_expires(
    custom: client.CustomObjectsApi, namespace: str
) -> None:
    body: dict[str, Any] = {
        "apiVersion": "cert-manager.io/v1",
        "kind": "Certificate",
        "metadata": {"name": "short"},
        "spec": {
            "secretName": "short-tls",
            "commonName": "short.example.test",
            "duration": "2h",
            "renewBefore": "1h",
            "privateKey": {"algorithm": "ECDSA"},
            "issuerRef": {"name": "openbao-ca-issuer", "kind": "ClusterIssuer"},
        },
    }
    custom.create_namespaced_custom_object("cert-manager.io", "v1", namespace, "certificates", body)

    def revision() -> int:
        obj = custom.get_namespaced_custom_object(
            "cert-manager.io", "v1", namespace, "certificates", "short"
        )
        return int((obj.get("status") or {}).get("revision") or 0) if ready(obj) else 0

    wait_for(lambda: revision() >= 2, seconds=10, what="a renewal")
