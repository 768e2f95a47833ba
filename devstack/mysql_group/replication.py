"""The SQL of the devstack's MySQL failover group: its accounts, fencing, GTID waits, replication.

Owns the statements a Bloodraven-like operator runs on the group's servers: creating the
group-level accounts on the primary (so that they replicate), `read_only` on and off, reading
`gtid_binlog_pos` and waiting with `MASTER_GTID_WAIT` until a replica has applied it, pointing a
server at a primary (`CHANGE MASTER TO … MASTER_USE_GTID=slave_pos` after setting its
`gtid_slave_pos` to everything it already holds, so that a demoted primary asks only for what it
lacks), promoting a replica (`STOP SLAVE`, `RESET SLAVE ALL`, `read_only=OFF`), and dropping
what tenants created. Passwords travel as bound parameters; identifiers only after validation.
It must never log a password or a statement that carries one.

The operator and app accounts hold ALL PRIVILEGES ON *.* less READ_ONLY ADMIN: on MariaDB
10.11 that privilege lets a session write through `read_only`, which MySQL's `super_read_only`
forbids, and the fence of a failover must hold for every writer but root (the group's own
controller, which sets and clears the fence, logs in as root). So a replica refuses tenantdb's
writes itself (error 1290), whatever tenantdb checked before sending them. The monitor account gets
SLAVE MONITOR on top of PROCESS and REPLICATION CLIENT, because MariaDB needs it for
`SHOW SLAVE STATUS`, which REPLICATION CLIENT covers on MySQL.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pymysql

REPLICATION_USER = "replicator"
SYSTEM_SCHEMAS = frozenset({"information_schema", "mysql", "performance_schema", "sys"})
SYSTEM_USERS = frozenset({"mariadb.sys", "mysql.sys", "mysql.session", "mysql.infoschema"})
_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,80}$")
_GTID = re.compile(r"^[0-9,\-\s]*$")


@dataclass(frozen=True)
class Account:
    """One group-level account: its role in the group, login, password and global grants."""

    role: str
    username: str
    password: str = field(repr=False)
    grants: str
    revoke: str = ""
    grant_option: bool = False


def new_password() -> str:
    """A random password (URL-safe characters, so it fits a DSN unescaped)."""
    return secrets.token_urlsafe(24)


def group_accounts() -> dict[str, Account]:
    """The group's accounts with fresh random passwords, by role."""
    everything = "ALL PRIVILEGES"
    table = (
        ("root", "root", everything, "", True),
        ("operator", "bloodraven", everything, "READ_ONLY ADMIN", True),
        ("app", "app", everything, "READ_ONLY ADMIN", False),
        ("readonly", "readonly", "SELECT, SHOW VIEW, SHOW DATABASES, PROCESS", "", False),
        ("monitor", "monitor", "PROCESS, REPLICATION CLIENT, SLAVE MONITOR", "", False),
        ("backup", "backup", "SELECT, LOCK TABLES, SHOW VIEW, EVENT, TRIGGER, RELOAD", "", False),
        ("replication", REPLICATION_USER, "REPLICATION SLAVE", "", False),
    )
    return {
        role: Account(role, user, new_password(), grants, revoke, option)
        for role, user, grants, revoke, option in table
    }


def check_name(value: str) -> str:
    """Return a schema or user name that may be quoted into SQL.

    Raises:
        ValueError: It holds characters outside [A-Za-z0-9_.-] or is too long.
    """
    if not _NAME.fullmatch(value):
        raise ValueError(f"refusing the name {value!r} in SQL")
    return value


def _quote(name: str) -> str:
    """Backtick-quote a name the server itself reported (never one a caller passed in)."""
    return "`" + name.replace("`", "``") + "`"


def _execute(conn: Any, statement: str, args: Iterable[Any] | None = None) -> None:
    with conn.cursor() as cursor:
        cursor.execute(statement, tuple(args) if args is not None else None)


def _scalar(conn: Any, statement: str, args: Iterable[Any] | None = None) -> Any:
    with conn.cursor() as cursor:
        cursor.execute(statement, tuple(args) if args is not None else None)
        row = cursor.fetchone()
    return row[0] if row else None


def create_accounts(conn: Any, accounts: Mapping[str, Account]) -> None:
    """Create the group's accounts on host '%' and give root its password everywhere.

    Run on the primary of a fresh group: the statements replicate. The install's passwordless
    root accounts for 127.0.0.1, ::1 and the host name are dropped, so a TCP login as root
    meets root@'%' and its password; root@localhost (the socket) gets the same password.
    """
    root = accounts["root"]
    for host in ("127.0.0.1", "::1"):
        _execute(conn, "DROP USER IF EXISTS 'root'@%s", (host,))
    hostname = _scalar(conn, "SELECT @@hostname")
    if hostname and hostname != "localhost":
        _execute(conn, "DROP USER IF EXISTS 'root'@%s", (str(hostname),))
    for account in accounts.values():
        login = (check_name(account.username), "%")
        secret = (*login, account.password)
        _execute(conn, "CREATE USER IF NOT EXISTS %s@%s IDENTIFIED BY %s", secret)
        _execute(conn, "ALTER USER %s@%s IDENTIFIED BY %s", secret)
        option = " WITH GRANT OPTION" if account.grant_option else ""
        _execute(conn, f"GRANT {account.grants} ON *.* TO %s@%s{option}", login)
        if account.revoke:
            _execute(conn, f"REVOKE {account.revoke} ON *.* FROM %s@%s", login)
    _execute(conn, "ALTER USER 'root'@'localhost' IDENTIFIED BY %s", (root.password,))
    _execute(conn, "FLUSH PRIVILEGES")


# ------------------------------------------------------------ fencing and positions


def set_read_only(conn: Any, on: bool) -> None:
    """Turn `read_only` on (the fence) or off."""
    _execute(conn, f"SET GLOBAL read_only = {'ON' if on else 'OFF'}")


def read_only(conn: Any) -> bool:
    """Whether the server is read-only."""
    return bool(_scalar(conn, "SELECT @@GLOBAL.read_only"))


def binlog_position(conn: Any) -> str:
    """`gtid_binlog_pos`: every transaction in the server's binary log."""
    return str(_scalar(conn, "SELECT @@GLOBAL.gtid_binlog_pos") or "")


def wait_for_position(conn: Any, position: str, timeout: float) -> bool:
    """Wait until the server has applied `position`; False after `timeout` seconds."""
    if not _GTID.fullmatch(position):
        raise ValueError("not a GTID position")
    if not position:
        return True
    result = _scalar(conn, "SELECT MASTER_GTID_WAIT(%s, %s)", (position, float(timeout)))
    return result is not None and int(result) == 0


def replica_status(conn: Any) -> dict[str, Any] | None:
    """`SHOW SLAVE STATUS` as a dict; None when the server replicates from nothing."""
    with conn.cursor(pymysql.cursors.DictCursor) as cursor:
        cursor.execute("SHOW SLAVE STATUS")
        row = cursor.fetchone()
    return dict(row) if row else None


def replicate_from(conn: Any, host: str, port: int, account: Account) -> None:
    """Make the server a read-only replica of host:port, from what it does not have yet."""
    set_read_only(conn, True)
    _execute(conn, "STOP SLAVE")
    _execute(conn, "RESET SLAVE ALL")
    _execute(conn, "SET GLOBAL gtid_slave_pos = @@GLOBAL.gtid_binlog_pos")
    _execute(
        conn,
        "CHANGE MASTER TO MASTER_HOST = %s, MASTER_PORT = %s, MASTER_USER = %s, "
        "MASTER_PASSWORD = %s, MASTER_USE_GTID = slave_pos, MASTER_CONNECT_RETRY = 1",
        (host, int(port), account.username, account.password),
    )
    _execute(conn, "START SLAVE")


def promote(conn: Any) -> None:
    """Make a replica a writable primary: stop and forget its replication, then read_only off."""
    _execute(conn, "STOP SLAVE")
    _execute(conn, "RESET SLAVE ALL")
    set_read_only(conn, False)


def replicating(status: Mapping[str, Any] | None, port: int) -> bool:
    """Whether a `SHOW SLAVE STATUS` row replicates from the port with both threads running."""
    return (
        status is not None
        and int(status.get("Master_Port") or 0) == port
        and status.get("Slave_IO_Running") == "Yes"
        and status.get("Slave_SQL_Running") == "Yes"
    )


# ------------------------------------------------------------ tenant cleanup


def drop_tenant_objects(conn: Any, keep_users: Iterable[str]) -> list[str]:
    """Drop every non-system schema and every user but `keep_users` and the system ones.

    Run on the primary: the drops replicate. Returns what was dropped (`schema` or `user@host`).
    """
    kept = set(keep_users) | SYSTEM_USERS
    dropped: list[str] = []
    with conn.cursor() as cursor:
        cursor.execute("SELECT SCHEMA_NAME FROM information_schema.SCHEMATA")
        schemas = [str(row[0]) for row in cursor.fetchall()]
        cursor.execute("SELECT User, Host FROM mysql.user")
        users = [(str(row[0]), str(row[1])) for row in cursor.fetchall()]
    for schema in schemas:
        if schema.lower() not in SYSTEM_SCHEMAS:
            _execute(conn, f"DROP DATABASE IF EXISTS {_quote(schema)}")
            dropped.append(schema)
    for user, host in users:
        if user not in kept:
            _execute(conn, "DROP USER IF EXISTS %s@%s", (user, host))
            dropped.append(f"{user}@{host}")
    return dropped
