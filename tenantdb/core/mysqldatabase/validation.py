"""What a MysqlDatabase may name, checked before anything reaches SQL, and how names are quoted.

Owns the identifier rules (schema, character set and collation names; usernames), the system
schemas a tenant may not take, the privilege allowlist and its canonical order, the order in
which a spec's problems are reported (the first one wins), and the functions that turn a
validated name into SQL text: ``quote_identifier`` where a name is a name, and
``quote_schema_grant`` where the server reads it as a pattern.

In ``GRANT ... ON `db`.*`` and ``REVOKE``, MySQL and MariaDB read ``_`` and ``%`` in the schema
name as wildcards (LIKE's), backticks or not: a grant on `acme_wms` also covers `acme1wms`, and
one on `mysq_` covers `mysql`, which is every account on the server. Every schema name in a
grant or revoke is therefore escaped (``\\_``, ``\\%``), and the server stores and reports the
escaped text (``mysql.db``, ``information_schema.SCHEMA_PRIVILEGES``). A name that, read as such a
pattern, would match a system schema is refused outright.

Values (passwords, usernames compared in queries) are bound parameters elsewhere; only names
that passed these checks are ever formatted into a statement, and the quoting functions check
again so that nothing unvalidated can be rendered.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

IDENTIFIER = re.compile(r"[A-Za-z0-9_]{1,64}")
USERNAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.$-]{0,31}")
SYSTEM_SCHEMAS = frozenset({"mysql", "sys", "information_schema", "performance_schema"})

ALL_PRIVILEGES = "ALL PRIVILEGES"
PRIVILEGES: tuple[str, ...] = (
    ALL_PRIVILEGES,
    "SELECT",
    "INSERT",
    "UPDATE",
    "DELETE",
    "CREATE",
    "DROP",
    "ALTER",
    "INDEX",
    "REFERENCES",
    "LOCK TABLES",
    "SHOW VIEW",
    "TRIGGER",
    "EVENT",
    "EXECUTE",
)
"""The privileges a MysqlDatabase may grant on its own schema, in the order they are emitted.

GRANT OPTION is not among them and never is: an owner that can grant can escape its schema.
"""

DEFAULT_CHARACTER_SET = "utf8mb4"
DEFAULT_COLLATION = "utf8mb4_unicode_ci"
DEFAULT_OWNER_PRIVILEGES = (ALL_PRIVILEGES,)


class InvalidSpecError(ValueError):
    """A name or privilege list a MysqlDatabase may not use; the message says which and why."""


def _check(field: str, value: str, grammar: re.Pattern[str], what: str, allowed: str) -> None:
    if not value:
        raise InvalidSpecError(f"{field} must not be empty")
    if not grammar.fullmatch(value):
        raise InvalidSpecError(
            f'{field} "{value}" is not a valid MySQL {what} (allowed: {allowed})'
        )


def check_identifier(field: str, value: str) -> None:
    """A schema, character set or collation name: 1-64 characters of [A-Za-z0-9_].

    Raises:
        InvalidSpecError: the value is empty or not such a name.
    """
    _check(field, value, IDENTIFIER, "identifier", "1-64 characters matching [A-Za-z0-9_]")


def _matches_as_pattern(name: str, schema: str) -> bool:
    """Whether ``name``, read as a grant pattern (``_`` any one character), matches ``schema``."""
    return len(name) == len(schema) and all(
        n in ("_", s) for n, s in zip(name.lower(), schema, strict=True)
    )


def check_database_name(value: str) -> None:
    """The schema a tenant orders: an identifier, none of MySQL's own schemas, nor a pattern of one.

    Raises:
        InvalidSpecError: the name is invalid, names a system schema (in any case), or would
            match one if a server read it as a grant pattern.
    """
    check_identifier("spec.databaseName", value)
    if value.lower() in SYSTEM_SCHEMAS:
        raise InvalidSpecError(
            f'spec.databaseName "{value}" is a MySQL system schema;'
            " tenant databases must use their own schema name"
        )
    for schema in sorted(SYSTEM_SCHEMAS):
        if _matches_as_pattern(value, schema):
            raise InvalidSpecError(
                f'spec.databaseName "{value}" matches the MySQL system schema "{schema}" when'
                " read as a privilege pattern ('_' stands for any character);"
                " tenant databases must use a name of their own"
            )


def check_username(field: str, value: str) -> None:
    """A MySQL account name: 1-32 characters, the first of [A-Za-z0-9_], then also . $ -.

    Raises:
        InvalidSpecError: the value is empty or not such a name.
    """
    allowed = "1-32 characters matching [A-Za-z0-9_][A-Za-z0-9_.$-]*"
    _check(field, value, USERNAME, "username", allowed)


def canonical_privileges(field: str, privileges: Sequence[str]) -> tuple[str, ...]:
    """The privileges of an allowed list, without duplicates, in emission order.

    Matching is exact: ``select`` and ``"SELECT, INSERT"`` are not privileges.

    Raises:
        InvalidSpecError: the list is empty, holds an entry outside the allowlist (it is
            refused, never filtered), or combines ALL PRIVILEGES with another privilege.
    """
    if not privileges:
        raise InvalidSpecError(f"{field} must list at least one privilege")
    for privilege in privileges:
        if privilege not in PRIVILEGES:
            allowed = ", ".join(PRIVILEGES)
            raise InvalidSpecError(
                f'{field} contains "{privilege}", which is not in the allowed privilege set'
                f" ({allowed})"
            )
    unique = set(privileges)
    if ALL_PRIVILEGES in unique and len(unique) > 1:
        raise InvalidSpecError(f"{field} must not combine '{ALL_PRIVILEGES}' with other privileges")
    return tuple(p for p in PRIVILEGES if p in unique)


@dataclass(frozen=True, slots=True)
class GrantSpec:
    """One spec.grants[] entry: an existing principal and what it gets on the schema."""

    username: str
    privileges: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class ValidSpec:
    """A spec that passed every check, with defaults applied and privileges canonical."""

    database_name: str
    character_set: str
    collation: str
    owner_username: str
    owner_privileges: tuple[str, ...]
    grants: tuple[GrantSpec, ...]


def validate_spec(
    *,
    database_name: str,
    character_set: str | None,
    collation: str | None,
    owner_username: str,
    owner_privileges: Sequence[str] | None,
    grants: Iterable[GrantSpec],
) -> ValidSpec:
    """Check a spec in the order its problems are reported, and return it made canonical.

    The owner's username comes from its Secret; everything else from the spec.

    Raises:
        InvalidSpecError: the first problem found.
    """
    check_database_name(database_name)
    charset = character_set or DEFAULT_CHARACTER_SET
    collate = collation or DEFAULT_COLLATION
    check_identifier("spec.characterSet", charset)
    check_identifier("spec.collation", collate)
    check_username("spec.owner secret username", owner_username)
    owner = canonical_privileges(
        "spec.owner.privileges", owner_privileges or DEFAULT_OWNER_PRIVILEGES
    )
    checked: list[GrantSpec] = []
    seen: set[str] = set()
    for index, grant in enumerate(grants):
        field = f"spec.grants[{index}].username"
        check_username(field, grant.username)
        if grant.username == owner_username:
            raise InvalidSpecError(
                f'{field} "{grant.username}" is the owner username;'
                " declare owner privileges via spec.owner.privileges"
            )
        if grant.username in seen:
            raise InvalidSpecError(f'{field} "{grant.username}" is listed more than once')
        seen.add(grant.username)
        privileges = canonical_privileges(f"spec.grants[{index}].privileges", grant.privileges)
        checked.append(GrantSpec(grant.username, privileges))
    return ValidSpec(database_name, charset, collate, owner_username, owner, tuple(checked))


def schema_key(name: str) -> str:
    """A schema name as two orders' names are compared: case-insensitively. A server with
    ``lower_case_table_names`` other than 0 (the default on Windows and macOS, and a choice of
    some managed MySQL services) stores and matches schema names in lower case, so two orders
    whose names differ only in case would share one schema there."""
    return name.lower()


def quote_identifier(name: str) -> str:
    """A validated schema, character set or collation name as SQL text: `name`.

    Raises:
        InvalidSpecError: the name is not a valid identifier; nothing is rendered.
    """
    check_identifier("identifier", name)
    return f"`{name}`"


def escape_schema_pattern(name: str) -> str:
    """A validated schema name as the literal pattern a grant names it by: ``_`` and ``%`` escaped.

    This is also the text the server reports for the grant (``mysql.db.Db``,
    ``information_schema.SCHEMA_PRIVILEGES.TABLE_SCHEMA``).

    Raises:
        InvalidSpecError: the name is not a valid identifier; nothing is rendered.
    """
    check_identifier("identifier", name)
    return name.replace("_", "\\_").replace("%", "\\%")


def quote_schema_grant(name: str) -> str:
    """A validated schema name as the SQL text of ``GRANT``/``REVOKE ... ON <here>.*``.

    The grant then covers that one schema and no other whose name the pattern would match.

    Raises:
        InvalidSpecError: the name is not a valid identifier; nothing is rendered.
    """
    return f"`{escape_schema_pattern(name)}`"


def quote_account(username: str) -> str:
    """A validated account on every host as SQL text: 'user'@'%'.

    Raises:
        InvalidSpecError: the username is not valid; nothing is rendered.
    """
    check_username("username", username)
    return f"'{username}'@'%'"


def render_privileges(privileges: Sequence[str]) -> str:
    """An allowed privilege list as the SQL of a GRANT or REVOKE, in emission order.

    Raises:
        InvalidSpecError: the list is not an allowed one.
    """
    return ", ".join(canonical_privileges("privileges", privileges))
