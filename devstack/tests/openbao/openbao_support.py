"""Helpers shared by the OpenBao stand-in's tests: names, MariaDB checks, a fake cluster."""

from __future__ import annotations

import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import hvac

from devstack.openbao import MariaDBEndpoint, OpenBaoServer, ReviewResult
from devstack.openbao.bootstrap import (
    KUBE_MOUNT,
    ORDER_DB_SERVICE_ACCOUNT,
    BootstrapResult,
    TenantDatabase,
)
from devstack.tests.support import root_sql

MOUNT = "database/mariadb"

ServerFactory = Callable[..., OpenBaoServer]

MARIADB = MariaDBEndpoint(host="127.0.0.1", port=3306)


def suffix() -> str:
    """Return a short random suffix for names this test owns."""
    return secrets.token_hex(4)


def sql_user_exists(username: str) -> bool:
    """Return whether MariaDB knows a user of that name (any host)."""
    session = root_sql()
    try:
        with session.cursor() as cursor:
            cursor.execute("SELECT COUNT(*) FROM mysql.user WHERE User = %s", (username,))
            row = cursor.fetchone()
    finally:
        session.close()
    return bool(row and row[0])


def order_role_body(schema: str, db_name: str) -> dict[str, Any]:
    """Return the role body the order reconciler writes for a schema."""
    escaped = schema.replace("_", "\\_")
    return {
        "db_name": db_name,
        "creation_statements": [
            "CREATE USER '{{name}}'@'%' IDENTIFIED BY '{{password}}';",
            f"GRANT ALL PRIVILEGES ON `{escaped}`.* TO '{{{{name}}}}'@'%';",
        ],
        "revocation_statements": ["DROP USER IF EXISTS '{{name}}'@'%';"],
        "default_ttl": 172800,
        "max_ttl": 259200,
    }


class StaticReviewer:
    """A TokenReviewer that knows the JWTs the test issued, standing in for the cluster."""

    def __init__(self) -> None:
        self._tokens: dict[str, tuple[str, str, str]] = {}
        self.reviews = 0

    def issue(self, namespace: str, name: str) -> str:
        """Return a fresh JWT for a ServiceAccount."""
        jwt = "jwt-" + secrets.token_urlsafe(16)
        self._tokens[jwt] = (namespace, name, f"uid-{namespace}-{name}")
        return jwt

    def review(self, jwt: str, audiences: Sequence[str] = ()) -> ReviewResult:
        self.reviews += 1
        known = self._tokens.get(jwt)
        if known is None:
            return ReviewResult(authenticated=False)
        namespace, name, uid = known
        return ReviewResult(True, f"system:serviceaccount:{namespace}:{name}", uid)


@dataclass
class Platform:
    """A bootstrapped stand-in with one onboarded ControlPlane."""

    server: OpenBaoServer
    root: Any
    reviewer: StaticReviewer
    result: BootstrapResult
    tenant: TenantDatabase
    clients: list[Any] = field(default_factory=list)

    @property
    def cp_namespace(self) -> str:
        return self.tenant.controlplane_namespace

    @property
    def connection(self) -> str:
        return self.tenant.connection_name

    def client(self, token: str | None = None, **kwargs: Any) -> Any:
        """Return a new hvac client on the server (closed at teardown)."""
        client = hvac.Client(url=self.server.url, token=token, **kwargs)
        self.clients.append(client)
        return client

    def login(self, role: str, namespace: str, service_account: str) -> Any:
        """Log in on the Kubernetes auth mount as a ServiceAccount; return the client."""
        client = self.client()
        jwt = self.reviewer.issue(namespace, service_account)
        client.auth.kubernetes.login(role, jwt, mount_point=KUBE_MOUNT)
        return client

    def operator(self) -> Any:
        """Return a client logged in as the reconciler."""
        return self.login("c5c3-operator", "c5c3-system", "c5c3-operator")

    def generator(self, namespace: str | None = None) -> Any:
        """Return a client logged in as an ESO generator of a namespace."""
        return self.login("order-db", namespace or self.cp_namespace, ORDER_DB_SERVICE_ACCOUNT)

    def write_order_role(self, client: Any, role: str, schema: str) -> Any:
        body = order_role_body(schema, self.connection)
        return client.secrets.database.create_role(role, mount_point=MOUNT, **body)
