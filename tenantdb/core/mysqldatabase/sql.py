"""The SQL a MysqlDatabase pass sends, rendered per server dialect. Pure.

Every statement is a template for PyMySQL's client-side binding: names are validated and quoted
by ``tenantdb.core.mysqldatabase.validation`` (never taken raw from an order), privileges come
from fixed tables, and values (passwords, names compared in queries) are bound parameters, so
the driver escapes them the way the session's sql_mode wants (NO_BACKSLASH_ESCAPES included).
A template's literal ``%`` is written ``%%``. A statement that carries a password is marked
``secret`` and is never shown: its label names the order and says "credential statement".

Dialects differ where the servers do. MySQL (8.0.30 and later) has ``REVOKE IF EXISTS ...
IGNORE UNKNOWN USER`` and ``super_read_only``; MariaDB has neither, so on MariaDB a revoke is
only issued for privileges the account is seen to hold, and the read-only check reads
``read_only``. Both dialects narrow for real: the privileges a schema-level ALL PRIVILEGES
confers beyond the allowlist (CREATE ROUTINE, ALTER ROUTINE, CREATE VIEW, CREATE TEMPORARY
TABLES and, on MariaDB, DELETE HISTORY) are revoked when an order narrows away from it.

A grant or revoke names its schema by the escaped pattern (``validation.quote_schema_grant``),
so it confers nothing on another schema. ``revoke_unescaped`` is the one exception: it removes
the grant row an earlier version of tenantdb wrote under the unescaped name, once the escaped
grant is in place.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum

from tenantdb.core.mysqldatabase.validation import (
    ALL_PRIVILEGES,
    PRIVILEGES,
    check_identifier,
    check_username,
    escape_schema_pattern,
    quote_identifier,
    quote_schema_grant,
)

ANY_HOST = "%"


class Dialect(StrEnum):
    """The server family a group runs, read from ``SELECT VERSION()``."""

    MYSQL = "mysql"
    MARIADB = "mariadb"


def detect_dialect(version: str) -> Dialect:
    """The dialect of a server from its version string (MariaDB says so in it)."""
    return Dialect.MARIADB if "mariadb" in version.lower() else Dialect.MYSQL


_MYSQL_SCHEMA_PRIVILEGES = (
    "SELECT",
    "INSERT",
    "UPDATE",
    "DELETE",
    "CREATE",
    "DROP",
    "REFERENCES",
    "INDEX",
    "ALTER",
    "CREATE TEMPORARY TABLES",
    "LOCK TABLES",
    "EXECUTE",
    "CREATE VIEW",
    "SHOW VIEW",
    "CREATE ROUTINE",
    "ALTER ROUTINE",
    "EVENT",
    "TRIGGER",
)
SCHEMA_PRIVILEGES: dict[Dialect, tuple[str, ...]] = {
    Dialect.MYSQL: _MYSQL_SCHEMA_PRIVILEGES,
    Dialect.MARIADB: (*_MYSQL_SCHEMA_PRIVILEGES, "DELETE HISTORY"),
}
"""Every privilege a schema-level ALL PRIVILEGES confers, per dialect, in emission order."""


SCHEMA_SUBJECT = "`schema`"
"""The subject of the statements on the schema itself (a backtick is in no username)."""


@dataclass(frozen=True, slots=True)
class Statement:
    """One statement: a template, its bound values, and what it is called in an error."""

    template: str
    params: tuple[str, ...] = ()
    secret: bool = False
    """Whether a bound value is a password: the statement is then never shown."""
    subject: str = ""
    """What the statement writes: ``SCHEMA_SUBJECT``, a username, or nothing (a query)."""

    @property
    def shown(self) -> str:
        """The statement as a log line or an error may show it: values as ``?``."""
        if self.secret:
            return "credential statement"
        text = self.template % tuple("?" for _ in self.params)
        return text if len(text) <= 80 else f"{text[:80]}..."


def account(username: str) -> str:
    """A validated account on every host, as template text: 'user'@'%%'.

    Raises:
        InvalidSpecError: the username is not valid; nothing is rendered.
    """
    check_username("username", username)
    return f"'{username}'@'%%'"


def grantee(username: str) -> str:
    """An account as information_schema spells GRANTEE (a value, bound, never rendered)."""
    return f"'{username}'@'{ANY_HOST}'"


_PRIVILEGE_WORDS = re.compile(r"[A-Z]+(?: [A-Z]+)*")


def _privileges(privileges: Iterable[str], dialect: Dialect, *, reported: bool = False) -> str:
    """Privilege names as SQL text, in emission order.

    A grant names only privileges of the dialect's table. A revoke may also name a privilege
    the server reported holding that the table does not know (a newer server's), provided it
    reads as a privilege name (upper-case words), so narrowing leaves nothing behind.
    """
    wanted = set(privileges)
    if not wanted:
        raise ValueError("a GRANT or REVOKE needs at least one privilege")
    known = (ALL_PRIVILEGES, *SCHEMA_PRIVILEGES[dialect])
    unknown = wanted.difference(known)
    if unknown and (not reported or not all(_PRIVILEGE_WORDS.fullmatch(p) for p in unknown)):
        raise ValueError(f"not a schema privilege: {sorted(unknown)}")
    return ", ".join([*(p for p in known if p in wanted), *sorted(unknown)])


def _defaults(database: str, character_set: str, collation: str) -> str:
    check_identifier("character set", character_set)
    check_identifier("collation", collation)
    return f"{quote_identifier(database)} CHARACTER SET {character_set} COLLATE {collation}"


def create_database(database: str, character_set: str, collation: str) -> Statement:
    """Create the schema (only ever issued once the preflight saw it absent)."""
    return Statement(
        f"CREATE DATABASE IF NOT EXISTS {_defaults(database, character_set, collation)}",
        subject=SCHEMA_SUBJECT,
    )


def alter_database(database: str, character_set: str, collation: str) -> Statement:
    """Move the schema's defaults (existing tables keep theirs)."""
    return Statement(
        f"ALTER DATABASE {_defaults(database, character_set, collation)}", subject=SCHEMA_SUBJECT
    )


def create_user(username: str, password: str) -> Statement:
    """Create an account with its password (a bound value)."""
    return Statement(
        f"CREATE USER IF NOT EXISTS {account(username)} IDENTIFIED BY %s",
        (password,),
        True,
        username,
    )


def alter_user(username: str, password: str) -> Statement:
    """Set an account's password from its Secret: the whole of a password rotation."""
    return Statement(
        f"ALTER USER {account(username)} IDENTIFIED BY %s", (password,), True, username
    )


def grant(privileges: Sequence[str], database: str, username: str, dialect: Dialect) -> Statement:
    """Grant privileges on the schema only (its name escaped); never WITH GRANT OPTION."""
    text = _privileges(privileges, dialect)
    return Statement(
        f"GRANT {text} ON {quote_schema_grant(database)}.* TO {account(username)}",
        subject=username,
    )


def revoke(privileges: Sequence[str], database: str, username: str, dialect: Dialect) -> Statement:
    """Revoke privileges on the schema; MySQL's form tolerates a missing grant or account.

    On MariaDB the caller issues it only for privileges it saw the account hold.
    """
    return _revoke(privileges, quote_schema_grant(database), username, dialect)


def revoke_unescaped(
    privileges: Sequence[str], database: str, username: str, dialect: Dialect
) -> Statement:
    """Revoke the grant row held under the schema's unescaped name (a wildcard pattern).

    Only for a row the observation saw; issued after the escaped grant that replaces it.
    """
    return _revoke(privileges, quote_identifier(database), username, dialect)


def _revoke(privileges: Sequence[str], db: str, username: str, dialect: Dialect) -> Statement:
    text = _privileges(privileges, dialect, reported=True)
    who = account(username)
    if dialect is Dialect.MYSQL:
        return Statement(
            f"REVOKE IF EXISTS {text} ON {db}.* FROM {who} IGNORE UNKNOWN USER", subject=username
        )
    return Statement(f"REVOKE {text} ON {db}.* FROM {who}", subject=username)


@dataclass(frozen=True, slots=True)
class ForeignGrant:
    """A grant row on the schema that is no order's own: an account on another host than '%',
    or a database pattern (``acme%``) that matches the schema without being its name."""

    username: str
    host: str
    pattern: str
    """The database pattern as the server stores it (``acme\\_wms``, ``acme%``)."""


_FOREIGN_HOST = re.compile(r"[A-Za-z0-9._%:/-]{1,255}")
_FOREIGN_USER = re.compile(r"[A-Za-z0-9_.$-]{1,80}")
_FOREIGN_PATTERN = re.compile(r"[A-Za-z0-9_%$\\-]{1,128}")


def revocable(grant: ForeignGrant) -> bool:
    """Whether a foreign grant row can be named in a REVOKE as the server holds it: its user,
    host and pattern are of the characters the revoke renders safely."""
    return bool(
        _FOREIGN_USER.fullmatch(grant.username)
        and _FOREIGN_HOST.fullmatch(grant.host)
        and _FOREIGN_PATTERN.fullmatch(grant.pattern)
    )


def revoke_foreign(grant: ForeignGrant, dialect: Dialect) -> Statement:
    """Revoke everything a foreign grant row gives, under the pattern as the server stores it.

    The account is bound (its host may hold ``%``); the pattern, checked by ``revocable``, is
    the one rendered part.

    Raises:
        ValueError: the row is not ``revocable``; nothing is rendered.
    """
    if not revocable(grant):
        raise ValueError("a grant row that cannot be named safely is never rendered")
    text = _privileges([ALL_PRIVILEGES], dialect, reported=True)
    target = f"`{grant.pattern.replace('%', '%%')}`.*"  # a template: % is doubled
    if dialect is Dialect.MYSQL:
        template = f"REVOKE IF EXISTS {text} ON {target} FROM %s@%s IGNORE UNKNOWN USER"
    else:
        template = f"REVOKE {text} ON {target} FROM %s@%s"
    return Statement(template, (grant.username, grant.host), subject=grant.username)


def drop_database(database: str) -> Statement:
    """Drop the schema."""
    return Statement(
        f"DROP DATABASE IF EXISTS {quote_identifier(database)}", subject=SCHEMA_SUBJECT
    )


def drop_user(username: str) -> Statement:
    """Drop an account on every host it was created for."""
    return Statement(f"DROP USER IF EXISTS {account(username)}", subject=username)


_READ_ONLY: dict[Dialect, str] = {
    Dialect.MYSQL: "@@GLOBAL.read_only OR @@GLOBAL.super_read_only",
    Dialect.MARIADB: "@@GLOBAL.read_only",
}


_PRIVILEGE_COLUMN = re.compile(r"[A-Za-z]+(?:_[A-Za-z]+)*_priv")
_COLUMN_PRIVILEGES = {"Create_tmp_table_priv": "CREATE TEMPORARY TABLES"}
"""The one ``mysql.db`` column whose privilege is not its name in upper case, spaced."""


def schema_privilege_columns(columns: Iterable[str]) -> tuple[tuple[str, str], ...]:
    """The ``mysql.db`` columns that hold a schema privilege, each with the privilege's name.

    ``columns`` are the ``*_priv`` columns the server reports (``CONNECTION_CHECK``), so a
    newer server's privilege (MariaDB 11.3's ``Show_create_routine_priv``) is read and can be
    revoked too. GRANT OPTION (``Grant_priv``) is no privilege an order grants; a name that does
    not read as a column of that table is never rendered.
    """
    out: list[tuple[str, str]] = []
    for column in columns:
        if column == "Grant_priv" or not _PRIVILEGE_COLUMN.fullmatch(column):
            continue
        name = _COLUMN_PRIVILEGES.get(column) or column[: -len("_priv")].replace("_", " ").upper()
        out.append((column, name))
    return tuple(out)


def _held_on_schema(columns: tuple[tuple[str, str], ...]) -> str:
    """The part of the look that reads every grant row on the schema: any account, any host,
    whose database pattern matches the schema's name as the server matches it (``LIKE``:
    ``_`` any one character, ``%`` any run, a backslash escaping), its exact names included.

    Rows of host '%' on the schema's escaped name are ``privilege``, on its unescaped name
    ``unescaped`` (a pattern an earlier version granted), each with the grantee's privileges
    comma-separated (one a row from ``information_schema``); every other row is ``foreign``,
    with the database pattern as the server stores it. From ``mysql.db`` when the server's
    privilege columns are known: a scan of that table is cheaper than
    ``information_schema.SCHEMA_PRIVILEGES``, which builds a row per privilege of every schema
    grant on the server before it filters.
    """
    if not columns:
        any_host = "RIGHT(GRANTEE, 4) = '@''%%'''"
        return (
            f" UNION ALL SELECT IF(NOT {any_host}, 'foreign',"  # noqa: S608 - fixed text only
            " IF(TABLE_SCHEMA = %s, 'privilege', IF(TABLE_SCHEMA = %s, 'unescaped', 'foreign'))),"
            f" GRANTEE, IF({any_host} AND TABLE_SCHEMA IN (%s, %s), PRIVILEGE_TYPE, TABLE_SCHEMA)"
            " FROM information_schema.SCHEMA_PRIVILEGES WHERE %s LIKE TABLE_SCHEMA"
        )
    held = ", ".join(f"IF(`{column}` = 'Y', '{name}', NULL)" for column, name in columns)
    # Only validated column names and the privilege names made from them are formatted in.
    return (
        " UNION ALL SELECT IF(Host <> '%%', 'foreign',"  # noqa: S608
        " IF(Db = %s, 'privilege', IF(Db = %s, 'unescaped', 'foreign'))),"
        " CONCAT(QUOTE(User), '@', QUOTE(Host)),"
        f" IF(Host = '%%' AND Db IN (%s, %s), CONCAT_WS(',', {held}), Db)"
        " FROM mysql.db WHERE %s LIKE Db"
    )


def observe_query(
    database: str,
    usernames: Sequence[str],
    dialect: Dialect,
    privilege_columns: tuple[tuple[str, str], ...] = (),
    *,
    folds_case: bool = False,
) -> Statement:
    """One read-only query for all a pass needs to know about the server, the schema and accounts.

    Rows are ``(what, a, b)``: ``('read_only', 0 or 1, '')`` (whether the server refuses
    ordinary writes: a replica, or a primary being demoted), ``('schema', character set,
    collation)`` when the schema exists, ``('user', name, '')`` for each of ``usernames`` that
    exists on host '%', ``('privilege', grantee, privileges)`` for what a grantee on host '%'
    holds on the schema's escaped name, ``('unescaped', grantee, privileges)`` for what one
    holds on its unescaped name when the two differ (a grant an earlier version wrote), and
    ``('foreign', grantee, pattern)`` for every other grant row whose database pattern matches
    the schema: another host, or a wildcard (``acme%``) that is not the schema's name. With the
    server's ``privilege_columns`` (``schema_privilege_columns``) a grantee's privileges on one
    name come in one row, comma-separated. On a server that ``folds_case``
    (``lower_case_table_names`` other than 0), which keeps schema names in its grant rows in
    lower case, the name is compared in lower case.
    """
    for name in usernames:
        check_username("username", name)
    names = ", ".join("%s" for _ in usernames) or "NULL"
    pattern = escape_schema_pattern(database)
    # Only %s placeholders and fixed expressions are formatted into the text; every value is bound.
    template = (
        f"SELECT 'read_only', {_READ_ONLY[dialect]}, ''"  # noqa: S608
        " UNION ALL SELECT 'schema', DEFAULT_CHARACTER_SET_NAME, DEFAULT_COLLATION_NAME"
        " FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = %s"
        " UNION ALL SELECT 'user', User, '' FROM mysql.user"
        f" WHERE Host = '%%' AND User IN ({names})"
        f"{_held_on_schema(privilege_columns)}"
    )
    name = database.lower() if folds_case else database
    pattern = pattern.lower() if folds_case else pattern
    held = (pattern, name, pattern, name, name)
    return Statement(template, (database, *usernames, *held))


def session_bounds(lock_wait_seconds: int) -> str:
    """What every admin session sets first: how long a statement may wait for a lock
    (``lock_wait_timeout``; error 1205 when it runs out, and the statement did not run) and, on
    MariaDB only (an executable comment MySQL skips), how long it may run at all
    (``max_statement_time``, 2 s more; error 1969)."""
    wait = int(lock_wait_seconds)
    if wait <= 0:
        raise ValueError("a lock wait is at least one second")
    return f"SET SESSION lock_wait_timeout = {wait} /*M!100108 , max_statement_time = {wait + 2} */"


CONNECTION_CHECK = Statement(
    "SELECT VERSION(), (SELECT GROUP_CONCAT(PRIVILEGE_TYPE) FROM information_schema.USER_PRIVILEGES"
    " WHERE GRANTEE = CONCAT(QUOTE(SUBSTRING_INDEX(CURRENT_USER(), '@', 1)), '@',"
    " QUOTE(SUBSTRING_INDEX(CURRENT_USER(), '@', -1)))),"
    " (SELECT GROUP_CONCAT(COLUMN_NAME ORDER BY ORDINAL_POSITION) FROM information_schema.COLUMNS"
    " WHERE TABLE_SCHEMA = 'mysql' AND TABLE_NAME = 'db' AND RIGHT(COLUMN_NAME, 5) = '_priv'),"
    " @@lower_case_table_names"
)
"""What a new admin connection asks once: the server's version, its own global privileges, the
privilege columns of ``mysql.db`` (``schema_privilege_columns``), and whether it folds schema
names to lower case (``lower_case_table_names``)."""


def _version(version: str) -> tuple[int, int]:
    major, _, rest = version.partition(".")
    minor = rest.partition(".")[0]
    return (int(major), int(minor)) if major.isdigit() and minor.isdigit() else (0, 0)


def is_read_only_bypassed(version: str, privileges: str) -> bool:
    """Whether an account with these global privileges can write while the server is read-only.

    Such an account is not fenced by the server: a failover that turns the old primary
    read-only does not stop its writes. MariaDB lets READ_ONLY ADMIN through (and SUPER before
    10.11, which included it); MySQL lets SUPER and CONNECTION_ADMIN through ``read_only``
    (``super_read_only`` stops them too).

    Args:
        version: ``SELECT VERSION()``.
        privileges: the account's global privileges, comma-separated, as
            ``information_schema.USER_PRIVILEGES`` names them.
    """
    held = {p.strip().upper() for p in privileges.split(",") if p.strip()}
    if detect_dialect(version) is Dialect.MARIADB:
        bypass = {"READ_ONLY ADMIN", "READ ONLY ADMIN"}
        if _version(version) < (10, 11):
            bypass.add("SUPER")
        return bool(held & bypass)
    return bool(held & {"SUPER", "CONNECTION_ADMIN"})


_CHARSET_ALIASES = {"utf8": "utf8mb3"}


def normalize_charset(character_set: str) -> str:
    """A character set as the server reports it (``utf8`` is read back as ``utf8mb3``)."""
    name = character_set.lower()
    return _CHARSET_ALIASES.get(name, name)


def normalize_collation(collation: str) -> str:
    """A collation as the server reports it (``utf8_general_ci`` as ``utf8mb3_general_ci``)."""
    name = collation.lower()
    charset, sep, rest = name.partition("_")
    return f"{normalize_charset(charset)}{sep}{rest}" if sep else name


def concrete(privileges: Iterable[str], dialect: Dialect) -> frozenset[str]:
    """The privileges a granted list amounts to on the schema (ALL PRIVILEGES expanded)."""
    wanted = set(privileges)
    if ALL_PRIVILEGES in wanted:
        return frozenset(SCHEMA_PRIVILEGES[dialect])
    return frozenset(wanted)


def in_order(privileges: Iterable[str], dialect: Dialect) -> tuple[str, ...]:
    """Privileges in emission order: the allowlist's, the rest of the dialect's, then others."""
    wanted = set(privileges)
    order = dict.fromkeys((*PRIVILEGES, *SCHEMA_PRIVILEGES[dialect]))
    return (*(p for p in order if p in wanted), *sorted(wanted.difference(order)))
