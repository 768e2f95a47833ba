"""Helpers of the MysqlDatabase end-to-end tests: the caller's client and the servers' view.

The caller talks to the API server through the official client with the token of the
ServiceAccount the chart's example caller Role is bound to, and holds nothing else (the devstack
enforces RBAC); the owner Secret is written by the platform (as
External Secrets Operator would), never by the caller. What happens on MySQL is checked with
PyMySQL on the servers themselves, and statements are counted from the primary's general log
(the statements of tenantdb's admin account only).
"""

from __future__ import annotations

import base64
import time
from collections.abc import Iterator
from typing import Any

import pymysql
import pytest
import redis
import yaml
from kubernetes import client as k8s

from devstack.mysql_group import MysqlGroup
from tenantdb.core.mysqldatabase.naming import IDENTITY
from tests.conftest import REDIS_URL
from tests.e2e.conftest import REPO, Stack, order_quiet
from tests.support import wait_for

CALLER_ROLE = REPO / "charts/tenantdb/examples/mysqldatabase-caller-role.yaml"
NS = "bloodraven"
GROUP = "main"
API = ("shipstream.io", "v1alpha1", NS, "mysqldatabases")
GROUPS = ("shipstream.io", "v1alpha1", NS, "mysqlfailovergroups")


@pytest.fixture
def platform_options(mysql_group: MysqlGroup) -> dict[str, Any]:
    return {"mysql_group": mysql_group, "dead_group": True}


class Tenants:
    """The caller's view (the example Role only) and the platform's, on one stack."""

    def __init__(self, stack: Stack, group: MysqlGroup) -> None:
        self.stack = stack
        self.group = group
        self.suffix = stack.suffix.replace("-", "")
        cluster = stack.platform.cluster()
        for document in yaml.safe_load_all(CALLER_ROLE.read_text()):
            plural = "roles" if document["kind"] == "Role" else "rolebindings"
            cluster.apply(f"{plural}.rbac.authorization.k8s.io", document, NS, manager="test")
        cluster.apply(
            "serviceaccounts",
            {
                "apiVersion": "v1",
                "kind": "ServiceAccount",
                "metadata": {"name": "tenant-provisioner", "namespace": NS},
            },
            NS,
            manager="test",
        )
        token = cluster.issue_token(NS, "tenant-provisioner")
        server = stack.platform.endpoints["management"]
        config = k8s.Configuration(host=server.url)
        config.api_key = {"authorization": f"Bearer {token}"}
        if server.ca_pem:
            ca = stack.logs.parent / "management-ca.crt"
            ca.write_text(server.ca_pem)
            config.ssl_ca_cert = str(ca)
        self.api = k8s.ApiClient(config)
        self.caller = k8s.CustomObjectsApi(self.api)

    def close(self) -> None:
        self.api.close()

    # -- names and objects -------------------------------------------------------------------

    def name(self, base: str) -> str:
        return f"{base}_{self.suffix}"

    def owner_secret(self, name: str, username: str, password: str) -> None:
        """Write an owner Secret as the platform (ESO) would; the caller cannot."""
        data = {"username": username, "password": password}
        self.stack.platform.cluster().apply(
            "secrets",
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": name, "namespace": NS},
                "type": "Opaque",
                "data": {k: base64.b64encode(v.encode()).decode() for k, v in data.items()},
            },
            NS,
            manager="external-secrets",
        )

    def order(
        self,
        name: str,
        database: str,
        secret: str,
        grants: tuple[tuple[str, list[str]], ...] = (),
        **spec: Any,
    ) -> dict[str, Any]:
        body = {
            "apiVersion": "shipstream.io/v1alpha1",
            "kind": "MysqlDatabase",
            "metadata": {"name": name, "namespace": NS},
            "spec": {
                "groupRef": {"name": GROUP},
                "databaseName": database,
                "owner": {"secretName": secret},
                "grants": [{"username": u, "privileges": p} for u, p in grants],
                **spec,
            },
        }
        created: dict[str, Any] = self.caller.create_namespaced_custom_object(*API, body)
        return created

    def get(self, name: str) -> dict[str, Any] | None:
        try:
            found: dict[str, Any] = self.caller.get_namespaced_custom_object(*API, name)
        except k8s.ApiException as error:
            if error.status == 404:
                return None
            raise
        return found

    def patch(self, name: str, patch: dict[str, Any]) -> None:
        self.caller.patch_namespaced_custom_object(*API, name, patch)

    def delete(self, name: str) -> None:
        self.caller.delete_namespaced_custom_object(*API, name)

    def status(self, name: str) -> dict[str, Any]:
        return (self.get(name) or {}).get("status") or {}

    def ready(self, name: str) -> dict[str, Any]:
        return self.condition(name, "DatabaseReconciled")

    def condition(self, name: str, reason: str, seconds: float = 40) -> dict[str, Any]:
        def reached() -> dict[str, Any] | None:
            status = self.status(name)
            conditions = status.get("conditions") or ()
            ready: dict[str, Any] = next((c for c in conditions if c["type"] == "Ready"), {})
            return status if ready.get("reason") == reason else None

        found: dict[str, Any] = wait_for(
            reached, seconds, f"{name} Ready reason {reason}; last status {self.status(name)}"
        )
        return found

    def come_back_now(self, name: str, within: tuple[float, float]) -> None:
        """Check the order's last pass asked to come back ``within`` (seconds from now, low and
        high), then fast-forward that come-back to now, so the test need not wait it out.

        Only once no pass is in flight: a pass that completes replaces the order's come-backs.
        Another pass may have taken the order on meanwhile (an event during the pass, or a
        peer's wake on its group); then the order is no longer Pending (or Deleting) and nothing
        is left to fast-forward. An order still waiting that asked for no come-back fails.
        """
        key = str(IDENTITY.key(NS, name))
        client = redis.Redis.from_url(REDIS_URL)
        try:
            wait_for(lambda: order_quiet(self.stack, client, key), 20, f"{name} to be quiet")
            due = client.zscore(f"{self.stack.prefix}due", key)
            if due is None:
                status = self.status(name)
                waiting = status.get("phase") in ("Pending", "Deleting")
                assert not waiting, f"{name} is {status['phase']} and asked for no come-back"
                return
            ahead = due / 1000 - time.time()
            low, high = within
            assert low - 2 <= ahead <= high, f"{name} comes back in {ahead:.0f} s"
            client.zadd(f"{self.stack.prefix}due", {key: 0})
        finally:
            client.close()

    def events(self, name: str) -> list[str]:
        core = k8s.CoreV1Api(self.stack.kube().api)
        listed = core.list_namespaced_event(NS, field_selector=f"involvedObject.name={name}")
        return [e.reason for e in listed.items]

    # -- the servers -------------------------------------------------------------------------

    def root(self, site: str | None = None) -> Any:
        return self.group.connect(site or self.group.primary)

    def statements(self, *, writes_only: bool = False, site: str | None = None) -> int:
        """Statements tenantdb's admin account sent to a site (the primary) so far.

        ``writes_only`` leaves out the read-only ones (SELECT, SHOW, SET of a session).
        """
        user = self.group.account("operator").username
        pattern = "^[[:space:]]*(SELECT|SHOW|SET)" if writes_only else "^$"
        with self.root(site) as conn, conn.cursor() as cur:
            cur.execute(
                "SELECT COUNT(*) FROM mysql.general_log WHERE command_type = 'Query'"
                " AND user_host LIKE %s AND argument NOT RLIKE %s",
                (f"{user}[{user}]%", pattern),
            )
            row = cur.fetchone()
        return int(row[0]) if row else 0

    def sent_since(self, count: int, site: str | None = None) -> list[str]:
        """The statements tenantdb's admin account sent after the first ``count`` (for a
        failure message)."""
        user = self.group.account("operator").username
        with self.root(site) as conn, conn.cursor() as cur:
            cur.execute(
                "SELECT argument FROM mysql.general_log WHERE command_type = 'Query'"
                " AND user_host LIKE %s ORDER BY event_time LIMIT 1000 OFFSET %s",
                (f"{user}[{user}]%", count),
            )
            return [str(row[0])[:120] for row in cur.fetchall()]

    def errors(self, sub_reconciler: str) -> float:
        """The errors the workers counted for a MysqlDatabase chain (the error alert's metric)."""
        return sum(
            self.stack.counter(
                worker, "c5c3_operator_reconcile_errors_total", sub_reconciler=sub_reconciler
            )
            for worker in ("worker-1", "worker-2")
        )

    def writes(self, site: str | None = None) -> int:
        """Writing statements tenantdb's admin account sent to a site (the primary) so far."""
        return self.statements(writes_only=True, site=site)

    def logs_in(self, user: str, password: str, site: str | None = None) -> bool:
        try:
            self.group.connect(
                site or self.group.primary, user, password.encode(), connect_timeout=2
            ).close()
        except pymysql.err.OperationalError:
            return False
        return True

    def schema_exists(self, name: str, site: str | None = None) -> bool:
        with self.root(site) as conn, conn.cursor() as cur:
            cur.execute("SELECT 1 FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = %s", (name,))
            return cur.fetchone() is not None

    def user_exists(self, name: str, site: str | None = None) -> bool:
        with self.root(site) as conn, conn.cursor() as cur:
            cur.execute("SELECT 1 FROM mysql.user WHERE User = %s", (name,))
            return cur.fetchone() is not None

    def grants(self, user: str) -> set[str]:
        with self.root() as conn, conn.cursor() as cur:
            cur.execute(f"SHOW GRANTS FOR '{user}'@'%'")
            return {row[0] for row in cur.fetchall() if "USAGE" not in row[0]}

    def as_user(self, user: str, password: str, statement: str) -> int | None:
        """Run one statement as a tenant account on the primary: the server's error number, or
        None when it ran."""
        with self.group.connect(self.group.primary, user, password.encode()) as conn:
            try:
                with conn.cursor() as cur:
                    cur.execute(statement)
            except pymysql.err.MySQLError as error:
                return int(error.args[0])
        return None

    def sql(self, statement: str, site: str | None = None) -> None:
        with self.root(site) as conn, conn.cursor() as cur:
            cur.execute(statement)

    def set_group_status(self, status: dict[str, Any]) -> None:
        self.stack.platform.cluster().patch(
            "mysqlfailovergroups.shipstream.io",
            GROUP,
            {"status": status},
            NS,
            subresource="status",
            manager="bloodraven",
        )


@pytest.fixture
def tenants(stack: Stack, mysql_group: MysqlGroup) -> Iterator[Tenants]:
    """The caller and the servers of one stack; the tenants' schemas and users dropped after."""
    for site in mysql_group.sites:
        with mysql_group.connect(site) as conn, conn.cursor() as cur:
            cur.execute("SET GLOBAL log_output = 'TABLE'")
            cur.execute("SET GLOBAL general_log = 1")
    made = Tenants(stack, mysql_group)
    try:
        yield made
    finally:
        made.close()
        mysql_group.drop_tenant_objects()


DENIED = (1044, 1142)
"""Access denied to a database, and to a table: what the server answers outside a grant."""


def literal(db: str) -> str:
    """A schema name as the server spells a grant on exactly that schema (wildcards escaped)."""
    return db.replace("_", "\\_")


def order_with_grant(tenants: Tenants, base: str = "acme") -> tuple[str, str, str, str]:
    """A Ready order (owner + a grant for an existing user); its name, db, owner, grantee."""
    db, owner, grantee = (
        tenants.name(f"{base}_wms"),
        tenants.name(f"{base}_app"),
        "maester_" + tenants.suffix,
    )
    tenants.sql(f"CREATE USER '{grantee}'@'%' IDENTIFIED BY 'maester-pw'")
    tenants.owner_secret(f"{base}-owner", owner, "first-pw")
    name = f"tenant-{base}"
    tenants.order(name, db, f"{base}-owner", grants=((grantee, ["SELECT", "DELETE"]),))
    tenants.ready(name)
    return name, db, owner, grantee
