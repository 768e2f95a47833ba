"""MysqlDatabase names and privileges: refused before any SQL, quoted by one function."""

from __future__ import annotations

import pytest

from tenantdb.core.mysqldatabase.validation import (
    PRIVILEGES,
    GrantSpec,
    InvalidSpecError,
    canonical_privileges,
    check_database_name,
    check_username,
    quote_account,
    quote_identifier,
    render_privileges,
    validate_spec,
)


@pytest.mark.parametrize(
    "name", ["acme_wms", "A", "x" * 64, "db_2026", "MySQLx", "mysql_", "sys_", "_sys", "my_ql_x"]
)
def test_a_tenant_schema_name_is_accepted(name: str) -> None:
    check_database_name(name)
    assert quote_identifier(name) == f"`{name}`"


@pytest.mark.parametrize(
    ("name", "message"),
    [
        pytest.param("", "spec.databaseName must not be empty", id="empty"),
        pytest.param(
            "acme-wms",
            'spec.databaseName "acme-wms" is not a valid MySQL identifier'
            " (allowed: 1-64 characters matching [A-Za-z0-9_])",
            id="dash",
        ),
        pytest.param("x" * 65, None, id="65-characters"),
        pytest.param("a`b", None, id="backtick"),
        pytest.param("a.b", None, id="dot"),
        pytest.param("a b", None, id="space"),
        pytest.param("acme\n", None, id="trailing-newline"),
        pytest.param(
            "MySQL",
            'spec.databaseName "MySQL" is a MySQL system schema;'
            " tenant databases must use their own schema name",
            id="system-schema-any-case",
        ),
        pytest.param("INFORMATION_SCHEMA", None, id="information-schema"),
        pytest.param("performance_schema", None, id="performance-schema"),
        pytest.param("sys", None, id="sys"),
        pytest.param(
            "mysq_",
            'spec.databaseName "mysq_" matches the MySQL system schema "mysql" when read as a'
            " privilege pattern ('_' stands for any character); tenant databases must use a"
            " name of their own",
            id="pattern-of-mysql",
        ),
        pytest.param("_ys", None, id="pattern-of-sys"),
        pytest.param("MY_Q_", None, id="pattern-any-case"),
        pytest.param("information_schem_", None, id="pattern-of-information-schema"),
        pytest.param("performance" + "_" * 7, None, id="pattern-of-performance-schema"),
        pytest.param("_____", None, id="all-wildcards"),
    ],
)
def test_a_schema_name_that_is_not_a_tenants_is_refused(name: str, message: str | None) -> None:
    with pytest.raises(InvalidSpecError) as refused:
        check_database_name(name)
    if message is not None:
        assert str(refused.value) == message


@pytest.mark.parametrize("name", ["acme_app", "_x", "a.b$c-d", "u" * 32, "1user"])
def test_a_username_is_accepted(name: str) -> None:
    check_username("spec.grants[0].username", name)
    assert quote_account(name) == f"'{name}'@'%'"


@pytest.mark.parametrize(
    "name", ["", "u" * 33, ".lead", "-lead", "$lead", "evil'@'%", "a\\b", "a b", "root\n", "ü"]
)
def test_a_username_that_could_break_out_of_its_quotes_is_refused(name: str) -> None:
    with pytest.raises(InvalidSpecError):
        check_username("spec.grants[0].username", name)
    with pytest.raises(InvalidSpecError):
        quote_account(name)


def test_privileges_are_deduplicated_and_emitted_in_canonical_order() -> None:
    got = canonical_privileges("f", ["DELETE", "SELECT", "DELETE", "EXECUTE", "INSERT"])
    assert got == ("SELECT", "INSERT", "DELETE", "EXECUTE")
    assert render_privileges(["SHOW VIEW", "LOCK TABLES"]) == "LOCK TABLES, SHOW VIEW"


@pytest.mark.parametrize(
    ("privileges", "message"),
    [
        pytest.param([], "f must list at least one privilege", id="empty"),
        pytest.param(
            ["select"],
            'f contains "select", which is not in the allowed privilege set'
            f" ({', '.join(PRIVILEGES)})",
            id="lower-case",
        ),
        pytest.param(["SELECT, INSERT"], None, id="two-in-one-string"),
        pytest.param(["GRANT OPTION"], None, id="grant-option"),
        pytest.param(["SUPER"], None, id="super"),
        pytest.param(["FILE"], None, id="file"),
        pytest.param(["CREATE USER"], None, id="create-user"),
        pytest.param(["SYSTEM_VARIABLES_ADMIN"], None, id="admin"),
        pytest.param(
            ["ALL PRIVILEGES", "SELECT"],
            "f must not combine 'ALL PRIVILEGES' with other privileges",
            id="all-combined",
        ),
    ],
)
def test_a_privilege_outside_the_allowlist_is_refused_not_filtered(
    privileges: list[str], message: str | None
) -> None:
    with pytest.raises(InvalidSpecError) as refused:
        canonical_privileges("f", privileges)
    if message is not None:
        assert str(refused.value) == message


def test_grant_option_is_never_an_allowed_privilege() -> None:
    assert not any("GRANT" in p or p.endswith("_ADMIN") for p in PRIVILEGES)
    assert len(PRIVILEGES) == 15


def _spec(**overrides: object) -> dict[str, object]:
    base: dict[str, object] = {
        "database_name": "acme_wms",
        "character_set": None,
        "collation": None,
        "owner_username": "acme_app",
        "owner_privileges": None,
        "grants": [GrantSpec("maester", ("SELECT", "DELETE"))],
    }
    return {**base, **overrides}


def test_a_valid_spec_gets_its_defaults_and_canonical_privileges() -> None:
    valid = validate_spec(**_spec())  # type: ignore[arg-type]
    assert (valid.character_set, valid.collation) == ("utf8mb4", "utf8mb4_unicode_ci")
    assert valid.owner_privileges == ("ALL PRIVILEGES",)
    assert valid.grants == (GrantSpec("maester", ("SELECT", "DELETE")),)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        pytest.param(
            {"database_name": "sys", "owner_username": "bad name"},
            'spec.databaseName "sys" is a MySQL system schema;'
            " tenant databases must use their own schema name",
            id="schema-first",
        ),
        pytest.param(
            {"character_set": "utf8-mb4", "owner_username": "bad name"},
            'spec.characterSet "utf8-mb4" is not a valid MySQL identifier'
            " (allowed: 1-64 characters matching [A-Za-z0-9_])",
            id="charset-before-owner",
        ),
        pytest.param(
            {"owner_username": "bad name"},
            'spec.owner secret username "bad name" is not a valid MySQL username'
            " (allowed: 1-32 characters matching [A-Za-z0-9_][A-Za-z0-9_.$-]*)",
            id="owner-username",
        ),
        pytest.param(
            {"owner_privileges": ["ALL PRIVILEGES", "DROP"]},
            "spec.owner.privileges must not combine 'ALL PRIVILEGES' with other privileges",
            id="owner-privileges",
        ),
        pytest.param(
            {"grants": [GrantSpec("acme_app", ("SELECT",))]},
            'spec.grants[0].username "acme_app" is the owner username;'
            " declare owner privileges via spec.owner.privileges",
            id="grant-to-owner",
        ),
        pytest.param(
            {"grants": [GrantSpec("m", ("SELECT",)), GrantSpec("m", ("DELETE",))]},
            'spec.grants[1].username "m" is listed more than once',
            id="duplicate-grant",
        ),
        pytest.param(
            {"grants": [GrantSpec("m", ("select",))]},
            'spec.grants[0].privileges contains "select", which is not in the allowed'
            f" privilege set ({', '.join(PRIVILEGES)})",
            id="grant-privilege",
        ),
    ],
)
def test_the_first_problem_of_a_spec_is_the_one_reported(
    overrides: dict[str, object], message: str
) -> None:
    with pytest.raises(InvalidSpecError) as refused:
        validate_spec(**_spec(**overrides))  # type: ignore[arg-type]
    assert str(refused.value) == message
