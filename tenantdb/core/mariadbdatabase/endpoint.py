"""The database address an order's delivered Secret carries.

Owns the choice between the in-cluster MariaDB Service (for an order on Keystone's cluster)
and the ControlPlane's published endpoint (anywhere else), and the split of `host:port` with
the semantics of Go's net.SplitHostPort (bracketed IPv6, "missing port", "too many colons")
followed by the 1-65535 port check. It must never resolve a name or open a connection.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from tenantdb.core.mariadbdatabase.controlplane import (
    compute_effective_keystone_database,
    compute_in_cluster_address,
    compute_keystone_cluster,
    compute_keystone_namespace,
)
from tenantdb.core.mariadbdatabase.models import ControlPlane

_DIGITS = re.compile(r"[0-9]+")
_MAX_PORT = 65535


class EndpointError(ValueError):
    """An address that is not host:port with a port from 1 to 65535."""


@dataclass(frozen=True)
class Endpoint:
    """A database address as delivered."""

    host: str
    port: int


def _address_error(address: str, why: str) -> EndpointError:
    return EndpointError(f"address {address}: {why}")


def split_host_port(address: str) -> tuple[str, str]:
    """Split `host:port` as Go's net.SplitHostPort does, brackets of an IPv6 literal removed."""
    missing_port = "missing port in address"
    too_many_colons = "too many colons in address"
    last_colon = address.rfind(":")
    if last_colon < 0:
        raise _address_error(address, missing_port)
    scan_open, scan_close = 0, 0
    if address.startswith("["):
        end = address.find("]")
        if end < 0:
            raise _address_error(address, "missing ']' in address")
        if end + 1 == len(address):
            raise _address_error(address, missing_port)
        if end + 1 != last_colon:
            why = too_many_colons if address[end + 1] == ":" else missing_port
            raise _address_error(address, why)
        host = address[1:end]
        scan_open, scan_close = 1, end + 1
    else:
        host = address[:last_colon]
        if ":" in host:
            raise _address_error(address, too_many_colons)
    if "[" in address[scan_open:]:
        raise _address_error(address, "unexpected '[' in address")
    if "]" in address[scan_close:]:
        raise _address_error(address, "unexpected ']' in address")
    return host, address[last_colon + 1 :]


def parse_port(port: str) -> int:
    """Parse a port as an unsigned 16-bit decimal other than 0 (leading zeros are accepted)."""
    if _DIGITS.fullmatch(port) is None or int(port) == 0 or int(port) > _MAX_PORT:
        raise EndpointError(f'port "{port}" is not in 1-65535')
    return int(port)


def parse_endpoint(address: str) -> Endpoint:
    """Split and check an address; raises EndpointError with the text the status carries."""
    host, port = split_host_port(address)
    return Endpoint(host=host, port=parse_port(port))


@dataclass(frozen=True)
class EndpointChoice:
    """The address chosen for an order's cluster, before it is parsed.

    `address` is empty when the order lives off Keystone's cluster and the ControlPlane
    publishes nothing; `in_cluster_address` is always the Service address, for messages.
    """

    address: str
    in_cluster: bool
    in_cluster_address: str


def compute_endpoint_choice(cp: ControlPlane, order_cluster: str) -> EndpointChoice:
    """Choose the in-cluster Service on Keystone's cluster, the published endpoint elsewhere."""
    database = compute_effective_keystone_database(cp)
    service = ""
    if database is not None:
        service = compute_in_cluster_address(database, compute_keystone_namespace(cp))
    if order_cluster == compute_keystone_cluster(cp):
        return EndpointChoice(address=service, in_cluster=True, in_cluster_address=service)
    published = cp.spec.infrastructure.published_database_endpoint if cp.spec.infrastructure else ""
    return EndpointChoice(address=published, in_cluster=False, in_cluster_address=service)
