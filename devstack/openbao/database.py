"""The database secrets engine of the OpenBao stand-in, with the MySQL plugin's behaviour.

Owns one mount of the engine (connections and dynamic roles as OpenBao stores them, the field
parsing and the answers of `config/*` and `roles/*`), the MySQL plugin's username template and
default password shape, and running creation and revocation statements on a real MariaDB/MySQL
server. Must never log or echo a root password or a minted password, and never run a statement the
role (or OpenBao's default revocation) did not name.

Deliberately left out compared with OpenBao: static roles, root rotation, `reset/*`, custom
`username_template` and password policies (refused), credential types other than `password`,
`renew_statements` and `rollback_statements` (stored and echoed, never run), connection pooling
(each statement batch opens its own connection), and every plugin but the MySQL family.
"""

from __future__ import annotations

import contextlib
import re
import secrets
import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pymysql

from devstack.openbao.api import JSON, ApiError, Reply, bad_request, base62, not_found
from devstack.openbao.clock import parse_duration

MYSQL_PLUGINS = {
    # plugin name -> (display name cut, role name cut, whole-name cut, uses unix time)
    "mysql-database-plugin": (10, 10, 32, True),
    "mysql-aurora-database-plugin": (10, 10, 32, True),
    "mysql-rds-database-plugin": (10, 10, 32, True),
    "mysql-legacy-database-plugin": (0, 4, 16, False),
}

DEFAULT_REVOCATION = [
    "REVOKE ALL PRIVILEGES, GRANT OPTION FROM '{{name}}'@'%'; DROP USER '{{name}}'@'%'"
]

_NAME = re.compile(r"^\w(?:[\w\-.]*\w)?$")
_TCP_DSN = re.compile(r"^(?P<creds>.*)@tcp\((?P<host>\[[^\]]+\]|[^:()]+)(?::(?P<port>\d+))?\)/")
_PASSWORD_CHARSETS = (string.ascii_lowercase, string.ascii_uppercase, string.digits, "-")


@dataclass(frozen=True)
class MariaDBEndpoint:
    """Where every connection of the stand-in really dials, whatever its `connection_url` says.

    A devstack's connection URLs name in-cluster Services (`keystone.openstack.svc:3306`) that
    do not resolve here; the endpoint maps them all to the one real server.

    Attributes:
        host: The server's host.
        port: The server's port.
        user: When set, replaces the connection's configured username (and `password` its
            password) for the engine's own logins.
        password: The password that goes with `user`.
    """

    host: str = "127.0.0.1"
    port: int = 3306
    user: str | None = None
    password: str = ""


@dataclass(frozen=True)
class Connection:
    """A `config/<name>` entry."""

    name: str
    plugin_name: str
    connection_url: str
    username: str
    password: str
    allowed_roles: tuple[str, ...]
    verify_connection: bool
    root_rotation_statements: tuple[str, ...] = ()
    password_policy: str = ""

    def read_data(self) -> JSON:
        """Return what `GET config/<name>` shows: everything but the password."""
        return {
            "plugin_name": self.plugin_name,
            "plugin_version": "",
            "connection_details": {
                "connection_url": self.connection_url,
                "username": self.username,
            },
            "allowed_roles": list(self.allowed_roles),
            "root_credentials_rotate_statements": list(self.root_rotation_statements),
            "password_policy": self.password_policy,
            "verify_connection": self.verify_connection,
        }

    def allows(self, role: str) -> bool:
        """Return whether `allowed_roles` admits a role name (globs with `*`)."""
        return any(_glob_match(pattern, role) for pattern in self.allowed_roles)


@dataclass(frozen=True)
class Role:
    """A dynamic `roles/<name>` entry."""

    name: str
    db_name: str
    creation_statements: tuple[str, ...] = ()
    revocation_statements: tuple[str, ...] = ()
    rollback_statements: tuple[str, ...] = ()
    renew_statements: tuple[str, ...] = ()
    default_ttl: int = 0
    max_ttl: int = 0

    def read_data(self) -> JSON:
        """Return what `GET roles/<name>` shows."""
        return {
            "db_name": self.db_name,
            "creation_statements": list(self.creation_statements),
            "revocation_statements": list(self.revocation_statements),
            "rollback_statements": list(self.rollback_statements),
            "renew_statements": list(self.renew_statements),
            "default_ttl": self.default_ttl,
            "max_ttl": self.max_ttl,
            "credential_type": "password",
        }


@dataclass(frozen=True)
class CredentialPlan:
    """Everything needed to create one user, settled while the engine's state is locked."""

    role: Role
    connection: Connection
    username: str
    password: str
    ttl: int
    max_ttl: int


@dataclass
class LeaseSecret:
    """What a database lease keeps to revoke its user: snapshotted when the user was created."""

    mount: str
    role: str
    db_name: str
    username: str
    revocation_statements: tuple[str, ...]
    connection: Connection


def _glob_match(pattern: str, value: str) -> bool:
    if pattern == "*":
        return True
    parts = pattern.split("*")
    if len(parts) == 1:
        return pattern == value
    regex = ".*".join(re.escape(part) for part in parts)
    return re.fullmatch(regex, value, re.DOTALL) is not None


def _string_list(value: object, field_name: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return tuple(part.strip() for part in value.split(",") if part.strip())
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return tuple(value)
    raise bad_request(f"invalid value for {field_name}: expected a list of strings")


def _statement_list(value: object, field_name: str) -> tuple[str, ...]:
    # Statements may contain commas, so a plain string is one statement, not a comma list.
    if isinstance(value, str):
        return (value,) if value else ()
    return _string_list(value, field_name)


def _ttl(value: object, field_name: str) -> int:
    try:
        seconds = parse_duration(value, field_name)
    except ValueError as exc:
        raise bad_request(str(exc)) from exc
    if seconds < 0:
        raise bad_request(f"{field_name} must not be negative")
    return seconds


def _bool(value: object) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in ("1", "t", "true", "yes")
    return bool(value)


def split_statements(statements: Sequence[str]) -> list[str]:
    """Split each statement string on `;` and drop empty parts, as the MySQL plugin does."""
    return [part.strip() for stmt in statements for part in stmt.split(";") if part.strip()]


def build_username(plugin_name: str, display_name: str, role_name: str, unix_time: int) -> str:
    """Render the MySQL plugin's default username template.

    `v-<display|10>-<role|10>-<random 20>-<unix time>` cut to 32 bytes (the legacy plugin:
    `v-<role|4>-<random 20>` cut to 16).

    Args:
        plugin_name: One of the MySQL family plugin names.
        display_name: The requesting token's display name.
        role_name: The role the credential is read from.
        unix_time: The (simulated) creation time in seconds.

    Returns:
        The username.
    """
    display_cut, role_cut, total_cut, with_time = MYSQL_PLUGINS[plugin_name]
    random_part = base62(20)
    if with_time:
        name = f"v-{display_name[:display_cut]}-{role_name[:role_cut]}-{random_part}-{unix_time}"
    else:
        name = f"v-{role_name[:role_cut]}-{random_part}"
    return name.encode()[:total_cut].decode(errors="ignore")


def generate_password(length: int = 20) -> str:
    """Return a password in the shape of OpenBao's default policy (letters, digits and `-`)."""
    alphabet = "".join(_PASSWORD_CHARSETS)
    while True:
        password = "".join(secrets.choice(alphabet) for _ in range(length))
        if all(any(ch in charset for ch in password) for charset in _PASSWORD_CHARSETS):
            return password


def _expiration(unix_time: float) -> str:
    return datetime.fromtimestamp(unix_time, tz=UTC).strftime("%Y-%m-%d %H:%M:%S+0000")


def _substitute(statement: str, values: Mapping[str, str]) -> str:
    for key, value in values.items():
        statement = statement.replace("{{" + key + "}}", value)
    return statement


class DatabaseMount:
    """One mount of the database engine: its connections, its roles, and the SQL it runs."""

    def __init__(self, path: str, accessor: str, endpoint: MariaDBEndpoint | None) -> None:
        """Create an empty mount.

        Args:
            path: The mount path, e.g. `database/mariadb`.
            accessor: The mount's accessor.
            endpoint: Where connections really dial; None dials each `connection_url`'s address.
        """
        self.path = path
        self.accessor = accessor
        self.endpoint = endpoint
        self.connections: dict[str, Connection] = {}
        self.roles: dict[str, Role] = {}

    # --- storage paths ---------------------------------------------------------------------------

    def exists(self, subpath: str) -> bool:
        """Return whether a `config/<name>` or `roles/<name>` entry exists (create vs update)."""
        kind, _, name = subpath.partition("/")
        if kind == "config":
            return name in self.connections
        if kind == "roles":
            return name in self.roles
        return True

    def read_config(self, name: str) -> Reply:
        """Answer `GET config/<name>`."""
        connection = self.connections.get(name)
        if connection is None:
            raise not_found()
        return Reply(data=connection.read_data())

    def build_connection(self, name: str, data: Mapping[str, Any]) -> Connection:
        """Parse a `config/<name>` write into the entry to store (merged over an existing one).

        Raises:
            ApiError: A field is missing or not supported.
        """
        _check_name(name)
        old = self.connections.get(name)
        plugin = str(data.get("plugin_name", old.plugin_name if old else ""))
        if not plugin:
            raise bad_request("plugin_name must be provided")
        if plugin not in MYSQL_PLUGINS:
            raise bad_request(f'plugin "{plugin}" is not supported by this OpenBao stand-in')
        for unsupported in ("username_template", "password_policy"):
            if data.get(unsupported):
                raise bad_request(f"{unsupported} is not supported by this OpenBao stand-in")
        url = str(data.get("connection_url", old.connection_url if old else ""))
        if not url:
            raise bad_request("connection_url cannot be empty")
        connection = Connection(
            name=name,
            plugin_name=plugin,
            connection_url=url,
            username=str(data.get("username", old.username if old else "")),
            password=str(data.get("password", old.password if old else "")),
            allowed_roles=_string_list(
                data.get("allowed_roles", list(old.allowed_roles) if old else None),
                "allowed_roles",
            ),
            verify_connection=_bool(data.get("verify_connection", True)),
            root_rotation_statements=_statement_list(
                data.get(
                    "root_rotation_statements", list(old.root_rotation_statements) if old else None
                ),
                "root_rotation_statements",
            ),
        )
        _dial_target(connection, self.endpoint)
        return connection

    def verify(self, connection: Connection) -> None:
        """Open and close a session with the connection's credentials (`verify_connection`).

        Raises:
            ApiError: The server refused or could not be reached.
        """
        try:
            session = _connect(connection, self.endpoint)
        except pymysql.MySQLError as exc:
            raise bad_request(
                f"error creating database object: error verifying connection: {_sql_error(exc)}"
            ) from exc
        session.close()

    def build_role(self, name: str, data: Mapping[str, Any]) -> Role:
        """Parse a `roles/<name>` write; on update only the fields sent change.

        Raises:
            ApiError: `db_name` is missing, a field is malformed, or the role's connection does
                not admit it.
        """
        _check_name(name)
        old = self.roles.get(name)
        credential_type = data.get("credential_type", "password")
        if credential_type != "password":
            raise bad_request(
                f'credential_type "{credential_type}" is not supported by this stand-in'
            )
        if data.get("credential_config"):
            raise bad_request("credential_config is not supported by this OpenBao stand-in")

        def statements(key: str) -> tuple[str, ...]:
            if key in data:
                return _statement_list(data[key], key)
            return tuple(getattr(old, key)) if old else ()

        role = Role(
            name=name,
            db_name=str(data.get("db_name", old.db_name if old else "")),
            creation_statements=statements("creation_statements"),
            revocation_statements=tuple(s for s in statements("revocation_statements") if s),
            rollback_statements=statements("rollback_statements"),
            renew_statements=statements("renew_statements"),
            default_ttl=_ttl(data["default_ttl"], "default_ttl")
            if "default_ttl" in data
            else (old.default_ttl if old else 0),
            max_ttl=_ttl(data["max_ttl"], "max_ttl")
            if "max_ttl" in data
            else (old.max_ttl if old else 0),
        )
        if not role.db_name:
            raise bad_request("database name is required")
        connection = self.connections.get(role.db_name)
        # OpenBao itself checks allowed_roles only when credentials are read; the reference
        # deployment's bootstrap contract has role writes refused too, which the order
        # reconciler reports, so the stand-in refuses at write time as well.
        if connection is not None and not connection.allows(name):
            raise bad_request(f'"{name}" is not an allowed role')
        return role

    def read_role(self, name: str) -> Reply:
        """Answer `GET roles/<name>` (404 when absent)."""
        role = self.roles.get(name)
        if role is None:
            raise not_found()
        return Reply(data=role.read_data())

    # --- credentials -----------------------------------------------------------------------------

    def plan_credentials(
        self, role_name: str, display_name: str, now: float, mount_max_ttl: int
    ) -> CredentialPlan:
        """Settle the user to create for `creds/<role>`, without touching the database.

        Raises:
            ApiError: Unknown role, missing connection, role not allowed, or no statements.
        """
        role = self.roles.get(role_name)
        if role is None:
            raise bad_request(f"unknown role: {role_name}")
        connection = self.connections.get(role.db_name)
        if connection is None:
            raise ApiError(500, f'failed to find entry for connection with name: "{role.db_name}"')
        if not connection.allows(role_name):
            raise bad_request(f'"{role_name}" is not an allowed role')
        if not split_statements(role.creation_statements):
            raise ApiError(500, "empty creation statements")
        max_ttl = min(role.max_ttl or mount_max_ttl, mount_max_ttl)
        ttl = min(role.default_ttl or mount_max_ttl, max_ttl)
        return CredentialPlan(
            role=role,
            connection=connection,
            username=build_username(connection.plugin_name, display_name, role_name, int(now)),
            password=generate_password(),
            ttl=ttl,
            max_ttl=max_ttl,
        )

    def create_user(self, plan: CredentialPlan, now: float) -> LeaseSecret:
        """Run the role's creation statements for a planned user, in one transaction.

        A failure leaves no user behind: MySQL commits `CREATE USER` implicitly, so the stand-in
        drops the half-made user (OpenBao leaves it to the operator).

        Raises:
            ApiError: The statements failed.
        """
        values = {
            "name": plan.username,
            "username": plan.username,
            "password": plan.password,
            # OpenBao pads the expiration it hands the plugin by five seconds.
            "expiration": _expiration(now + plan.ttl + 5),
        }
        statements = [
            _substitute(s, values) for s in split_statements(plan.role.creation_statements)
        ]
        try:
            _run(plan.connection, self.endpoint, statements)
        except pymysql.MySQLError as exc:
            _drop_quietly(plan.connection, self.endpoint, plan.username)
            # A syntax error quotes the statement text near the fault, which may hold the password.
            message = _sql_error(exc).replace(plan.password, "<password>")
            raise ApiError(500, f"error creating user: {message}") from exc
        return LeaseSecret(
            mount=self.path,
            role=plan.role.name,
            db_name=plan.role.db_name,
            username=plan.username,
            revocation_statements=plan.role.revocation_statements,
            connection=plan.connection,
        )

    def revoke_user(self, secret: LeaseSecret) -> None:
        """Run a lease's snapshotted revocation statements (or the plugin's default).

        The live connection entry is used when it still exists (its credentials may have been
        updated); otherwise the one the user was created through.

        Raises:
            pymysql.MySQLError: The statements failed; the lease must stay for a retry.
        """
        connection = self.connections.get(secret.db_name, secret.connection)
        statements = list(secret.revocation_statements) or DEFAULT_REVOCATION
        values = {"name": secret.username, "username": secret.username}
        _run(
            connection,
            self.endpoint,
            [_substitute(s, values) for s in split_statements(statements)],
        )


def _check_name(name: str) -> None:
    if not _NAME.match(name):
        raise bad_request(f'invalid name "{name}"')


def _dial_target(
    connection: Connection, endpoint: MariaDBEndpoint | None
) -> tuple[str, int, str, str]:
    """Return host, port, user and password for the engine's own session."""
    if endpoint is not None and endpoint.user is not None:
        user, password = endpoint.user, endpoint.password
    else:
        user, password = connection.username, connection.password
    if endpoint is not None:
        return endpoint.host, endpoint.port, user, password
    url = connection.connection_url.replace("{{username}}", user).replace("{{password}}", password)
    match = _TCP_DSN.match(url)
    if match is None:
        raise bad_request("connection_url must have the form <user>:<password>@tcp(<host>:<port>)/")
    return match.group("host").strip("[]"), int(match.group("port") or 3306), user, password


def _connect(connection: Connection, endpoint: MariaDBEndpoint | None) -> pymysql.Connection[Any]:
    host, port, user, password = _dial_target(connection, endpoint)
    return pymysql.connect(
        host=host,
        port=port,
        user=user,
        password=password,
        connect_timeout=5,
        read_timeout=30,
        write_timeout=30,
        autocommit=False,
        # OpenBao's MySQL plugin dials without TLS unless the connection URL asks for it; and
        # PyMySQL's default "preferred" TLS would build a new SSLContext (~40 ms) per connect.
        ssl_disabled=True,
    )


def _run(
    connection: Connection, endpoint: MariaDBEndpoint | None, statements: Sequence[str]
) -> None:
    session = _connect(connection, endpoint)
    try:
        session.begin()
        with session.cursor() as cursor:
            for statement in statements:
                # No arguments: PyMySQL then sends the text as is (no %-interpolation).
                cursor.execute(statement)
        session.commit()
    except pymysql.MySQLError:
        session.rollback()
        raise
    finally:
        session.close()


def _drop_quietly(connection: Connection, endpoint: MariaDBEndpoint | None, username: str) -> None:
    # Best effort: the creation error is the one the client needs to see.
    with contextlib.suppress(pymysql.MySQLError):
        _run(connection, endpoint, [f"DROP USER IF EXISTS '{username}'@'%'"])


def _sql_error(exc: pymysql.MySQLError) -> str:
    # PyMySQL errors carry (code, message); the message never holds the session password.
    args = exc.args
    return f"Error {args[0]}: {args[1]}" if len(args) >= 2 else type(exc).__name__
