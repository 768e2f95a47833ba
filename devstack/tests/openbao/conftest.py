"""Fixtures for the OpenBao stand-in's tests: servers, a bootstrapped platform, real MariaDB.

Every server binds 127.0.0.1 on a free port and is stopped at the end of its test; every schema
and namespace name carries a random suffix; users the server minted are dropped by its `stop()`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import hvac
import pytest

from devstack.openbao import OpenBaoServer, TLSConfig
from devstack.openbao.bootstrap import TenantDatabase, bootstrap_platform
from devstack.openbao.pki import LocalPKI, write_local_pki
from devstack.tests.support import root_sql

from .openbao_support import (
    MARIADB,
    Platform,
    ServerFactory,
    StaticReviewer,
    suffix,
)


@pytest.fixture
def reviewer() -> StaticReviewer:
    """The in-test cluster that authenticates ServiceAccount JWTs."""
    return StaticReviewer()


@pytest.fixture
def start_server(reviewer: StaticReviewer) -> Iterator[ServerFactory]:
    """Start OpenBao stand-ins (plain HTTP unless `tls=` is given); all stop at teardown."""
    servers: list[OpenBaoServer] = []

    def start(**kwargs: Any) -> OpenBaoServer:
        kwargs.setdefault("token_reviewer", reviewer)
        kwargs.setdefault("mariadb", MARIADB)
        server = OpenBaoServer("127.0.0.1", 0, **kwargs).start()
        servers.append(server)
        return server

    yield start
    leftovers = [lease for server in servers for lease in server.stop()]
    assert leftovers == []


@pytest.fixture
def schemas() -> Iterator[Callable[[], str]]:
    """Create schemas with random names on the real MariaDB; drop them at teardown."""
    created: list[str] = []

    def create() -> str:
        name = f"obt_{suffix()}_db"
        session = root_sql()
        try:
            with session.cursor() as cursor:
                cursor.execute(f"CREATE DATABASE `{name}`")
                cursor.execute(f"CREATE TABLE `{name}`.t (id INT PRIMARY KEY)")
        finally:
            session.close()
        created.append(name)
        return name

    yield create
    session = root_sql()
    try:
        with session.cursor() as cursor:
            for name in created:
                cursor.execute(f"DROP DATABASE IF EXISTS `{name}`")
    finally:
        session.close()


@pytest.fixture
def make_platform(
    start_server: ServerFactory, reviewer: StaticReviewer
) -> Iterator[Callable[..., Platform]]:
    """Build bootstrapped platforms: `make_platform(time_scale=..., tls=..., client_kwargs=...)`.

    `controlplane_namespace` names the tenant's control-plane namespace (random by default).
    """
    platforms: list[Platform] = []

    def make(
        client_kwargs: dict[str, Any] | None = None,
        controlplane_namespace: str | None = None,
        **server_kwargs: Any,
    ) -> Platform:
        server = start_server(**server_kwargs)
        root = hvac.Client(url=server.url, token=server.root_token, **(client_kwargs or {}))
        tenant = TenantDatabase(
            controlplane_namespace=controlplane_namespace or f"cp-{suffix()}",
            keystone_namespace=f"ks-{suffix()}",
        )
        result = bootstrap_platform(root, tenants=[tenant])
        platform = Platform(server, root, reviewer, result, tenant, clients=[root])
        platforms.append(platform)
        return platform

    yield make
    for platform in platforms:
        for client in platform.clients:
            client.adapter.close()


@pytest.fixture
def platform(make_platform: Callable[..., Platform]) -> Platform:
    """A bootstrapped plain-HTTP stand-in at real-time speed."""
    return make_platform()


@pytest.fixture(scope="session")
def pki(tmp_path_factory: pytest.TempPathFactory) -> LocalPKI:
    """A CA with a loopback server keypair and a client keypair."""
    return write_local_pki(Path(tmp_path_factory.mktemp("openbao-pki")))


@pytest.fixture
def tls_platform(make_platform: Callable[..., Platform], pki: LocalPKI) -> Platform:
    """A bootstrapped stand-in that asks for the PKI's client certificate (mutual TLS)."""
    tls = TLSConfig(pki.server.cert_file, pki.server.key_file, client_ca_file=pki.ca_file)
    return make_platform(
        tls=tls,
        client_kwargs={"cert": (pki.client.cert_file, pki.client.key_file), "verify": pki.ca_file},
    )
