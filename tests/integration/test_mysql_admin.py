"""The admin connection and the apply it runs, against the real MariaDB.

Each test makes its own schema and accounts (random names) and drops them afterwards.
"""

from __future__ import annotations

import json
import secrets
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pymysql
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from prometheus_client import REGISTRY, generate_latest

from tenantdb.adapters.groupguard import GroupGuard
from tenantdb.adapters.metrics import SQL_OPERATIONS
from tenantdb.adapters.mysqladmin import AdminError, AdminLogin, AdminPool, AdminSession, Target
from tenantdb.core.mysqldatabase import sql
from tenantdb.core.mysqldatabase.apply import (
    OWNER_PASSWORD,
    ApplyPlan,
    Claims,
    Records,
    parse_observation,
    plan_apply,
    render_drop,
    usernames_to_observe,
)
from tenantdb.core.mysqldatabase.gates import GateDecision
from tenantdb.core.mysqldatabase.passes import Gate, plan_refused_revocation
from tenantdb.core.mysqldatabase.reasons import Phase, Reason
from tenantdb.core.mysqldatabase.sql import Dialect
from tenantdb.core.mysqldatabase.teardown import TeardownObservation, plan_teardown
from tenantdb.core.mysqldatabase.validation import GrantSpec, ValidSpec
from tenantdb.settings import load_settings
from tests.support import root_sql, sql_login

ADDRESS = "mysql-main-dc1-internal.bloodraven.svc.cluster.local:3306"
PASSWORDS = ["back\\slash\\", "it's", 'say "hi"', "zürich-日本-ß", "p'; DROP DATABASE x; --"]


@pytest.fixture
def names() -> Iterator[dict[str, str]]:
    """A schema, an owner and an existing grant user of this test's own; dropped afterwards."""
    tag = secrets.token_hex(3)
    made = {"db": f"tdb_{tag}", "owner": f"tdbo_{tag}", "grantee": f"tdbg_{tag}"}
    with root_sql() as conn, conn.cursor() as cur:
        cur.execute(f"CREATE USER '{made['grantee']}'@'%' IDENTIFIED BY 'x'")
    yield made
    with root_sql() as conn, conn.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS `{made['db']}`")
        for user in (made["owner"], f"{made['owner']}2", made["grantee"]):
            cur.execute(f"DROP USER IF EXISTS '{user}'@'%'")


@pytest.fixture
def address_map(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    path = tmp_path / "services.json"
    path.write_text(json.dumps({ADDRESS: "127.0.0.1:3306"}))
    monkeypatch.setenv("TENANTDB_ADDRESS_MAP_FILE", str(path))
    load_settings.cache_clear()
    yield
    load_settings.cache_clear()


@pytest.fixture
def pool(address_map: None, admin_guard: GroupGuard) -> Iterator[AdminPool]:
    made = AdminPool(admin_guard)
    yield made
    made.close()


TARGET = Target("bloodraven/main@uid-1", "dc1", ADDRESS, "mysql-main-dc1.bloodraven.svc")
ROOT = AdminLogin("root", "")


def _spec(names: dict[str, str], privileges: tuple[str, ...], owner: str = "") -> ValidSpec:
    grants = (GrantSpec(names["grantee"], ("SELECT",)),)
    return ValidSpec(
        names["db"], "utf8mb4", "utf8mb4_unicode_ci", owner or names["owner"], privileges, grants
    )


def _apply(
    session: AdminSession, spec: ValidSpec, records: Records, password: str, *, repair: bool = False
) -> ApplyPlan:
    query = sql.observe_query(
        spec.database_name, usernames_to_observe(spec, records), session.dialect
    )
    decided = plan_apply(
        spec,
        records,
        parse_observation(session.query(query)),
        dialect=session.dialect,
        group="main",
        site="dc1",
        claims=Claims(frozenset({"root"})),
        repair=repair,
    )
    assert isinstance(decided, ApplyPlan), decided
    session.execute(decided.statements, {OWNER_PASSWORD: password})
    return decided


def _literal(db: str) -> str:
    """A schema name as the server spells a grant on exactly that schema."""
    return db.replace("_", "\\_")


def _grants(user: str) -> set[str]:
    with root_sql() as conn, conn.cursor() as cur:
        cur.execute(f"SHOW GRANTS FOR '{user}'@'%'")
        return {row[0] for row in cur.fetchall() if "USAGE" not in row[0]}


def _logs_in(user: str, password: str) -> bool:
    try:
        sql_login(user, password.encode()).close()
    except pymysql.err.OperationalError:
        return False
    return True


def _applied(names: dict[str, str]) -> Records:
    return Records(True, names["owner"], "", (names["owner"], names["grantee"]))


def test_the_pool_detects_mariadb_and_reuses_its_connection(pool: AdminPool) -> None:
    with pool.session(TARGET, ROOT) as first:
        assert first.dialect is Dialect.MARIADB
        before = first.query(sql.Statement("SELECT CONNECTION_ID()"))[0][0]
    with pool.session(TARGET, ROOT) as second:
        assert second.query(sql.Statement("SELECT CONNECTION_ID()"))[0][0] == before


@pytest.mark.parametrize("mode", ["", "NO_BACKSLASH_ESCAPES"])
def test_awkward_passwords_work_in_both_escaping_modes(
    pool: AdminPool, names: dict[str, str], mode: str
) -> None:
    spec = _spec(names, ("ALL PRIVILEGES",))
    with pool.session(TARGET, ROOT) as session:
        session.query(sql.Statement("SET SESSION sql_mode = %s", (mode,)))
        _apply(session, spec, Records(), PASSWORDS[0])
        assert _logs_in(names["owner"], PASSWORDS[0])
        for password in PASSWORDS[1:]:
            _apply(session, spec, _applied(names), password)
            assert _logs_in(names["owner"], password), password
        session.query(sql.Statement("SET SESSION sql_mode = DEFAULT"))


def test_narrowing_from_all_privileges_really_narrows(
    pool: AdminPool, names: dict[str, str]
) -> None:
    owner, db = names["owner"], names["db"]
    with pool.session(TARGET, ROOT) as session:
        _apply(session, _spec(names, ("ALL PRIVILEGES",)), Records(), "pw")
        assert _grants(owner) == {f"GRANT ALL PRIVILEGES ON `{_literal(db)}`.* TO `{owner}`@`%`"}
        _apply(session, _spec(names, ("SELECT", "INSERT")), _applied(names), "pw")
    assert _grants(owner) == {f"GRANT SELECT, INSERT ON `{_literal(db)}`.* TO `{owner}`@`%`"}


def test_an_unchanged_server_gets_no_statement_and_drift_is_repaired(
    pool: AdminPool, names: dict[str, str]
) -> None:
    spec = _spec(names, ("ALL PRIVILEGES",))
    with pool.session(TARGET, ROOT) as session:
        _apply(session, spec, Records(), "pw")
    with pool.session(TARGET, ROOT) as session:
        assert _apply(session, spec, _applied(names), "pw", repair=True).statements == ()
        assert session.executed == 0
    with root_sql() as conn, conn.cursor() as cur:
        cur.execute(f"REVOKE SELECT ON `{_literal(names['db'])}`.* FROM '{names['grantee']}'@'%'")  # noqa: S608 - names the test made
        cur.execute(f"DROP DATABASE `{names['db']}`")
    with pool.session(TARGET, ROOT) as session:
        repaired = _apply(session, spec, _applied(names), "pw", repair=True)
    # The server keeps the owner's schema grant rows across DROP DATABASE: only the schema and
    # the revoked grant are sent again.
    assert [s.template.split(" ")[0] for s in repaired.statements] == ["CREATE", "GRANT"]
    assert _grants(names["grantee"]) == {
        f"GRANT SELECT ON `{_literal(names['db'])}`.* TO `{names['grantee']}`@`%`"
    }
    assert _logs_in(names["owner"], "pw")


def _as_user(user: str, password: str, statement: str) -> int | None:
    """Run one statement as ``user``; the server's error number, or None when it ran."""
    conn = pymysql.connect(
        host="127.0.0.1", port=3306, user=user, password=password.encode(), autocommit=True
    )
    try:
        with conn.cursor() as cur:
            cur.execute(statement)
    except pymysql.err.MySQLError as error:
        return int(error.args[0])
    finally:
        conn.close()
    return None


def _visible(user: str, password: str) -> set[str]:
    with sql_login(user, password.encode()) as conn, conn.cursor() as cur:
        cur.execute("SHOW DATABASES")
        return {row[0] for row in cur.fetchall()}


DENIED = (1044, 1142)
"""Access denied to a database, and to a table: what the server answers outside a grant."""


def test_the_owner_of_an_underscore_schema_cannot_reach_its_twins(
    pool: AdminPool, names: dict[str, str]
) -> None:
    owner, db = names["owner"], names["db"]
    twin, new_twin = db.replace("_", "1"), db.replace("_", "2")
    with root_sql() as conn, conn.cursor() as cur:
        cur.execute(f"CREATE DATABASE `{twin}`")
    try:
        with pool.session(TARGET, ROOT) as session:
            _apply(session, _spec(names, ("ALL PRIVILEGES",)), Records(), "pw")
        assert _as_user(owner, "pw", f"CREATE TABLE `{db}`.t (i INT)") is None
        assert _visible(owner, "pw") == {"information_schema", db}
        assert _as_user(owner, "pw", f"CREATE DATABASE `{new_twin}`") in DENIED
        assert _as_user(owner, "pw", f"CREATE TABLE `{twin}`.t (i INT)") in DENIED
        assert _as_user(owner, "pw", f"DROP DATABASE `{twin}`") in DENIED
    finally:
        with root_sql() as conn, conn.cursor() as cur:
            for name in (twin, new_twin):
                cur.execute(f"DROP DATABASE IF EXISTS `{name}`")


def test_a_grant_left_under_the_unescaped_name_is_narrowed_to_the_schema(
    pool: AdminPool, names: dict[str, str]
) -> None:
    owner, db, grantee = names["owner"], names["db"], names["grantee"]
    with pool.session(TARGET, ROOT) as session:
        _apply(session, _spec(names, ("ALL PRIVILEGES",)), Records(), "pw")
    # What an earlier version granted: the name as a pattern, which also matches its twins.
    with root_sql() as conn, conn.cursor() as cur:
        cur.execute(f"REVOKE ALL PRIVILEGES ON `{_literal(db)}`.* FROM '{owner}'@'%'")
        cur.execute(f"REVOKE ALL PRIVILEGES ON `{_literal(db)}`.* FROM '{grantee}'@'%'")
        cur.execute(f"GRANT ALL PRIVILEGES ON `{db}`.* TO '{owner}'@'%'")
        cur.execute(f"GRANT SELECT ON `{db}`.* TO '{grantee}'@'%'")
    assert _as_user(owner, "pw", f"CREATE DATABASE `{db.replace('_', '3')}`") is None
    with root_sql() as conn, conn.cursor() as cur:
        cur.execute(f"DROP DATABASE `{db.replace('_', '3')}`")
    with pool.session(TARGET, ROOT) as session:
        repaired = _apply(
            session, _spec(names, ("ALL PRIVILEGES",)), _applied(names), "pw", repair=True
        )
    assert [s.shown.split(" ON ")[0] for s in repaired.statements] == [
        "GRANT ALL PRIVILEGES",
        "REVOKE ALL PRIVILEGES",
        "GRANT SELECT",
        "REVOKE ALL PRIVILEGES",
    ]
    assert _grants(owner) == {f"GRANT ALL PRIVILEGES ON `{_literal(db)}`.* TO `{owner}`@`%`"}
    assert _grants(grantee) == {f"GRANT SELECT ON `{_literal(db)}`.* TO `{grantee}`@`%`"}
    assert _as_user(owner, "pw", f"CREATE DATABASE `{db.replace('_', '3')}`") in DENIED


@pytest.mark.parametrize("left_on", ["literal", "pattern"])
def test_a_grant_row_a_stranger_holds_on_the_name_dies_before_the_schema_is_born(
    pool: AdminPool, names: dict[str, str], left_on: str
) -> None:
    db = names["db"]
    stranger = f"{names['owner']}2"  # dropped by the fixture
    # What an earlier order of the name (deleted under Retain, its schema dropped by hand) or
    # anyone with GRANT may leave: a mysql.db row that outlives the schema it was made for.
    on = _literal(db) if left_on == "literal" else db
    with root_sql() as conn, conn.cursor() as cur:
        cur.execute(f"CREATE USER '{stranger}'@'%' IDENTIFIED BY 'pw'")
        cur.execute(f"GRANT SELECT, INSERT ON `{on}`.* TO '{stranger}'@'%'")
    assert _grants(stranger)  # the row is there, with no schema yet
    with pool.session(TARGET, ROOT) as session:
        plan = _apply(session, _spec(names, ("ALL PRIVILEGES",)), Records(), "pw")
    assert plan.statements[0].shown.startswith("REVOKE ALL PRIVILEGES")
    assert plan.statements[0].subject == stranger
    assert _as_user(names["owner"], "pw", f"CREATE TABLE `{db}`.t (i INT)") is None
    assert _grants(stranger) == set()
    assert _as_user(stranger, "pw", f"SELECT * FROM `{db}`.t") in DENIED  # noqa: S608
    # One granted out of band later is surplus to the drift check, which revokes it too.
    with root_sql() as conn, conn.cursor() as cur:
        cur.execute(f"GRANT SELECT ON `{_literal(db)}`.* TO '{stranger}'@'%'")
    with pool.session(TARGET, ROOT) as session:
        repaired = _apply(
            session, _spec(names, ("ALL PRIVILEGES",)), _applied(names), "pw", repair=True
        )
    assert [s.subject for s in repaired.statements] == [stranger]
    assert _as_user(stranger, "pw", f"SELECT * FROM `{db}`.t") in DENIED  # noqa: S608


def _grants_at(user: str, host: str) -> set[str]:
    with root_sql() as conn, conn.cursor() as cur:
        cur.execute("SHOW GRANTS FOR %s@%s", (user, host))
        return {row[0] for row in cur.fetchall() if "USAGE" not in row[0]}


def test_grant_rows_on_other_hosts_and_matching_patterns_die_before_the_schema_is_born(
    pool: AdminPool, names: dict[str, str]
) -> None:
    db = names["db"]
    # Two strangers: one on another host with the schema's own name, one on every host with a
    # wildcard that matches it (and would match any schema named like it).
    near, wide = f"{names['owner']}n", f"{names['owner']}w"
    pattern = f"{db[:6]}%"
    with root_sql() as conn, conn.cursor() as cur:
        cur.execute(f"CREATE USER '{near}'@'127.0.0.1' IDENTIFIED BY 'pw'")
        cur.execute(f"GRANT SELECT ON `{_literal(db)}`.* TO '{near}'@'127.0.0.1'")
        cur.execute(f"CREATE USER '{wide}'@'%' IDENTIFIED BY 'pw'")
        cur.execute(f"GRANT SELECT ON `{pattern}`.* TO '{wide}'@'%'")
    try:
        with pool.session(TARGET, ROOT) as session:
            plan = _apply(session, _spec(names, ("ALL PRIVILEGES",)), Records(), "pw")
        revokes = [s for s in plan.statements if s.shown.startswith("REVOKE")]
        assert sorted(s.params for s in revokes) == sorted([(near, "127.0.0.1"), (wide, "%")])
        assert plan.statements.index(revokes[-1]) < next(
            i for i, s in enumerate(plan.statements) if s.shown.startswith("CREATE DATABASE")
        )
        assert _as_user(names["owner"], "pw", f"CREATE TABLE `{db}`.t (i INT)") is None
        assert _grants_at(near, "127.0.0.1") == set()
        assert _grants_at(wide, "%") == set()
        for stranger in (near, wide):
            assert _as_user(stranger, "pw", f"SELECT * FROM `{db}`.t") in DENIED  # noqa: S608
        # A wildcard granted out of band later is revoked by the drift check.
        with root_sql() as conn, conn.cursor() as cur:
            cur.execute(f"GRANT SELECT ON `{pattern}`.* TO '{wide}'@'%'")
        assert _as_user(wide, "pw", f"SELECT * FROM `{db}`.t") is None  # noqa: S608
        with pool.session(TARGET, ROOT) as session:
            repaired = _apply(
                session, _spec(names, ("ALL PRIVILEGES",)), _applied(names), "pw", repair=True
            )
        assert [s.params for s in repaired.statements] == [(wide, "%")]
        assert _as_user(wide, "pw", f"SELECT * FROM `{db}`.t") in DENIED  # noqa: S608
    finally:
        with root_sql() as conn, conn.cursor() as cur:
            cur.execute(f"DROP USER IF EXISTS '{near}'@'127.0.0.1', '{wide}'@'%'")


def test_a_retained_schema_keeps_its_exact_grants_and_loses_the_pattern_ones(
    pool: AdminPool, names: dict[str, str]
) -> None:
    owner, db, grantee = names["owner"], names["db"], names["grantee"]
    twin = db.replace("_", "7")
    with pool.session(TARGET, ROOT) as session:
        _apply(session, _spec(names, ("ALL PRIVILEGES",)), Records(), "pw")
    # What an earlier version granted beside: the name as a pattern, which matches the twin.
    with root_sql() as conn, conn.cursor() as cur:
        cur.execute(f"GRANT ALL PRIVILEGES ON `{db}`.* TO '{owner}'@'%'")
        cur.execute(f"GRANT SELECT ON `{db}`.* TO '{grantee}'@'%'")
    try:
        assert _as_user(owner, "pw", f"CREATE DATABASE `{twin}`") is None
        with root_sql() as conn, conn.cursor() as cur:
            cur.execute(f"DROP DATABASE `{twin}`")
        retained = TeardownObservation(
            policy="Retain",
            database_name=db,
            database_created=True,
            owner_user=owner,
            pending_owner_user="",
            owner_secret="owner",
            grants=(grantee,),
            group_present=True,
            group="main",
            active_site="dc1",
            fence=None,
            reserved=frozenset({"root"}),
        )
        plan = plan_teardown(retained)
        with pool.session(TARGET, ROOT) as session:
            look = sql.observe_query(db, plan.revoke_patterns, session.dialect)
            observed = parse_observation(session.query(look))
            session.execute(render_drop(plan, observed, session.dialect), {})
        # The schema, its owner and their exact grants stay; nothing reaches the twin.
        assert _grants(owner) == {f"GRANT ALL PRIVILEGES ON `{_literal(db)}`.* TO `{owner}`@`%`"}
        assert _grants(grantee) == {f"GRANT SELECT ON `{_literal(db)}`.* TO `{grantee}`@`%`"}
        assert _as_user(owner, "pw", f"CREATE TABLE `{db}`.t (i INT)") is None
        assert _as_user(owner, "pw", f"CREATE DATABASE `{twin}`") in DENIED
    finally:
        with root_sql() as conn, conn.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS `{twin}`")


def test_a_drop_behind_a_tenants_open_transaction_gives_up_in_the_lock_wait_not_hangs(
    pool: AdminPool, names: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TENANTDB_MYSQL_LOCK_WAIT_SECONDS", "1")
    load_settings.cache_clear()
    owner, db = names["owner"], names["db"]
    with pool.session(TARGET, ROOT) as session:
        _apply(session, _spec(names, ("ALL PRIVILEGES",)), Records(), "pw")
    tenant = pymysql.connect(host="127.0.0.1", port=3306, user=owner, password=b"pw")
    try:
        with tenant.cursor() as cur:
            cur.execute(f"CREATE TABLE `{db}`.t (i INT)")
            cur.execute("BEGIN")
            cur.execute(f"SELECT * FROM `{db}`.t")  # noqa: S608 - holds the table's metadata lock
        started = time.monotonic()
        with pytest.raises(AdminError) as failure, pool.session(TARGET, ROOT) as session:
            session.execute([sql.drop_database(db)], {})
        waited = time.monotonic() - started
    finally:
        tenant.close()
    assert failure.value.code == 1205
    assert failure.value.transient
    assert not failure.value.may_have_run  # the server gave it up: the schema is still there
    assert waited < load_settings().mysql_read_timeout_seconds
    with root_sql() as conn, conn.cursor() as cur:
        cur.execute("SELECT 1 FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = %s", (db,))
        assert cur.fetchone() is not None


def test_a_refused_order_of_a_pattern_name_takes_back_what_reaches_the_system_schema(
    pool: AdminPool, names: dict[str, str]
) -> None:
    # An order for `mysq_`, applied before names were checked as patterns: its owner's grant
    # on `mysq_`.* is a grant on `mysql`.*, every account of the server.
    owner = names["owner"]
    with root_sql() as conn, conn.cursor() as cur:
        cur.execute(f"CREATE USER '{owner}'@'%' IDENTIFIED BY 'pw'")
        cur.execute(f"GRANT ALL PRIVILEGES ON `mysq_`.* TO '{owner}'@'%'")
    try:
        assert _as_user(owner, "pw", "SELECT COUNT(*) FROM mysql.global_priv") is None
        order = {
            "metadata": {"name": "legacy", "namespace": "tenant-a"},
            "spec": {"databaseName": "mysq_", "groupRef": {"name": "main"}},
            "status": {"databaseCreated": True, "ownerUser": owner, "appliedGrants": [owner]},
        }
        refused = GateDecision(Phase.FAILED, Reason.INVALID_SPEC, "matches mysql")
        plan = plan_refused_revocation(order, Gate(refused, {"status": {"activeSite": "dc1"}}))
        assert plan is not None
        with pool.session(TARGET, ROOT) as session:
            look = sql.observe_query("mysq_", plan.revoke_patterns, session.dialect)
            observed = parse_observation(session.query(look))
            session.execute(render_drop(plan, observed, session.dialect), {})
        assert _as_user(owner, "pw", "SELECT COUNT(*) FROM mysql.global_priv") in DENIED
        assert _grants(owner) == set()
    finally:
        with root_sql() as conn, conn.cursor() as cur:
            cur.execute(f"DROP USER IF EXISTS '{owner}'@'%'")


_NAMES = st.text(alphabet="ab_", min_size=2, max_size=8).filter(lambda n: "_" in n)


@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(pattern=_NAMES, twin_letter=st.sampled_from("abz"))
def test_any_underscore_name_grants_exactly_its_own_schema(
    pool: AdminPool, pattern: str, twin_letter: str
) -> None:
    tag = secrets.token_hex(2)
    db, user = f"h{tag}{pattern}", f"tdbh_{tag}"
    twin = f"h{tag}{pattern.replace('_', twin_letter)}"
    with root_sql() as conn, conn.cursor() as cur:
        cur.execute(f"CREATE DATABASE `{db}`")
        cur.execute(f"CREATE DATABASE IF NOT EXISTS `{twin}`")
        cur.execute(f"CREATE USER '{user}'@'%' IDENTIFIED BY 'pw'")
    try:
        with pool.session(TARGET, ROOT) as session:
            session.execute([sql.grant(["ALL PRIVILEGES"], db, user, session.dialect)], {})
        assert _visible(user, "pw") == {"information_schema", db}
        assert _as_user(user, "pw", f"CREATE TABLE `{twin}`.t (i INT)") in DENIED
    finally:
        with root_sql() as conn, conn.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS `{db}`")
            cur.execute(f"DROP DATABASE IF EXISTS `{twin}`")
            cur.execute(f"DROP USER IF EXISTS '{user}'@'%'")


def test_a_username_rotation_leaves_the_new_owner_and_drops_the_old(
    pool: AdminPool, names: dict[str, str]
) -> None:
    rotated = f"{names['owner']}2"
    with pool.session(TARGET, ROOT) as session:
        _apply(session, _spec(names, ("ALL PRIVILEGES",)), Records(), "pw")
        _apply(session, _spec(names, ("ALL PRIVILEGES",), owner=rotated), _applied(names), "pw2")
    assert _logs_in(rotated, "pw2")
    assert not _logs_in(names["owner"], "pw")


def test_an_unreachable_group_fails_fast_and_transiently(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, admin_guard: GroupGuard
) -> None:
    path = tmp_path / "services.json"
    path.write_text(json.dumps({ADDRESS: "127.0.0.1:9"}))
    monkeypatch.setenv("TENANTDB_ADDRESS_MAP_FILE", str(path))
    load_settings.cache_clear()
    pool = AdminPool(admin_guard)
    try:
        with pytest.raises(AdminError) as first, pool.session(TARGET, ROOT):
            pass
        assert first.value.transient
        started = time.monotonic()
        with pytest.raises(AdminError) as second, pool.session(TARGET, ROOT):
            pass
        assert time.monotonic() - started < 0.5, "a remembered failure waits no timeout"
        assert second.value.transient
    finally:
        load_settings.cache_clear()


def test_a_refused_login_names_no_password(pool: AdminPool) -> None:
    login = AdminLogin("tdb_nobody", "hunter2-secret", root_password="root-secret-xyz")
    with pytest.raises(AdminError) as failed, pool.session(TARGET, login):
        pass
    text = str(failed.value)
    assert "hunter2-secret" not in text
    assert "root-secret-xyz" not in text
    assert not failed.value.transient


# ---------------------------------------------------------------- request metrics


def _sql_requests() -> dict[str, tuple[float, float]]:
    """Per operation: requests timed, and errors counted."""
    found = {}
    for operation in SQL_OPERATIONS:
        labels = {"operation": operation}
        timed = REGISTRY.get_sample_value("tenantdb_sql_request_duration_seconds_count", labels)
        errors = REGISTRY.get_sample_value("tenantdb_sql_request_errors_total", labels)
        assert timed is not None, f"{operation} is exported before its first request"
        assert errors is not None, f"{operation}'s errors are exported before the first"
        found[operation] = (timed, errors)
    return found


def _sql_moved(before: dict[str, tuple[float, float]]) -> dict[str, tuple[float, float]]:
    after = _sql_requests()
    return {
        op: (after[op][0] - before[op][0], after[op][1] - before[op][1])
        for op in SQL_OPERATIONS
        if after[op] != before[op]
    }


def test_connects_queries_and_statements_are_timed_and_failures_counted(
    pool: AdminPool, names: dict[str, str]
) -> None:
    before = _sql_requests()
    with pool.session(TARGET, ROOT) as session:
        session.query(sql.Statement("SELECT 1"))
        session.execute(
            [
                sql.Statement(f"CREATE DATABASE `{names['db']}`"),
                sql.Statement(f"CREATE TABLE `{names['db']}`.t (id INT)"),
            ],
            {},
        )
        with pytest.raises(AdminError):
            session.execute([sql.Statement(f"CREATE DATABASE `{names['db']}`")], {})
    assert _sql_moved(before) == {"connect": (1, 0), "query": (1, 0), "execute": (3, 1)}
    with pytest.raises(AdminError), pool.session(TARGET, ROOT) as session:
        session.query(sql.Statement("SELECT * FROM no_such_schema_here.t"))
    moved = _sql_moved(before)
    assert moved["query"] == (2, 1)
    assert moved["connect"][1] == 0


def test_a_refused_login_is_a_connect_error_and_no_label_holds_a_password(
    pool: AdminPool,
) -> None:
    before = _sql_requests()
    login = AdminLogin("tdb_nobody", "hunter2-metrics", root_password="")
    with pytest.raises(AdminError), pool.session(TARGET, login):
        pass
    assert _sql_moved(before) == {"connect": (1, 1)}
    page = generate_latest(REGISTRY).decode()
    assert "hunter2-metrics" not in page
    assert "tdb_nobody" not in page


def _kill_when_sleeping(connection_id: int) -> threading.Thread:
    """Kill a connection from the server side once it is inside a statement."""

    def kill() -> None:
        deadline = time.monotonic() + 10
        with root_sql() as conn, conn.cursor() as cur:
            while time.monotonic() < deadline:
                cur.execute(
                    "SELECT 1 FROM information_schema.PROCESSLIST"
                    " WHERE ID = %s AND INFO LIKE 'DO%%'",
                    (connection_id,),
                )
                if cur.fetchone():
                    cur.execute(f"KILL CONNECTION {int(connection_id)}")
                    return
                time.sleep(0.02)

    thread = threading.Thread(target=kill, daemon=True)
    thread.start()
    return thread


def test_a_connection_killed_mid_batch_is_transient_may_have_run_and_never_pooled_again(
    pool: AdminPool, names: dict[str, str]
) -> None:
    batch = [
        sql.create_database(names["db"], "utf8mb4", "utf8mb4_unicode_ci"),
        sql.Statement("DO SLEEP(5)"),
        sql.create_user(names["owner"], OWNER_PASSWORD),
    ]
    # The failure is caught inside the session, as a step that records it does.
    with pool.session(TARGET, ROOT) as session:
        killer = _kill_when_sleeping(session.query(sql.Statement("SELECT CONNECTION_ID()"))[0][0])
        with pytest.raises(AdminError) as failed:
            session.execute(batch, {OWNER_PASSWORD: "pw"})
        killer.join()
    assert failed.value.transient
    assert failed.value.may_have_run
    assert session.executed == 1
    # The next session works on a new connection, not the dead one.
    with pool.session(TARGET, ROOT) as fresh:
        assert fresh.query(sql.Statement("SELECT 1")) == [(1,)]


def test_a_server_error_mid_batch_did_not_run_and_the_connection_is_replaced(
    pool: AdminPool, names: dict[str, str]
) -> None:
    batch = [
        sql.create_database(names["db"], "utf8mb4", "utf8mb4_unicode_ci"),
        # No such account: the server refuses the grant (1133) without running it.
        sql.grant(["SELECT"], names["db"], f"{names['owner']}x", Dialect.MARIADB),
    ]
    with pool.session(TARGET, ROOT) as session:
        before = session.query(sql.Statement("SELECT CONNECTION_ID()"))[0][0]
    with pool.session(TARGET, ROOT) as session, pytest.raises(AdminError) as failed:
        session.execute(batch, {})
    assert not failed.value.transient
    assert not failed.value.may_have_run
    assert session.executed == 1
    with pool.session(TARGET, ROOT) as fresh:
        assert fresh.query(sql.Statement("SELECT CONNECTION_ID()"))[0][0] != before


def test_an_admin_account_that_writes_through_read_only_is_noticed_on_connect(
    pool: AdminPool, names: dict[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    fenced = f"{names['owner']}f"
    with root_sql() as conn, conn.cursor() as cur:
        cur.execute(f"CREATE USER '{fenced}'@'%' IDENTIFIED BY 'pw'")
        cur.execute(f"GRANT ALL PRIVILEGES ON *.* TO '{fenced}'@'%' WITH GRANT OPTION")
        cur.execute(f"REVOKE READ_ONLY ADMIN ON *.* FROM '{fenced}'@'%'")
    try:
        with pool.session(TARGET, ROOT) as session:
            assert session.read_only_bypassed
        assert "can write through read_only on site dc1" in caplog.text
        other = Target("bloodraven/main@uid-2", "dc1", ADDRESS, TARGET.server_name)
        with pool.session(other, AdminLogin(fenced, "pw")) as session:
            assert not session.read_only_bypassed
    finally:
        with root_sql() as conn, conn.cursor() as cur:
            cur.execute(f"DROP USER IF EXISTS '{fenced}'@'%'")


def test_queries_get_the_read_timeout_though_the_handshake_had_the_connect_timeout(
    pool: AdminPool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TENANTDB_MYSQL_CONNECT_TIMEOUT_SECONDS", "1")
    monkeypatch.setenv("TENANTDB_MYSQL_READ_TIMEOUT_SECONDS", "10")
    load_settings.cache_clear()
    with pool.session(TARGET, ROOT) as session:
        assert session.query(sql.Statement("SELECT SLEEP(1.5)")) == [(0,)]


def test_a_pass_that_spent_its_mysql_time_sends_nothing_more(
    pool: AdminPool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TENANTDB_MYSQL_PASS_BUDGET_SECONDS", "1")
    load_settings.cache_clear()
    with pool.session(TARGET, ROOT) as session:
        session.query(sql.Statement("SELECT SLEEP(1.1)"))
        with pytest.raises(AdminError) as spent:
            session.execute([sql.Statement("DO 1")], {})
    assert spent.value.transient
    assert "ran out" in str(spent.value)
    assert session.executed == 0


def test_the_look_reads_mysql_db_as_the_server_reports_its_grants(
    pool: AdminPool, names: dict[str, str]
) -> None:
    """The fast look (``mysql.db``) answers what ``SCHEMA_PRIVILEGES`` answers, the rows of other
    hosts and of matching wildcards included."""
    db, owner, grantee = names["db"], names["owner"], names["grantee"]
    literal = _literal(db)
    with root_sql() as conn, conn.cursor() as cur:
        cur.execute(f"CREATE DATABASE `{db}`")
        cur.execute(f"CREATE USER '{owner}'@'%' IDENTIFIED BY 'x'")
        cur.execute(f"CREATE USER '{owner}'@'localhost' IDENTIFIED BY 'x'")
        cur.execute(f"GRANT ALL PRIVILEGES ON `{literal}`.* TO '{owner}'@'%'")
        cur.execute(f"GRANT SELECT, INSERT ON `{literal}`.* TO '{owner}'@'localhost'")
        cur.execute(f"GRANT SELECT, CREATE TEMPORARY TABLES ON `{literal}`.* TO '{grantee}'@'%'")
        cur.execute(f"GRANT INDEX ON `{literal}`.* TO '{grantee}'@'%' WITH GRANT OPTION")
        cur.execute(f"GRANT UPDATE ON `{db}`.* TO '{grantee}'@'%'")  # an earlier version's
        cur.execute(f"GRANT SELECT ON `{db[:6]}%`.* TO '{grantee}'@'%'")  # a wildcard
    try:
        with pool.session(TARGET, ROOT) as session:
            columns = session.privilege_columns
            assert ("Create_tmp_table_priv", "CREATE TEMPORARY TABLES") in columns
            assert "Grant_priv" not in dict(columns)
            users = [owner, grantee]
            fast = sql.observe_query(db, users, session.dialect, columns)
            assert "mysql.db" in fast.template
            slow = sql.observe_query(db, users, session.dialect)
            assert "SCHEMA_PRIVILEGES" in slow.template
            seen = parse_observation(session.query(fast))
            assert seen == parse_observation(session.query(slow))
        assert seen.held[owner] == sql.concrete(["ALL PRIVILEGES"], Dialect.MARIADB)
        assert seen.held[grantee] == {"SELECT", "CREATE TEMPORARY TABLES", "INDEX"}
        assert seen.unescaped == {grantee: frozenset({"UPDATE"})}
        assert seen.foreign == tuple(
            sorted(
                [
                    sql.ForeignGrant(grantee, "%", f"{db[:6]}%"),
                    sql.ForeignGrant(owner, "localhost", literal),
                ],
                key=lambda g: (g.username, g.host),
            )
        )
    finally:
        with root_sql() as conn, conn.cursor() as cur:
            cur.execute(f"DROP USER IF EXISTS '{owner}'@'localhost'")
