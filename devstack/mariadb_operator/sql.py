"""The SQL the mariadb-operator stand-in runs on the real MariaDB: schemas, and a health check.

Owns validating schema names, character sets and collations before they reach SQL, quoting them,
and the three statements, as upstream mariadb-operator runs them: a schema lookup, then
`CREATE DATABASE … CHARACTER SET … COLLATE …` only when the schema is absent (an existing one is
left as it is, its character set and collation unchecked; an empty character set or collation
leaves its clause out), and `DROP DATABASE IF EXISTS …`; plus a ping. Values travel as bound
parameters; identifiers only after validation and quoting. It must never log a password.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import pymysql

IDENTIFIER = re.compile(r"^[A-Za-z0-9_]{1,64}$")
_TIMEOUT = 5


class InvalidIdentifierError(ValueError):
    """A name that must not reach SQL."""


@dataclass(frozen=True)
class Server:
    """The real MariaDB every MariaDB CR maps to, and the root login to use on it."""

    host: str = "127.0.0.1"
    port: int = 3306
    user: str = "root"
    password: str = field(default="", repr=False)


def check_identifier(value: str, what: str) -> str:
    """Return `value` if it is a plain identifier of 1 to 64 characters from [A-Za-z0-9_].

    Raises:
        InvalidIdentifierError: It is not.
    """
    if not IDENTIFIER.fullmatch(value):
        raise InvalidIdentifierError(f"invalid {what} {value!r}: must match {IDENTIFIER.pattern}")
    return value


def quote(identifier: str) -> str:
    """Quote a validated identifier with backticks (doubling any backtick, belt and braces)."""
    return "`" + identifier.replace("`", "``") + "`"


def _connect(server: Server) -> Any:
    return pymysql.connect(
        host=server.host,
        port=server.port,
        user=server.user,
        password=server.password,
        autocommit=True,
        connect_timeout=_TIMEOUT,
        read_timeout=_TIMEOUT * 6,
        write_timeout=_TIMEOUT * 6,
        # The MariaDB CR of the devstack asks for no TLS; PyMySQL's default "preferred" TLS
        # would build a new SSLContext (~40 ms) per connect.
        ssl_disabled=True,
    )


def ping(server: Server) -> None:
    """Log in and run `SELECT 1`.

    Raises:
        pymysql.MySQLError: The server does not answer or refuses the login.
    """
    session = _connect(server)
    try:
        with session.cursor() as cursor:
            cursor.execute("SELECT 1")
    finally:
        session.close()


def create_statement(name: str, charset: str, collate: str) -> str:
    """The statement that creates a schema; an empty character set or collation is left out.

    Raises:
        InvalidIdentifierError: A name is not a plain identifier.
    """
    statement = f"CREATE DATABASE {quote(check_identifier(name, 'database name'))}"
    if charset:
        statement += f" CHARACTER SET = {quote(check_identifier(charset, 'character set'))}"
    if collate:
        statement += f" COLLATE = {quote(check_identifier(collate, 'collation'))}"
    return statement


def drop_statement(name: str) -> str:
    """The statement that drops a schema if it exists.

    Raises:
        InvalidIdentifierError: The name is not a plain identifier.
    """
    return f"DROP DATABASE IF EXISTS {quote(check_identifier(name, 'database name'))}"


def _exists(cursor: Any, name: str) -> bool:
    cursor.execute(
        "SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = %s", (name,)
    )
    row = cursor.fetchone()
    return bool(row and row[0])


def schema_exists(server: Server, name: str) -> bool:
    """Report whether a schema exists."""
    session = _connect(server)
    try:
        with session.cursor() as cursor:
            return _exists(cursor, name)
    finally:
        session.close()


def create_schema(server: Server, name: str, charset: str, collate: str) -> bool:
    """Create a schema unless it exists (then nothing is checked or changed); return whether
    this call created it.

    Raises:
        InvalidIdentifierError: A name is not a plain identifier (nothing reaches the server).
        pymysql.MySQLError: The lookup or the statement failed.
    """
    statement = create_statement(name, charset, collate)
    session = _connect(server)
    try:
        with session.cursor() as cursor:
            if _exists(cursor, name):
                return False
            cursor.execute(statement)
    finally:
        session.close()
    return True


def drop_schema(server: Server, name: str) -> None:
    """Drop a schema if it exists.

    Raises:
        InvalidIdentifierError: The name is not a plain identifier.
        pymysql.MySQLError: The statement failed.
    """
    statement = drop_statement(name)
    session = _connect(server)
    try:
        with session.cursor() as cursor:
            cursor.execute(statement)
    finally:
        session.close()
