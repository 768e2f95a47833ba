"""Endpoint choice and host:port parsing with Go net.SplitHostPort semantics."""

from __future__ import annotations

import pytest

from tenantdb.core.mariadbdatabase.endpoint import (
    Endpoint,
    EndpointError,
    compute_endpoint_choice,
    parse_endpoint,
    split_host_port,
)
from tests.unit.mdb_builders import make_control_plane


@pytest.mark.parametrize(
    ("address", "expected"),
    [
        pytest.param("db.example.test:3306", Endpoint("db.example.test", 3306), id="hostname"),
        pytest.param("10.0.0.7:3307", Endpoint("10.0.0.7", 3307), id="ipv4"),
        pytest.param("[fd00::1]:3306", Endpoint("fd00::1", 3306), id="bracketed-ipv6"),
        pytest.param("db:65535", Endpoint("db", 65535), id="port-65535"),
        pytest.param("db:1", Endpoint("db", 1), id="port-1"),
        pytest.param("db:03306", Endpoint("db", 3306), id="leading-zero-accepted-by-parser"),
        pytest.param(":3306", Endpoint("", 3306), id="empty-host-as-go"),
        pytest.param(
            "openstack-db.default.svc:3306",
            Endpoint("openstack-db.default.svc", 3306),
            id="in-cluster-service",
        ),
    ],
)
def test_parse_endpoint_accepts(address: str, expected: Endpoint) -> None:
    assert parse_endpoint(address) == expected


@pytest.mark.parametrize(
    ("address", "error"),
    [
        pytest.param(
            "db.example.test", "address db.example.test: missing port in address", id="no-port"
        ),
        pytest.param(
            "fd00::1:3306", "address fd00::1:3306: too many colons in address", id="bare-ipv6"
        ),
        pytest.param(
            "[fd00::1]", "address [fd00::1]: missing port in address", id="bracket-no-port"
        ),
        pytest.param(
            "[fd00::1:3306", "address [fd00::1:3306: missing ']' in address", id="unclosed-bracket"
        ),
        pytest.param(
            "[fd00::1]x:3306",
            "address [fd00::1]x:3306: missing port in address",
            id="junk-after-bracket",
        ),
        pytest.param(
            "[a]:b]:3306",
            "address [a]:b]:3306: too many colons in address",
            id="colon-after-bracket",
        ),
        pytest.param(
            "a[b:3306", "address a[b:3306: unexpected '[' in address", id="stray-open-bracket"
        ),
        pytest.param(
            "a]b:3306", "address a]b:3306: unexpected ']' in address", id="stray-close-bracket"
        ),
        pytest.param("db:http", 'port "http" is not in 1-65535', id="non-numeric-port"),
        pytest.param("db:0", 'port "0" is not in 1-65535', id="port-0"),
        pytest.param("db:65536", 'port "65536" is not in 1-65535', id="port-65536"),
        pytest.param("db:99999", 'port "99999" is not in 1-65535', id="port-99999"),
        pytest.param("db:", 'port "" is not in 1-65535', id="empty-port"),
        pytest.param("db:+1", 'port "+1" is not in 1-65535', id="signed-port"),
        pytest.param("db:-1", 'port "-1" is not in 1-65535', id="negative-port"),
    ],
)
def test_parse_endpoint_rejects(address: str, error: str) -> None:
    with pytest.raises(EndpointError) as caught:
        parse_endpoint(address)
    assert str(caught.value) == error


def test_split_host_port_keeps_port_text() -> None:
    assert split_host_port("[::1]:03306") == ("::1", "03306")


@pytest.mark.parametrize(
    ("keystone", "order_cluster", "address", "in_cluster"),
    [
        pytest.param(
            None,
            "",
            "openstack-db.default.svc:3306",
            True,
            id="management-order-management-keystone",
        ),
        pytest.param(None, "edge-1", "db.example.test:3306", False, id="target-order-published"),
        pytest.param(
            {"targetClusterRef": {"name": "edge-1"}, "namespace": {"name": "ks"}},
            "edge-1",
            "openstack-db.ks.svc:3306",
            True,
            id="order-on-keystone-target-cluster",
        ),
        pytest.param(
            {"targetClusterRef": {"name": "edge-1"}},
            "",
            "db.example.test:3306",
            False,
            id="management-order-keystone-placed-elsewhere",
        ),
    ],
)
def test_endpoint_choice(
    keystone: dict[str, object] | None, order_cluster: str, address: str, in_cluster: bool
) -> None:
    cp = make_control_plane(published="db.example.test:3306", keystone=keystone)
    choice = compute_endpoint_choice(cp, order_cluster)
    assert (choice.address, choice.in_cluster) == (address, in_cluster)


def test_in_cluster_port_follows_the_database() -> None:
    cp = make_control_plane(database={"clusterRef": {"name": "openstack-db"}, "port": 3307})
    assert compute_endpoint_choice(cp, "").address == "openstack-db.default.svc:3307"


def test_no_published_endpoint_chooses_nothing() -> None:
    choice = compute_endpoint_choice(make_control_plane(), "edge-1")
    assert choice.address == ""
    assert choice.in_cluster_address == "openstack-db.default.svc:3306"
