"""The admin connection to a failover group's primary: assembled in one place, pooled, bounded.

Owns connecting as the group's operator credential (falling back to root with
``MYSQL_ROOT_PASSWORD`` when the operator login is refused and that password is set), TLS when
the group asks for it (verified against the CA of the group's TLS Secret, for the name
``mysql-<group>-<site>.<namespace>.svc.cluster.local``, with one ``SSLContext`` per CA reused
for every connect); a group without TLS is refused unless ``TENANTDB_MYSQL_PLAINTEXT_GROUPS``
names it (or ``TENANTDB_MYSQL_REQUIRE_TLS`` is false), then reached in plaintext, never with
PyMySQL's unverified TLS; one pooled connection per group and site per worker process,
with connect, read and write timeouts; the guard every worker shares
(``tenantdb.adapters.groupguard``: a site's circuit, one dial at a time, a group's slots), so an
unreachable group costs the fleet one connect timeout per open circuit; and running statements
with their bound values, counting them, timing every connect, query and statement and counting
its failures (``tenantdb_sql_request_*``), and turning driver errors into ``AdminError`` whose
text never holds a password.

In-cluster addresses are dialled as they are unless ``TENANTDB_ADDRESS_MAP_FILE`` maps them (a
JSON object of ``host:port`` to ``host:port``), for a tenantdb that runs outside the cluster.
"""

from __future__ import annotations

import hashlib
import json
import logging
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pymysql

from tenantdb.adapters.groupguard import Entry, GroupGuard
from tenantdb.adapters.metrics import MYSQL_STATEMENTS, sql_request
from tenantdb.adapters.redisclient import build_redis
from tenantdb.core.mysqldatabase.errors import is_transient as _is_transient
from tenantdb.core.mysqldatabase.errors import may_have_run
from tenantdb.core.mysqldatabase.sql import (
    CONNECTION_CHECK,
    Dialect,
    Statement,
    detect_dialect,
    is_read_only_bypassed,
    schema_privilege_columns,
    session_bounds,
)
from tenantdb.settings import Settings, load_settings

log = logging.getLogger(__name__)

ACCESS_DENIED = 1045
MAX_CONNECTION_AGE = 300.0
DIAL_WAIT = 0.2
"""Seconds a pass waits for another's connect to the same site before it comes back later."""


class AdminError(Exception):
    """A MySQL failure, worded without any credential.

    ``transient`` means the order waits Pending and retries. ``may_have_run`` means the failing
    statement itself may have taken effect (the connection failed after it was sent); a server
    error says it did not. The statements before it ran: ``AdminSession.executed`` counts them.
    """

    def __init__(
        self,
        message: str,
        *,
        code: int | None,
        transient: bool,
        may_have_run: bool = False,
        retry_after: float = 0.0,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.transient = transient
        self.may_have_run = may_have_run
        self.retry_after = retry_after
        """Seconds before a retry can fare better (the site's circuit closes); 0 when unknown."""


class TLSRequiredError(Exception):
    """The group asks for no TLS and tenantdb is set to refuse plaintext."""


def plaintext_allowed(group: str, settings: Settings) -> bool:
    """Whether a group that sets no spec.tls may be reached in plaintext: TLS is not required,
    or ``mysql_plaintext_groups`` names the group (``namespace/name``) or its namespace
    (``namespace/*``). ``group`` is a target's ``namespace/name@uid``."""
    if not settings.mysql_require_tls:
        return True
    name = group.partition("@")[0]
    namespace = name.partition("/")[0]
    allowed = {g.strip() for g in settings.mysql_plaintext_groups.split(",") if g.strip()}
    return name in allowed or f"{namespace}/*" in allowed


def warn_about_plaintext(settings: Settings) -> None:
    """Say at start which MySQL groups this worker may reach without TLS."""
    if not settings.mysql_require_tls:
        log.warning(
            "TENANTDB_MYSQL_REQUIRE_TLS is false: every MySQL failover group without spec.tls"
            " is reached in plaintext, its admin password included"
        )
        return
    groups = sorted({g.strip() for g in settings.mysql_plaintext_groups.split(",") if g.strip()})
    if groups:
        log.warning(
            "MySQL failover groups reached in plaintext when they set no spec.tls: %s",
            ", ".join(groups),
        )


@dataclass(frozen=True)
class AdminLogin:
    """The group's admin credential, read from its operator Secret; never shown."""

    user: str
    password: str = field(repr=False)
    root_password: str = field(default="", repr=False)


@dataclass(frozen=True)
class Target:
    """One site of one group, as the connection needs it."""

    group: str
    """namespace/name@uid: a recreated group gets new connections."""
    site: str
    address: str
    """The in-cluster host:port."""
    server_name: str
    """The name the server's certificate must carry."""
    ca_pem: bytes | None = None
    """The CA of the group's TLS Secret; None when the group asks for no TLS."""


def site_address(group: str, site: str, namespace: str) -> str:
    """The in-cluster address of a group site's MySQL."""
    return f"mysql-{group}-{site}-internal.{namespace}.svc.cluster.local:3306"


def site_server_name(group: str, site: str, namespace: str) -> str:
    """The name a group site's server certificate is issued for."""
    return f"mysql-{group}-{site}.{namespace}.svc.cluster.local"


def _address_map() -> Mapping[str, str]:
    path = load_settings().address_map_file
    if not path:
        return {}
    return _read_map(path, Path(path).stat().st_mtime)


_MAPS: dict[tuple[str, float], Mapping[str, str]] = {}


def _read_map(path: str, mtime: float) -> Mapping[str, str]:
    found = _MAPS.get((path, mtime))
    if found is None:
        loaded = json.loads(Path(path).read_text(encoding="utf-8"))
        found = {str(k): str(v) for k, v in loaded.items()}
        _MAPS.clear()
        _MAPS[(path, mtime)] = found
    return found


def resolve(address: str) -> tuple[str, int]:
    """Where to dial an in-cluster address (mapped when the address map names it)."""
    real = _address_map().get(address, address)
    host, _, port = real.rpartition(":")
    return host, int(port)


class _PinnedNameContext(ssl.SSLContext):
    """A verifying context that checks the group's server name, whatever address is dialled."""

    server_name = ""

    def wrap_socket(self, sock: socket.socket, *args: Any, **kwargs: Any) -> ssl.SSLSocket:
        kwargs["server_hostname"] = self.server_name
        return super().wrap_socket(sock, *args, **kwargs)


_CONTEXTS: dict[tuple[str, str], ssl.SSLContext] = {}
_CONTEXTS_LOCK = threading.Lock()


def tls_context(ca_pem: bytes, server_name: str) -> ssl.SSLContext:
    """The verifying context for one CA and server name, built once per process."""
    key = (hashlib.sha256(ca_pem).hexdigest(), server_name)
    with _CONTEXTS_LOCK:
        found = _CONTEXTS.get(key)
        if found is None:
            context = _PinnedNameContext(ssl.PROTOCOL_TLS_CLIENT)
            context.minimum_version = ssl.TLSVersion.TLSv1_2
            context.load_verify_locations(cadata=ca_pem.decode("ascii"))
            context.server_name = server_name
            found = _CONTEXTS[key] = context
    return found


def _code(error: BaseException) -> int | None:
    args = getattr(error, "args", ())
    return args[0] if args and isinstance(args[0], int) else None


def _scrub(text: str, secrets: Sequence[str]) -> str:
    for secret in secrets:
        if secret:
            text = text.replace(secret, "***")
    return text


def describe_failure(error: BaseException, secrets: Sequence[str] = ()) -> str:
    """A driver error as one line: its code and the server's words, passwords removed."""
    code = _code(error)
    args: tuple[Any, ...] = tuple(getattr(error, "args", ()))
    words = str(args[1]) if len(args) > 1 else str(error) or type(error).__name__
    return _scrub(f"({code}) {words}" if code is not None else words, secrets)


def _connection_failed(error: BaseException, code: int | None) -> bool:
    """Whether the failure is the connection's, not the server's verdict on a statement.

    PyMySQL raises ``InterfaceError`` for a connection it already knows is gone (``(0, '')``),
    ``OperationalError`` with a client code (2000 and up) for one that failed under it.
    """
    if isinstance(error, (OSError, pymysql.err.InterfaceError)):
        return True
    return isinstance(error, pymysql.err.OperationalError) and (code is None or code >= 2000)


def _failure(error: BaseException, label: str, *, sent: bool, secrets: Sequence[str]) -> AdminError:
    code = _code(error)
    connection = _connection_failed(error, code)
    return AdminError(
        f"{label}: {describe_failure(error, secrets)}",
        code=code,
        transient=_is_transient(code, connection_failed=connection),
        may_have_run=sent and may_have_run(code, connection_failed=connection),
    )


@dataclass
class _Pooled:
    connection: pymysql.connections.Connection[Any]
    dialect: Dialect
    opened: float
    read_only_bypassed: bool = False
    privilege_columns: tuple[tuple[str, str], ...] = ()
    folds_case: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)


class AdminSession:
    """One pass's use of a pooled connection."""

    def __init__(self, pooled: _Pooled, site: str, deadline: float = float("inf")) -> None:
        self._pooled = pooled
        self.site = site
        self.deadline = deadline
        """When the pass's MySQL time runs out (``time.monotonic()``)."""
        self.executed = 0
        """How many writing statements ran in this session."""
        self.failed = False
        """Whether a query or statement failed: the connection is then never pooled again."""

    @property
    def dialect(self) -> Dialect:
        """The server's dialect."""
        return self._pooled.dialect

    @property
    def read_only_bypassed(self) -> bool:
        """Whether the admin account can write through ``read_only``: the server then does not
        fence it, and only tenantdb's own look before a batch does."""
        return self._pooled.read_only_bypassed

    @property
    def privilege_columns(self) -> tuple[tuple[str, str], ...]:
        """The server's ``mysql.db`` privilege columns and their privileges; empty when it did
        not report them (the look then reads ``information_schema``)."""
        return self._pooled.privilege_columns

    @property
    def folds_case(self) -> bool:
        """Whether the server keeps schema names in lower case (``lower_case_table_names``
        other than 0): its grant rows then name a schema in lower case."""
        return self._pooled.folds_case

    def _within_budget(self) -> None:
        if time.monotonic() > self.deadline:
            self.failed = True
            raise AdminError(
                f"the pass's MySQL time on site {self.site} ran out", code=None, transient=True
            )

    def query(self, statement: Statement) -> list[tuple[Any, ...]]:
        """Run a read-only query; its rows."""
        self._within_budget()
        MYSQL_STATEMENTS.labels(verb="SELECT").inc()
        try:
            with sql_request("query"), self._pooled.connection.cursor() as cursor:
                cursor.execute(statement.template, statement.params)
                return [tuple(row) for row in cursor.fetchall()]
        except (pymysql.err.MySQLError, OSError) as error:
            self.failed = True
            raise _failure(error, f"query {statement.shown}", sent=False, secrets=()) from None

    def execute(
        self,
        statements: Sequence[Statement],
        values: Mapping[str, str],
        check: Callable[[], None] | None = None,
    ) -> None:
        """Run statements in order, each bound value looked up in ``values`` when it is a key.

        ``check`` runs before each statement (the pass's lease check): a pass that lost its
        order sends at most the statement that was already on the wire.

        Raises:
            AdminError: a statement failed; the ``executed`` before it ran, and it may have
                (``may_have_run``) when the connection failed under it.
            Exception: whatever ``check`` raises, before the statement it guards.
        """
        secrets = list(values.values())
        for statement in statements:
            if check is not None:
                check()
            self._within_budget()
            params = tuple(values.get(p, p) for p in statement.params)
            MYSQL_STATEMENTS.labels(verb=statement.template.split(" ", 1)[0]).inc()
            try:
                with sql_request("execute"), self._pooled.connection.cursor() as cursor:
                    cursor.execute(statement.template, params)
            except (pymysql.err.MySQLError, OSError) as error:
                self.failed = True
                raise _failure(
                    error, f"exec {statement.shown}", sent=True, secrets=secrets
                ) from None
            self.executed += 1


class GroupBusyError(Exception):
    """Every slot of the group is taken: the pass comes back shortly, nothing recorded."""


class AdminPool:
    """The admin connections of one worker process, one per group site."""

    def __init__(self, guard: GroupGuard) -> None:
        """A pool; ``guard`` shares circuits and slots with every other process."""
        self._guard = guard
        self._pooled: dict[tuple[str, str, str], _Pooled] = {}
        self._warned: set[str] = set()
        self._lock = threading.Lock()

    def close(self) -> None:
        """Close every pooled connection."""
        with self._lock:
            pooled, self._pooled = list(self._pooled.values()), {}
        for entry in pooled:
            _close(entry.connection)

    @contextmanager
    def session(self, target: Target, login: AdminLogin) -> Iterator[AdminSession]:
        """A session on the target's pooled connection, opened on first use.

        The session first takes one of the group's slots (``GroupBusyError`` when
        none is free) and is refused at once while the site's circuit is open (a connect to it
        failed a moment ago, in this process or another). Its queries and statements share the
        pass's time budget (``TENANTDB_MYSQL_PASS_BUDGET_SECONDS``).

        A session in which anything failed (a query, a statement, or the caller's block, even
        when the caller caught the error inside it) closes its connection instead of returning
        it to the pool: after a failure mid-statement the connection's state is unknown (PyMySQL
        keeps a dead one, whose next use raises ``InterfaceError``), and the next session
        reconnects.

        Raises:
            AdminError: the server cannot be reached (now, or a moment ago) or refuses the login.
            GroupBusyError: every slot of the group is taken.
            TLSRequiredError: the group asks for no TLS and plaintext is refused.
        """
        token = self._enter(target)
        try:
            with self._pooled_session(target, login) as session:
                yield session
        finally:
            self._guard.leave(target.group, token)

    def _enter(self, target: Target) -> str:
        admitted = self._guard.enter(target.group, target.address)
        if admitted.entry is Entry.OPEN:
            raise _circuit_open(target, admitted.message, admitted.closes_in)
        if admitted.entry is Entry.BUSY:
            raise GroupBusyError(
                f"{self._guard.limit} passes already work on the group; coming back shortly"
            )
        return admitted.token

    @contextmanager
    def _pooled_session(self, target: Target, login: AdminLogin) -> Iterator[AdminSession]:
        key = (target.group, target.site, target.address)
        with self._lock:
            pooled = self._pooled.pop(key, None)
        if pooled is not None and time.monotonic() - pooled.opened > MAX_CONNECTION_AGE:
            _close(pooled.connection)
            pooled = None
        if pooled is None:
            pooled = self._open(target, login)
        broken = True
        try:
            with pooled.lock:
                budget = load_settings().mysql_pass_budget_seconds
                session = AdminSession(pooled, target.site, time.monotonic() + budget)
                yield session
            broken = session.failed
        finally:
            if broken:
                _close(pooled.connection)
            else:
                with self._lock:
                    replaced = self._pooled.setdefault(key, pooled)
                if replaced is not pooled:
                    _close(pooled.connection)

    def _open(self, target: Target, login: AdminLogin) -> _Pooled:
        settings = load_settings()
        if target.ca_pem is None and not plaintext_allowed(target.group, settings):
            raise TLSRequiredError(
                "the group sets no spec.tls and tenantdb reaches MySQL over TLS only: set the"
                " group's spec.tls, or name it in TENANTDB_MYSQL_PLAINTEXT_GROUPS"
            )
        host, port = resolve(target.address)
        options: dict[str, Any] = {
            "host": host,
            "port": port,
            "connect_timeout": settings.mysql_connect_timeout_seconds,
            # The server's greeting is read with the read timeout: a server that accepts TCP
            # and never answers costs the connect timeout, not the (longer) read timeout.
            "read_timeout": settings.mysql_connect_timeout_seconds,
            "write_timeout": settings.mysql_read_timeout_seconds,
            "autocommit": True,
            "charset": "utf8mb4",
            "init_command": session_bounds(settings.mysql_lock_wait_seconds),
        }
        if target.ca_pem is not None:
            options["ssl"] = tls_context(target.ca_pem, target.server_name)
        else:
            # Without it PyMySQL "prefers" TLS: unverified, on a new SSLContext per connect.
            options["ssl_disabled"] = True
        secrets = [login.password, login.root_password]
        if not self._dial_turn(target, settings):
            raise GroupBusyError(f"another pass is connecting to site {target.site}")
        try:
            # The connect this pass waited for may have failed and opened the circuit.
            failed = self._guard.circuit(target.address)
            if failed is not None:
                raise _circuit_open(target, *failed)
            return self._connect(target, login, options, secrets)
        finally:
            self._guard.end_dial(target.address)

    def _dial_turn(self, target: Target, settings: Settings) -> bool:
        """Wait a moment for another pass's connect to the site (a healthy one takes a few
        milliseconds), then take the turn; False when it did not come."""
        hold = settings.mysql_connect_timeout_seconds * 2 + 2  # the operator login, then root
        deadline = time.monotonic() + DIAL_WAIT
        while not self._guard.begin_dial(target.address, hold):
            if time.monotonic() > deadline:
                return False
            time.sleep(0.02)
        return True

    def _connect(
        self, target: Target, login: AdminLogin, options: dict[str, Any], secrets: list[str]
    ) -> _Pooled:
        settings = load_settings()
        try:
            with sql_request("connect"):
                connection = self._login(options, login)
                with connection.cursor() as cursor:
                    cursor.execute(CONNECTION_CHECK.template)
                    row = cursor.fetchone()
        except (pymysql.err.MySQLError, OSError) as error:
            failure = _failure(error, f"connect to site {target.site}", sent=False, secrets=secrets)
            if failure.transient:
                failure.retry_after = self._guard.trip(target.address, str(failure))
            raise failure from None
        self._guard.heal(target.address)
        # The handshake was bounded by the connect timeout; queries get the read timeout.
        # PyMySQL applies a changed _read_timeout to its socket before the next read.
        connection._read_timeout = settings.mysql_read_timeout_seconds
        version, privileges = (str(row[0]), str(row[1] or "")) if row else ("", "")
        columns = schema_privilege_columns(str(row[2] or "").split(",")) if row else ()
        folds_case = bool(row) and str(row[3] or "0") != "0"
        bypassed = is_read_only_bypassed(version, privileges)
        if bypassed and target.address not in self._warned:
            self._warned.add(target.address)
            log.warning(
                "the admin account of group %s can write through read_only on site %s: the"
                " server does not fence its writes during a failover; grant it everything but"
                " READ_ONLY ADMIN (MariaDB) or SUPER and CONNECTION_ADMIN (MySQL)",
                target.group,
                target.site,
            )
        return _Pooled(
            connection, detect_dialect(version), time.monotonic(), bypassed, columns, folds_case
        )

    @staticmethod
    def _login(options: dict[str, Any], login: AdminLogin) -> pymysql.connections.Connection[Any]:
        try:
            return pymysql.connect(user=login.user, password=login.password.encode(), **options)
        except pymysql.err.OperationalError as error:
            if _code(error) != ACCESS_DENIED or not login.root_password:
                raise
        return pymysql.connect(user="root", password=login.root_password.encode(), **options)


def _circuit_open(target: Target, message: str, closes_in: float) -> AdminError:
    return AdminError(
        f"site {target.site} failed a moment ago: {message}",
        code=None,
        transient=True,
        retry_after=closes_in,
    )


def _close(connection: pymysql.connections.Connection[Any]) -> None:
    try:
        connection.close()
    except Exception:
        log.debug("closing a MySQL connection failed", exc_info=True)


_POOL: AdminPool | None = None
_POOL_LOCK = threading.Lock()


def admin_pool() -> AdminPool:
    """This worker process's pool."""
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            settings = load_settings()
            _POOL = AdminPool(GroupGuard.from_settings(build_redis(settings), settings))
        return _POOL
