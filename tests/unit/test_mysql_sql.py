"""The SQL of a MysqlDatabase, pinned in both dialects, and names fuzzed before they reach it."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tenantdb.core.mysqldatabase import sql
from tenantdb.core.mysqldatabase.sql import Dialect, detect_dialect
from tenantdb.core.mysqldatabase.validation import (
    IDENTIFIER,
    USERNAME,
    InvalidSpecError,
    escape_schema_pattern,
)

MYSQL, MARIADB = Dialect.MYSQL, Dialect.MARIADB


def shown(statement: sql.Statement) -> str:
    """The statement as the server receives it with ``?`` for each bound value."""
    return statement.template % tuple("?" for _ in statement.params)


@pytest.mark.parametrize(
    ("version", "dialect"),
    [
        ("10.11.19-MariaDB-0+deb12u1", MARIADB),
        ("11.4.2-MariaDB", MARIADB),
        ("8.0.36", MYSQL),
        ("9.7.0-commercial", MYSQL),
    ],
)
def test_the_dialect_is_read_from_the_version(version: str, dialect: Dialect) -> None:
    assert detect_dialect(version) is dialect


def test_schema_statements_carry_their_defaults() -> None:
    create = sql.create_database("acme_wms", "utf8mb4", "utf8mb4_unicode_ci")
    assert shown(create) == (
        "CREATE DATABASE IF NOT EXISTS `acme_wms` CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci"
    )
    alter = sql.alter_database("acme_wms", "utf8mb3", "utf8mb3_general_ci")
    assert (
        shown(alter) == "ALTER DATABASE `acme_wms` CHARACTER SET utf8mb3 COLLATE utf8mb3_general_ci"
    )
    assert shown(sql.drop_database("acme_wms")) == "DROP DATABASE IF EXISTS `acme_wms`"


def test_a_password_is_a_bound_value_and_the_statement_is_never_shown() -> None:
    create = sql.create_user("acme_app", "p'; DROP DATABASE x; --")
    assert create.template == "CREATE USER IF NOT EXISTS 'acme_app'@'%%' IDENTIFIED BY %s"
    assert create.params == ("p'; DROP DATABASE x; --",)
    assert create.secret
    assert create.shown == "credential statement"
    alter = sql.alter_user("acme_app", "s3cr3t")
    assert shown(alter) == "ALTER USER 'acme_app'@'%' IDENTIFIED BY ?"
    assert "s3cr3t" not in alter.shown


def test_grants_are_emitted_in_canonical_order_and_never_with_grant_option() -> None:
    for dialect in Dialect:
        statement = sql.grant(["DELETE", "SELECT"], "acme_wms", "maester", dialect)
        assert shown(statement) == "GRANT SELECT, DELETE ON `acme\\_wms`.* TO 'maester'@'%'"
        assert "GRANT OPTION" not in statement.template


def test_mysql_keeps_the_tolerant_revoke_and_mariadb_the_plain_one() -> None:
    revoke = ["INSERT", "UPDATE", "ALTER ROUTINE"]
    assert shown(sql.revoke(revoke, "acme_wms", "acme_app", MYSQL)) == (
        "REVOKE IF EXISTS INSERT, UPDATE, ALTER ROUTINE ON `acme\\_wms`.* FROM 'acme_app'@'%'"
        " IGNORE UNKNOWN USER"
    )
    assert shown(sql.revoke(revoke, "acme_wms", "acme_app", MARIADB)) == (
        "REVOKE INSERT, UPDATE, ALTER ROUTINE ON `acme\\_wms`.* FROM 'acme_app'@'%'"
    )
    assert shown(sql.revoke(["ALL PRIVILEGES"], "acme_wms", "maester", MYSQL)) == (
        "REVOKE IF EXISTS ALL PRIVILEGES ON `acme\\_wms`.* FROM 'maester'@'%' IGNORE UNKNOWN USER"
    )


def test_the_observation_reads_the_read_only_flag_each_server_has() -> None:
    assert "super_read_only" in shown(sql.observe_query("acme_wms", [], MYSQL))
    mariadb = shown(sql.observe_query("acme_wms", [], MARIADB))
    assert mariadb.startswith("SELECT 'read_only', @@GLOBAL.read_only, ''")
    assert "super_read_only" not in mariadb


def test_delete_history_is_granted_on_mariadb_only() -> None:
    with pytest.raises(ValueError, match="not a schema privilege"):
        sql.grant(["DELETE HISTORY"], "acme_wms", "acme_app", MYSQL)
    assert "DELETE HISTORY" in shown(sql.grant(["DELETE HISTORY"], "acme_wms", "u", MARIADB))


def test_a_revoke_names_a_privilege_the_server_reported_beyond_the_tables() -> None:
    revoke = sql.revoke(["SELECT", "SHOW CREATE ROUTINE"], "acme_wms", "u", MARIADB)
    assert shown(revoke) == "REVOKE SELECT, SHOW CREATE ROUTINE ON `acme\\_wms`.* FROM 'u'@'%'"
    for bad in ("SELECT; DROP", "select", "A  B", "X'"):
        with pytest.raises(ValueError, match="not a schema privilege"):
            sql.revoke([bad], "acme_wms", "u", MARIADB)


@pytest.mark.parametrize(
    ("name", "pattern"),
    [("acme_wms", "acme\\_wms"), ("plain", "plain"), ("_a_", "\\_a\\_"), ("a__b", "a\\_\\_b")],
)
def test_a_schema_name_is_a_literal_in_every_grant_and_revoke(name: str, pattern: str) -> None:
    assert escape_schema_pattern(name) == pattern
    assert shown(sql.grant(["SELECT"], name, "u", MARIADB)).startswith(
        f"GRANT SELECT ON `{pattern}`.*"
    )
    for dialect in Dialect:
        assert f"ON `{pattern}`.*" in shown(sql.revoke(["SELECT"], name, "u", dialect))
    # The schema itself is named by its name; only the grant grammar reads patterns.
    assert shown(sql.drop_database(name)) == f"DROP DATABASE IF EXISTS `{name}`"
    legacy = sql.revoke_unescaped(["ALL PRIVILEGES"], name, "u", MARIADB)
    assert shown(legacy) == f"REVOKE ALL PRIVILEGES ON `{name}`.* FROM 'u'@'%'"


def test_all_privileges_amounts_to_every_schema_privilege_of_the_dialect() -> None:
    mariadb = sql.concrete(["ALL PRIVILEGES"], MARIADB)
    assert {"CREATE ROUTINE", "ALTER ROUTINE", "CREATE VIEW", "DELETE HISTORY"} <= mariadb
    assert "DELETE HISTORY" not in sql.concrete(["ALL PRIVILEGES"], MYSQL)
    assert sql.concrete(["SELECT"], MARIADB) == {"SELECT"}


def test_the_observation_binds_every_value() -> None:
    query = sql.observe_query("acme_wms", ["acme_app", "maester"], MARIADB)
    assert query.params == (
        "acme_wms",
        "acme_app",
        "maester",
        "acme\\_wms",
        "acme_wms",
        "acme\\_wms",
        "acme_wms",
        "acme_wms",
    )
    assert "acme" not in query.template
    assert shown(query).count("?") == 8


# -- fuzzing: nothing unvalidated reaches a statement ---------------------------------------------

_QUOTED_NAME = re.compile(r"`([^`]*)`")
_ACCOUNT = re.compile(r"'([^']*)'@'%%'")


def _names_in(template: str) -> tuple[list[str], list[str]]:
    return _QUOTED_NAME.findall(template), _ACCOUNT.findall(template)


@given(st.text(max_size=80), st.text(max_size=80), st.text(max_size=80), st.text(max_size=40))
def test_any_name_either_is_refused_or_renders_as_a_valid_identifier(
    database: str, charset: str, collation: str, username: str
) -> None:
    renderers: list[Callable[[], sql.Statement]] = [
        lambda: sql.create_database(database, charset, collation),
        lambda: sql.alter_database(database, charset, collation),
        lambda: sql.drop_database(database),
        lambda: sql.create_user(username, "pw"),
        lambda: sql.alter_user(username, "pw"),
        lambda: sql.drop_user(username),
        lambda: sql.grant(["SELECT"], database, username, MARIADB),
        lambda: sql.revoke(["SELECT"], database, username, MYSQL),
        lambda: sql.observe_query(database, [username], MARIADB),
    ]
    for render in renderers:
        try:
            statement = render()
        except InvalidSpecError:
            continue
        schemas, accounts = _names_in(statement.template)
        grammar = statement.template.startswith(("GRANT", "REVOKE"))
        for schema in schemas:
            # In a grant or revoke every wildcard is escaped; elsewhere a name is a name.
            assert not grammar or not re.search(r"(?<!\\)[_%]", schema)
            assert IDENTIFIER.fullmatch(schema.replace("\\_", "_") if grammar else schema)
        assert all(USERNAME.fullmatch(a) for a in accounts)
        words = statement.template.split()
        if "CHARACTER" in words:
            assert IDENTIFIER.fullmatch(words[words.index("SET") + 1])
            assert IDENTIFIER.fullmatch(words[words.index("COLLATE") + 1])
        # Values never reach the text: only the name parts above are formatted in.
        for value in statement.params:
            if value and not (IDENTIFIER.fullmatch(value) or USERNAME.fullmatch(value)):
                assert value not in statement.template


@given(st.lists(st.text(max_size=30), max_size=5))
def test_privilege_text_only_ever_comes_from_the_fixed_tables(privileges: list[str]) -> None:
    try:
        statement = sql.grant(privileges, "acme_wms", "acme_app", MARIADB)
    except (ValueError, InvalidSpecError):
        return
    text = statement.template.removeprefix("GRANT ").split(" ON ")[0]
    allowed = {"ALL PRIVILEGES", *sql.SCHEMA_PRIVILEGES[MARIADB]}
    assert set(text.split(", ")) <= allowed


@pytest.mark.parametrize(
    ("version", "privileges", "bypassed"),
    [
        pytest.param("10.11.19-MariaDB", "SELECT,SUPER,READ_ONLY ADMIN", True, id="mariadb-all"),
        pytest.param(
            "10.11.19-MariaDB", "SELECT,SUPER,CONNECTION ADMIN", False, id="mariadb-fenced"
        ),
        pytest.param("10.6.12-MariaDB", "SELECT,SUPER", True, id="mariadb-before-10.11-super"),
        pytest.param("11.4.2-MariaDB", "", False, id="mariadb-nothing"),
        pytest.param("8.0.36", "SELECT,SUPER", True, id="mysql-super"),
        pytest.param("8.4.0", "SELECT, CONNECTION_ADMIN", True, id="mysql-connection-admin"),
        pytest.param("9.7.0", "SELECT,INSERT,CREATE USER", False, id="mysql-fenced"),
    ],
)
def test_an_admin_account_that_writes_through_read_only_is_recognised(
    version: str, privileges: str, bypassed: bool
) -> None:
    assert sql.is_read_only_bypassed(version, privileges) is bypassed


MARIADB_DB_COLUMNS = [
    "Select_priv",
    "Insert_priv",
    "Update_priv",
    "Delete_priv",
    "Create_priv",
    "Drop_priv",
    "Grant_priv",
    "References_priv",
    "Index_priv",
    "Alter_priv",
    "Create_tmp_table_priv",
    "Lock_tables_priv",
    "Create_view_priv",
    "Show_view_priv",
    "Create_routine_priv",
    "Alter_routine_priv",
    "Execute_priv",
    "Event_priv",
    "Trigger_priv",
    "Delete_history_priv",
]
"""The privilege columns of ``mysql.db`` on MariaDB 10.11, as ``CONNECTION_CHECK`` reads them."""


def test_the_privilege_columns_name_every_schema_privilege_of_the_server() -> None:
    columns = sql.schema_privilege_columns(MARIADB_DB_COLUMNS)
    assert {name for _, name in columns} == set(sql.SCHEMA_PRIVILEGES[MARIADB])
    newer = sql.schema_privilege_columns([*MARIADB_DB_COLUMNS, "Show_create_routine_priv"])
    assert newer[-1] == ("Show_create_routine_priv", "SHOW CREATE ROUTINE")


@pytest.mark.parametrize(
    "column", ["Grant_priv", "x`; DROP TABLE t; --_priv", "Select", "", "Sel ect_priv", "_priv"]
)
def test_a_column_that_is_no_privilege_is_never_rendered(column: str) -> None:
    assert sql.schema_privilege_columns([column]) == ()
    columns = sql.schema_privilege_columns([column, "Select_priv"])
    query = sql.observe_query("acme_wms", ["acme_app"], MARIADB, columns)
    assert query.template.count("IF(`") == 1, "only Select_priv is read"


def test_the_look_with_the_servers_columns_reads_every_matching_row_of_mysql_db() -> None:
    columns = sql.schema_privilege_columns(MARIADB_DB_COLUMNS)
    query = sql.observe_query("acme_wms", ["acme_app", "maester"], MARIADB, columns)
    assert "information_schema.SCHEMA_PRIVILEGES" not in query.template
    # Every host and every pattern the server would match the schema's name against.
    assert query.template.endswith("FROM mysql.db WHERE %s LIKE Db")
    assert "IF(`Create_tmp_table_priv` = 'Y', 'CREATE TEMPORARY TABLES', NULL)" in query.template
    assert query.params == sql.observe_query("acme_wms", ["acme_app", "maester"], MARIADB).params


@pytest.mark.parametrize(
    ("grant", "expected"),
    [
        (
            sql.ForeignGrant("stranger", "10.0.%", "acme%"),
            "REVOKE ALL PRIVILEGES ON `acme%`.* FROM ?@?",
        ),
        (
            sql.ForeignGrant("app", "%", "acme\\_w%"),
            "REVOKE ALL PRIVILEGES ON `acme\\_w%`.* FROM ?@?",
        ),
    ],
)
def test_a_foreign_row_is_revoked_under_its_own_pattern_with_the_account_bound(
    grant: sql.ForeignGrant, expected: str
) -> None:
    statement = sql.revoke_foreign(grant, MARIADB)
    assert statement.shown == expected
    assert statement.params == (grant.username, grant.host)
    mysql = sql.revoke_foreign(grant, MYSQL).shown
    assert mysql.startswith("REVOKE IF EXISTS ")
    assert mysql.endswith(" IGNORE UNKNOWN USER")


@pytest.mark.parametrize(
    "grant",
    [
        sql.ForeignGrant("x", "%", "acme`; DROP DATABASE acme; --"),
        sql.ForeignGrant("x", "%", "acme wms"),
        sql.ForeignGrant("x'y", "%", "acme%"),
        sql.ForeignGrant("x", "h'ost", "acme%"),
        sql.ForeignGrant("'x'@'y", "", "acme%"),  # a grantee that did not parse
        sql.ForeignGrant("x", "%", ""),
    ],
)
def test_a_foreign_row_that_cannot_be_named_safely_is_never_rendered(
    grant: sql.ForeignGrant,
) -> None:
    assert not sql.revocable(grant)
    with pytest.raises(ValueError, match="never rendered"):
        sql.revoke_foreign(grant, MARIADB)


def test_on_a_server_that_folds_case_the_grant_rows_are_looked_up_in_lower_case() -> None:
    query = sql.observe_query("Acme_wms", ["acme_app"], MARIADB, folds_case=True)
    assert query.params == (
        "Acme_wms",  # the schema lookup folds on such a server by itself
        "acme_app",  # account names are never folded
        "acme\\_wms",
        "acme_wms",
        "acme\\_wms",
        "acme_wms",
        "acme_wms",
    )
    plain = sql.observe_query("Acme_wms", ["acme_app"], MARIADB)
    assert plain.params[2:] == ("Acme\\_wms", "Acme_wms", "Acme\\_wms", "Acme_wms", "Acme_wms")
