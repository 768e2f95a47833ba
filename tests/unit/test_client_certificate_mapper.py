"""The shared OpenBao client certificate wakes the orders of its ControlPlane namespace."""

from __future__ import annotations

from typing import Any

import pytest

from tenantdb.core.keys import OrderKey
from tenantdb.core.mariadbdatabase.mappers import map_client_certificate


def _order(name: str, namespace: str, cp_namespace: str | None) -> dict[str, Any]:
    ref: dict[str, str] = {"name": "cp"}
    if cp_namespace is not None:
        ref["namespace"] = cp_namespace
    return {
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"controlPlaneRef": ref},
    }


ORDERS = [
    _order("a", "tenant-a", "openstack"),
    _order("b", "tenant-b", "openstack"),
    _order("c", "tenant-a", "other"),
    _order("d", "openstack", None),  # defaults to its own namespace
]


@pytest.mark.parametrize(
    ("secret", "expected"),
    [
        pytest.param(
            {"metadata": {"name": "order-db-openbao-client", "namespace": "openstack"}},
            [
                "mariadbdatabase/tenant-a/a",
                "mariadbdatabase/tenant-b/b",
                "mariadbdatabase/openstack/d",
            ],
            id="its-namespace-orders",
        ),
        pytest.param(
            {"metadata": {"name": "order-db-openbao-client", "namespace": "elsewhere"}},
            [],
            id="no-orders-there",
        ),
        pytest.param(
            {"metadata": {"name": "some-other-secret", "namespace": "openstack"}},
            [],
            id="other-name",
        ),
    ],
)
def test_the_client_certificate_maps_to_its_namespace(
    secret: dict[str, Any], expected: list[str]
) -> None:
    keys = map_client_certificate(secret, ORDERS)
    assert keys == [OrderKey.parse(k) for k in expected]
