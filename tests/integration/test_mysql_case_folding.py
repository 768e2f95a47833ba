"""A server that folds schema names to lower case (``lower_case_table_names=1``, the default on
Windows and macOS and a choice of some managed MySQL services) keeps its grant rows in lower
case: the apply's look must read them so, or an order whose name holds a capital finds its
grants missing on every drift check and grants them again each time.

A real MariaDB runs with ``--lower-case-table-names=1``; the order is applied and then checked
for drift through tenantdb's own look (``adapters.mysqldatabase.observe``).
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from pathlib import Path

import pymysql
import pytest

from devstack.mysql_group.servers import MariaDBServer
from tenantdb.adapters.groupguard import GroupGuard
from tenantdb.adapters.mysqladmin import AdminLogin, AdminPool, Target
from tenantdb.adapters.mysqldatabase import observe
from tenantdb.core.mysqldatabase.apply import (
    OWNER_PASSWORD,
    ApplyPlan,
    Claims,
    Records,
    plan_apply,
    usernames_to_observe,
)
from tenantdb.core.mysqldatabase.validation import GrantSpec, ValidSpec
from tenantdb.settings import load_settings

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

ADDRESS = "mysql-folding-dc1-internal.bloodraven.svc.cluster.local:3306"
TARGET = Target("bloodraven/folding@uid-1", "dc1", ADDRESS, "mysql-folding-dc1.bloodraven.svc")
ADMIN = AdminLogin("tenantdb_admin", "admin-pw")


@pytest.fixture(scope="module")
def folding(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MariaDBServer]:
    """One MariaDB that folds schema names, with an admin account tenantdb logs in as."""
    server = MariaDBServer.create(
        "dc1",
        tmp_path_factory.mktemp("folding"),
        server_id=1,
        options=("--lower-case-table-names=1",),
    )
    server.start()
    try:
        conn = pymysql.connect(unix_socket=str(server.spec.socket), user="root", autocommit=True)
        with conn, conn.cursor() as cur:
            cur.execute(f"CREATE USER '{ADMIN.user}'@'%' IDENTIFIED BY '{ADMIN.password}'")
            cur.execute(f"GRANT ALL PRIVILEGES ON *.* TO '{ADMIN.user}'@'%' WITH GRANT OPTION")
        yield server
    finally:
        server.stop()


@pytest.fixture
def pool(
    folding: MariaDBServer,
    admin_guard: GroupGuard,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[AdminPool]:
    host, port = folding.address
    path = tmp_path / "services.json"
    path.write_text(json.dumps({ADDRESS: f"{host}:{port}"}))
    monkeypatch.setenv("TENANTDB_ADDRESS_MAP_FILE", str(path))
    monkeypatch.setenv("TENANTDB_MYSQL_PLAINTEXT_GROUPS", "bloodraven/folding")
    load_settings.cache_clear()
    made = AdminPool(admin_guard)
    yield made
    made.close()
    load_settings.cache_clear()


def _apply(pool: AdminPool, spec: ValidSpec, records: Records, *, repair: bool) -> ApplyPlan:
    with pool.session(TARGET, ADMIN) as session:
        assert session.folds_case
        observed = observe(session, spec.database_name, usernames_to_observe(spec, records))
        decided = plan_apply(
            spec,
            records,
            observed,
            dialect=session.dialect,
            group="folding",
            site="dc1",
            claims=Claims(frozenset({"root"})),
            repair=repair,
        )
        assert isinstance(decided, ApplyPlan), decided
        session.execute(decided.statements, {OWNER_PASSWORD: "owner-pw"})
    return decided


def test_an_order_named_with_capitals_stands_still_on_a_server_that_folds_case(
    folding: MariaDBServer, pool: AdminPool
) -> None:
    tag = secrets.token_hex(3)
    owner, grantee = f"Owner_{tag}", f"reader_{tag}"
    conn = pymysql.connect(unix_socket=str(folding.spec.socket), user="root", autocommit=True)
    with conn, conn.cursor() as cur:
        cur.execute(f"CREATE USER '{grantee}'@'%' IDENTIFIED BY 'x'")
    spec = ValidSpec(
        f"Acme_{tag}",
        "utf8mb4",
        "utf8mb4_unicode_ci",
        owner,
        ("ALL PRIVILEGES",),
        (GrantSpec(grantee, ("SELECT",)),),
    )
    first = _apply(pool, spec, Records(), repair=False)
    assert any(s.shown.startswith("CREATE DATABASE") for s in first.statements)
    conn = pymysql.connect(unix_socket=str(folding.spec.socket), user="root")
    with conn, conn.cursor() as cur:
        cur.execute("SELECT Db FROM mysql.db WHERE User = %s", (grantee,))
        assert [row[0] for row in cur.fetchall()] == [f"acme\\_{tag}"]  # kept in lower case
    # The drift check of the unchanged order finds it as the apply left it: no statement.
    applied = Records(True, owner, "", (owner, grantee))
    assert _apply(pool, spec, applied, repair=True).statements == ()
