"""The real OpenBao of a real platform, as tenantdb's adapter meets it.

``bao`` lends a test the platform shared by the tests of its pytest process (``tests.platforms``:
real kube-apiservers, OpenBao onboarded by docs/operations.md, ESO, cert-manager) with a TCP
proxy in front of OpenBao, which counts the connections tenantdb opens and can cut them;
``private_bao`` gives a test that changes OpenBao's auth roles or policies a platform of its own.
The worker's ServiceAccount token comes from the real API server's TokenRequest with OpenBao's
audience, and the client certificate is one the listener's CA issued.
"""

from __future__ import annotations

import secrets
import urllib.parse
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import hvac
import pytest

from devstack.platform import (
    OPENBAO_AUDIENCE,
    OPERATOR_NAMESPACE,
    WORKER_SERVICE_ACCOUNT,
    Platform,
)
from devstack.upstream import RealOpenBao
from tenantdb.adapters.openbao import _CHANNELS, ClientCertificate, _retire_channel
from tests.faults.proxy import SilentProxy
from tests.platforms import PlatformPool
from tests.support import root_sql

KUBE_MOUNT = "kubernetes/management"
OPERATOR_ROLE = "c5c3-operator"
OPERATOR_POLICY = "c5c3-operator"
CP_NAMESPACE = "openstack"
"""The ControlPlane's namespace: the connection allows roles `order.openstack.*`."""
KEYSTONE_NAMESPACE = "openstack"


@dataclass
class Bao:
    """A real OpenBao behind a proxy, and what a test needs to talk to it as tenantdb."""

    platform: Platform
    proxy: SilentProxy

    @property
    def url(self) -> str:
        """OpenBao's URL through the proxy (its certificate names 127.0.0.1)."""
        return f"https://127.0.0.1:{self.proxy.port}"

    @property
    def openbao(self) -> RealOpenBao:
        running = self.platform.openbao
        assert isinstance(running, RealOpenBao)
        return running

    def jwt(self, namespace: str = OPERATOR_NAMESPACE, name: str = WORKER_SERVICE_ACCOUNT) -> str:
        """A ServiceAccount token of OpenBao's audience from the API server's TokenRequest."""
        return self.platform.cluster().issue_token(
            namespace, name, audiences=[OPENBAO_AUDIENCE], seconds=600
        )

    def root(self) -> hvac.Client:
        """An hvac client with the root token (close its adapter when done)."""
        return self.platform.root_client()

    def session_args(
        self, cert: ClientCertificate
    ) -> tuple[str, str, str, Callable[[], str], ClientCertificate]:
        """What `open_session` takes to log in as the worker, with a token read at each login."""
        return (self.url, KUBE_MOUNT, OPERATOR_ROLE, self.jwt, cert)

    def calls(self) -> Counter[str]:
        """The worker's OpenBao requests answered so far, by the last part of their path."""
        out: Counter[str] = Counter()
        for event in self.openbao.audit_events():
            if event.get("type") != "response":
                continue
            meta = (event.get("auth") or {}).get("metadata") or {}
            if meta.get("service_account_name") == WORKER_SERVICE_ACCOUNT:
                out[str(event["request"]["path"]).rsplit("/", 1)[-1]] += 1
        return out


def _proxied(platform: Platform) -> Iterator[Bao]:
    port = urllib.parse.urlsplit(platform.openbao_url).port
    assert port is not None
    with SilentProxy(port) as proxy:
        yield Bao(platform, proxy)


@pytest.fixture(autouse=True)
def _channels_closed() -> Iterator[None]:
    """Close the OpenBao channels a test opened, revoking the tokens they keep, when it ends,
    so that no later test's figures count their retirement."""
    yield
    for channel in list(_CHANNELS.open.values()):
        _retire_channel(channel)


@pytest.fixture
def bao(platforms: PlatformPool) -> Iterator[Bao]:
    """The shared platform's OpenBao, behind a proxy of the test's own."""
    with platforms.lease(("management", "edge-1"), {}, private=False) as lease:
        yield from _proxied(lease.platform)


@pytest.fixture
def private_bao(platforms: PlatformPool) -> Iterator[Bao]:
    """An OpenBao of the test's own (it changes auth roles or policies), behind a proxy."""
    with platforms.lease(("management",), {}, private=True) as lease:
        yield from _proxied(lease.platform)


def certificate_of(bao: Bao) -> ClientCertificate:
    """A client keypair the listener's CA issued, and that CA, as the adapter takes them."""
    cert, key = bao.platform.admin_client_cert
    return ClientCertificate(
        ca_crt=bao.platform.ca_file.read_bytes(),
        tls_crt=Path(cert).read_bytes(),
        tls_key=Path(key).read_bytes(),
    )


@pytest.fixture
def client_certificate(bao: Bao) -> ClientCertificate:
    """A client certificate for the shared platform's OpenBao."""
    return certificate_of(bao)


@pytest.fixture
def private_certificate(private_bao: Bao) -> ClientCertificate:
    """A client certificate for the test's own OpenBao."""
    return certificate_of(private_bao)


@pytest.fixture
def schemas() -> Iterator[Callable[[], str]]:
    """Create schemas with random names on the real MariaDB; drop them at teardown."""
    created: list[str] = []

    def create() -> str:
        name = f"obt_{secrets.token_hex(4)}_db"
        with root_sql() as conn, conn.cursor() as cur:
            cur.execute(f"CREATE DATABASE `{name}`")
            cur.execute(f"CREATE TABLE `{name}`.t (id INT PRIMARY KEY)")
        created.append(name)
        return name

    yield create
    with root_sql() as conn, conn.cursor() as cur:
        for name in created:
            cur.execute(f"DROP DATABASE IF EXISTS `{name}`")


def sql_user_exists(username: str) -> bool:
    """Whether MariaDB knows a user of that name (any host)."""
    with root_sql() as conn, conn.cursor() as cur:
        cur.execute("SELECT COUNT(*) FROM mysql.user WHERE User = %s", (username,))
        row = cur.fetchone()
    return bool(row and row[0])
